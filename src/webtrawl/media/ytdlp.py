"""The bridge to yt-dlp's extractors (`pip install webtrawl[ytdlp]`, then `--resolver ytdlp`).

yt-dlp knows how thousands of sites hand out their audio and video. This resolver claims a page when one of
yt-dlp's site extractors (not its generic one, which would read every page of the crawl a second time)
says the page's URL is its kind; on each attempt it asks yt-dlp for the page's media, with the crawl's
User-Agent, and downloads the single-file format yt-dlp picks (best audio when the crawl collects only
audio) with the headers yt-dlp says the address needs. webtrawl downloads it (with resume), so formats
yt-dlp would have to merge from separate streams are left out.

It is active only when named (`--resolver ytdlp`) and only when yt-dlp is installed. yt-dlp makes its own
requests to the site while resolving; they are not paced by the crawl.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterable
from functools import cache
from typing import Any

from ..errors import ConfigError
from .resolvers import MediaClient, MediaTask, Page, Resolved, ResolveError

NAME = "ytdlp"


def installed() -> bool:
    try:
        return importlib.util.find_spec("yt_dlp") is not None
    except ValueError:  # a module entry set to None: imports of it are blocked
        return False


@cache
def _extractors() -> tuple[Any, ...]:
    """yt-dlp's site extractors, without the generic one (listing them is cheap; each compiles its
    pattern on first use)."""
    from yt_dlp.extractor import gen_extractor_classes

    return tuple(ie for ie in gen_extractor_classes() if ie.ie_key() != "Generic")


class YtDlpResolver:
    """Media of the pages yt-dlp has a site extractor for."""

    name = NAME
    hosts: tuple[str, ...] = ("*",)
    opt_in = True
    """Used only when the crawl names it: its extractors could claim pages other resolvers know better."""
    generic = False
    """Whether yt-dlp's generic extractor may read pages no site extractor claims (for tests on local sites)."""

    def __init__(self) -> None:
        if not installed():
            raise ConfigError("the ytdlp resolver needs yt-dlp: pip install 'webtrawl[ytdlp]'")
        self._format = "best"

    def collects(self, kinds: Iterable[str]) -> None:
        """The crawl collects these kinds: an audio-only crawl asks for the best audio."""
        self._format = "bestaudio/best" if set(kinds) == {"audio"} else "best"

    def find(self, page: Page) -> Iterable[MediaTask]:
        if self.generic or any(ie.suitable(page.url) for ie in _extractors()):
            yield MediaTask(self.name, page.url, page.url)

    async def resolve(self, task: MediaTask, client: MediaClient) -> Resolved:
        info = await asyncio.to_thread(self._extract, task.url, client.user_agent)
        url = info.get("url")
        if not url:
            raise ResolveError("yt-dlp found no single-file format to download", retryable=False)
        return Resolved(url, {str(k): str(v) for k, v in (info.get("http_headers") or {}).items()})

    def _extract(self, url: str, user_agent: str) -> dict[str, Any]:
        from yt_dlp import YoutubeDL
        from yt_dlp.utils import YoutubeDLError

        options = {
            "quiet": True,
            "no_warnings": True,
            "noprogress": True,
            "skip_download": True,
            "format": self._format,
            "http_headers": {"User-Agent": user_agent},
            "force_generic_extractor": False,
        }
        try:
            with YoutubeDL(options) as ydl:
                info = ydl.extract_info(url, download=False)
        except YoutubeDLError as exc:
            raise ResolveError(f"yt-dlp: {exc}"[:300]) from None
        if not isinstance(info, dict) or info.get("_type") == "playlist":
            raise ResolveError("yt-dlp found a playlist, not one media file", retryable=False)
        return info
