"""The resolver of the local music site (`tests.sites.music`), installed as a plugin the way users install one.

Its track pages hold only a track id; the address of the audio comes from a JSON API that wants the page's
cookie, is signed for the User-Agent that asked, and expires: so it is asked again on every attempt.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser

from webtrawl.media.resolvers import MediaClient, MediaTask, Page, Resolved, ResolveError

NAME = "musicsite"


class MusicSiteResolver:
    name = NAME
    hosts = ("127.0.0.1:*",)

    def find(self, page: Page) -> Iterable[MediaTask]:
        player = LexborHTMLParser(page.html).css_first("#player[data-track-id]")
        if player is not None:
            yield MediaTask(self.name, player.attributes["data-track-id"] or "", page.url)

    async def resolve(self, task: MediaTask, client: MediaClient) -> Resolved:
        await client.get(task.url)  # the track page sets the cookie the API wants
        reply = await client.get(urljoin(task.url, f"/api/track/{task.id}"))
        if reply.status != 200:
            raise ResolveError(f"track API answered HTTP {reply.status}", retryable=reply.status >= 500)
        return Resolved(urljoin(task.url, reply.json()["url"]))


def install(directory: Path) -> Path:
    """Make `directory` hold an installed distribution declaring this resolver; put it on sys.path to use it."""
    info = directory / "webtrawl_musicsite-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: webtrawl-musicsite\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[webtrawl.resolvers]\n{NAME} = {__name__}:MusicSiteResolver\n")
    return directory
