"""What happens to one URL handed out by the frontier: robots check, fetch, parse, and the verdict.

`PageHandler.handle` never raises for a URL: whatever goes wrong becomes a failed (or retry-later)
completion with a reason, so one bad page never stops the crawl.
"""

from __future__ import annotations

import logging
import time
from collections import deque

from .config import CrawlConfig
from .errors import InvalidURL
from .fetch.page import PageFetcher, Rendering
from .fetch.robots import tag_directives
from .media.resolvers import Page as MediaPage
from .media.resolvers import Registry
from .media.sniffed import Sniffs
from .models import NOT_DOWNLOADED, Capture, Completion, Entry, FetchOutcome, Link, NewURL, ParsedPage, Previous
from .parse.analysis import Analysis, PageInput
from .parse.guarded import GuardedParser, ParseFailed
from .parse.simhash import hamming, simhash
from .politeness import Politeness
from .results import PageResult, retry_or_fail
from .revisits import next_interval
from .scope import Scope, SharedHosts
from .stats import Stats
from .store.db import Database
from .store.fingerprints import Twins
from .store.warc import sha1_digest
from .urls import fingerprint, host_key, identity, normalize, origin

log = logging.getLogger(__name__)

RECENT_SIMHASHES = 1024
"""Pages whose SimHash `--skip-near-duplicates` compares in memory (the store has them once committed)."""
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})
"""Content types parsed as HTML ('' = no Content-Type: browsers sniff, and so do we)."""


def _take_rendering(page: ParsedPage, rendering: Rendering) -> None:
    """The rendered page is the page: its title and text, its links after the served HTML's (a link both have
    keeps the served HTML's kind)."""
    if rendering.read and rendering.title:
        page.title = rendering.title
    if rendering.read and not page.noindex:
        page.text = rendering.text
    if not page.nofollow:
        known = {link.url for link in page.links}
        page.links.extend(Link(link.url) for link in rendering.links if link.url not in known)


def _conditional(previous: Previous | None) -> dict[str, str] | None:
    """The validators of a re-fetch: a server that still has the same content answers 304."""
    if previous is None:
        return None
    headers = {}
    if previous.etag:
        headers["If-None-Match"] = previous.etag
    if previous.last_modified:
        headers["If-Modified-Since"] = previous.last_modified
    return headers or None


class PageHandler:
    """Turns an `Entry` into a result for the committer."""

    def __init__(
        self,
        config: CrawlConfig,
        scope: Scope,
        pages: PageFetcher,
        politeness: Politeness,
        db: Database,
        stats: Stats,
        *,
        media: Registry | None = None,
        sniffs: Sniffs | None = None,
        twins: Twins,
        shared: SharedHosts | None = None,
    ) -> None:
        """`media`: the resolvers that name the media of each page, when the crawl collects media; `sniffs`:
        where the media a rendered page's players asked for wait for their downloads. `twins`: where
        `--skip-near-duplicates` looks for earlier pages. `shared`: where the processes of a distributed
        crawl share the hosts its scope gains."""
        self._shared = shared
        self._media = media
        self._sniffs = sniffs
        self._twins = twins
        self._recent: deque[tuple[int, int]] = deque(maxlen=RECENT_SIMHASHES)
        self._config = config
        self._scope = scope
        self._pages = pages
        self._politeness = politeness
        self.db = db
        self._stats = stats
        self.parser = GuardedParser()

    @property
    def scope(self) -> Scope:
        """The crawl's scope (sitemap entries are checked against it too)."""
        return self._scope

    async def handle(self, entry: Entry) -> PageResult:
        started = time.monotonic()  # after the claim that handed `entry` out (see `_scope_grew`)
        try:
            rules = self._politeness.rules(entry.host)
            if rules is not None and not rules.allowed(entry.url):
                self._politeness.cancel(entry.host)
                failed = Completion(entry=entry, verdict="failed", reason=rules.refusal)
                return self._scheduled(PageResult(failed))
            outcome, rendering = None, None
            try:
                # A rendered page holds its host's slot until its rendering ends (see `render.renderer`).
                fetched = await self._pages.fetch_page(
                    entry.url, any_type=entry.kind == "requisite", headers=_conditional(entry.previous)
                )
                outcome, rendering = fetched.outcome, fetched.rendering
            finally:
                self._politeness.release(
                    entry.host,
                    elapsed=outcome.elapsed if outcome else None,
                    overloaded=outcome is not None and (outcome.status is None or outcome.status in (429, 503)),
                    ip=outcome.ip if outcome else None,
                )
            self._stats.record(outcome.status, len(outcome.body), outcome.error)
            if rendering is not None and rendering.error is not None:  # the browser died under it: try again
                return PageResult(retry_or_fail(self._config.fetch, entry, rendering.error))
            result = await self._judge(entry, outcome, started, rendering)
            return self._scheduled(result)
        except Exception as exc:  # one URL's bug must not stop the crawl
            log.exception("error while handling %s", entry.url)
            return PageResult(Completion(entry=entry, verdict="failed", reason=f"internal error: {exc!r}"[:300]))

    async def _judge(
        self, entry: Entry, outcome: FetchOutcome, started: float, rendering: Rendering | None = None
    ) -> PageResult:
        capture = Capture(
            fp=entry.fp,
            url=entry.url,
            fetched_at=outcome.started_at,
            status=outcome.status,
            content_type=outcome.content_type,
            size=len(outcome.body),
            truncated=NOT_DOWNLOADED if outcome.body_skipped else outcome.truncated,
            redirects=entry.via,
            request_headers=outcome.request_headers,
            response_headers=outcome.headers,
            etag=outcome.header("ETag"),
            last_modified=outcome.header("Last-Modified"),
            ip=outcome.ip,
            ttfb=outcome.ttfb,
            elapsed=outcome.elapsed,
            error=outcome.error,
        )
        archived = outcome if outcome.status is not None else None
        status = outcome.status
        previous = entry.previous
        if status is not None and previous is not None:  # otherwise the archive thread's digest is the capture's
            with self._stats.timed("hashing"):
                capture.payload_digest = sha1_digest(outcome.body)
        if previous is not None and (
            status == 304 or (status == 200 and not capture.truncated and capture.payload_digest == previous.digest)
        ):
            # Nothing new: no parse, no links (the first fetch's are in the frontier), no text to index again.
            capture.unchanged, capture.payload_digest = True, previous.digest
            capture.etag = capture.etag or previous.etag
            capture.last_modified = capture.last_modified or previous.last_modified
            return PageResult(Completion(entry=entry, verdict="done", capture=capture), archived)
        if outcome.retryable or status is None:
            reason = outcome.error or f"HTTP {status}"
            if outcome.retryable:
                completion = retry_or_fail(self._config.fetch, entry, reason, outcome.retry_after)
            else:  # a name that does not exist, a refused address, a bad certificate: asking again cannot help
                completion = Completion(entry=entry, verdict="failed", reason=reason)
            completion.capture, capture.error = capture, reason
            return PageResult(completion, archived)
        completion = Completion(entry=entry, verdict="done", capture=capture)
        decoded = None  # what the mirror writes
        if 300 <= status < 400:
            await self._follow_redirect(entry, outcome, completion, started)
        elif status >= 400:
            completion.verdict, completion.reason = "failed", f"HTTP {status}"
            capture.error = completion.reason
        elif outcome.content_type in HTML_TYPES and outcome.body:
            try:
                analysis = await self._parse(entry, outcome)
            except ParseFailed as exc:
                completion.verdict, completion.reason = "failed", str(exc)
                capture.error = completion.reason
                return PageResult(completion, archived)
            page, decoded = analysis.page, analysis.body
            parsed_text = page.text
            if rendering is not None:
                _take_rendering(page, rendering)
            self._apply_robots_tag(outcome, page)
            capture.title, capture.text = page.title, page.text
            capture.simhash = analysis.simhash
            if page.text is not parsed_text:  # the rendered page's, or none (X-Robots-Tag: noindex)
                with self._stats.timed("hashing"):
                    capture.simhash = simhash(page.text)
            if self._config.skip_near_duplicates and capture.simhash is not None:
                capture.near_duplicate_of = await self._near_duplicate(entry.fp, capture.simhash)
            if capture.near_duplicate_of is None:  # a near-duplicate's links lead where its twin's did
                known = self._scope.host_count
                self._add_links(entry, page, completion)
                if await self._scope_grew(started, known, completion.drops):
                    completion.children.clear()
                    completion.drops.clear()
                    self._add_links(entry, page, completion)
            if self._media is not None:
                self._add_media(entry, analysis.text or "", page, completion, self._media, rendering)
            if rendering is not None:  # requests of the page that were not sent, and why
                completion.drops.extend(rendering.refused)
        return PageResult(completion, archived, decoded, rendering)

    async def _scope_grew(self, started: float, known: int, drops: list[tuple[str, str]]) -> bool:
        """Whether links judged with `known` hosts in scope must be judged again, because other processes of
        the crawl gained hosts (their seeds redirected) that this one had not heard of.

        Asked only when a link was refused as out of scope, the one verdict a new host changes. Reading no
        earlier than `started`, the end of the claim that handed this URL out, is enough: a URL on a gained
        host (or one found through it) enters the frontier only after the host was recorded.
        """
        if self._shared is None or all(reason != "out-of-scope" for _url, reason in drops):
            return False
        await self._shared.learn(started)
        return self._scope.host_count > known

    async def _near_duplicate(self, fp: int, simhash: int) -> int | None:
        """An earlier page this one's text nearly equals: among the pages handled lately (their rows may not
        be committed yet), then in the store."""
        distance = self._config.near_distance
        twin = next((other for other, h in self._recent if other != fp and hamming(h, simhash) <= distance), None)
        if twin is None:
            twin = await self._twins.find(fp, simhash, distance)
        self._recent.append((fp, simhash))
        return twin

    def _scheduled(self, result: PageResult) -> PageResult:
        """An ended fetch gets its revisit interval and due time (see `revisits`)."""
        completion = result.completion
        if completion.verdict != "retry" and completion.entry.kind != "media":
            capture = completion.capture
            changed = capture is None or not capture.unchanged
            completion.interval = next_interval(self._config.revisit, completion.entry.previous, changed)
            completion.due = time.time() + completion.interval
        return result

    def _apply_robots_tag(self, outcome: FetchOutcome, page: ParsedPage) -> None:
        """`X-Robots-Tag` response headers count as `<meta name=robots>` does."""
        values = [value for name, value in outcome.headers if name.lower() == "x-robots-tag"]
        if not values:
            return
        directives = tag_directives(values, self._config.fetch.user_agent)
        if "noindex" in directives:
            page.noindex, page.text = True, ""
        if "nofollow" in directives and not self._config.scope.follow_nofollow:
            page.nofollow = True
            page.links = [link for link in page.links if link.kind == "requisite"]

    async def _parse(self, entry: Entry, outcome: FetchOutcome) -> Analysis:
        config = self._config
        analysis = await self.parser.analyze(
            PageInput(
                body=outcome.body,
                url=entry.url,
                content_encoding=outcome.header("Content-Encoding"),
                content_type=outcome.header("Content-Type"),
                max_size=config.fetch.max_size,
                requisites=config.scope.page_requisites,
                follow_nofollow=config.scope.follow_nofollow,
                media=frozenset(config.media.kinds),
                keep_text=self._media is not None,
                keep_body=config.mirror,
            )
        )
        self._stats.add_cpu(analysis.cpu, away=analysis.away)
        return analysis

    def _add_media(
        self,
        entry: Entry,
        text: str,
        page: ParsedPage,
        completion: Completion,
        registry: Registry,
        rendering: Rendering | None,
    ) -> None:
        """The page's media become tasks in the frontier, one level deeper, whatever the depth limit and the
        scope's hosts (media files often sit on another host): they lead nowhere further. Those its players
        asked for when it was rendered come after those its HTML shows."""
        tasks = registry.tasks(MediaPage(entry.url, text, page.media))
        if rendering is not None and rendering.media and self._sniffs is not None:
            known = {ref.url for ref in page.media}
            tasks += self._sniffs.tasks(rendering.media, self._config.media.kinds, known)
        for task in tasks:
            completion.children.append(task.new_url(entry.depth + 1, entry.fp))

    def _add_links(self, entry: Entry, page: ParsedPage, completion: Completion) -> None:
        check, depth = self._scope.check, entry.depth + 1
        children, drops = completion.children, completion.drops
        for link in page.links:
            # Requisites are judged at the page's own depth: a page at the depth limit still displays.
            reason = check(link.url, entry.depth if link.kind == "requisite" else depth)
            if reason is None:
                fp, host = identity(link.url)
                children.append(
                    NewURL(url=link.url, fp=fp, host=host, depth=depth, kind=link.kind, referrer_fp=entry.fp)
                )
            else:
                drops.append((link.url, reason))

    async def _follow_redirect(
        self, entry: Entry, outcome: FetchOutcome, completion: Completion, started: float
    ) -> None:
        """A redirect target joins the frontier at the same depth, so it gets politeness, robots and dedup.

        A hop that closes a loop or exceeds the chain limit fails the URL, as it would fail a browser. A seed
        (or a seed's redirect target: depth 0) that redirects to another host brings that host in scope: it is
        the crawl's (`SharedHosts.record`) before this process judges anything with it, and the completion
        carries it to the index, even when this process knew it already (it may be fetching the seed again).
        """
        location = outcome.header("Location")
        if not location:
            return
        try:
            target = normalize(location, entry.url)
        except InvalidURL:
            completion.drops.append((location, "bad-redirect"))
            return
        assert completion.capture is not None
        completion.capture.location = target
        chain = (*entry.via, entry.url)
        if target in chain:
            completion.verdict, completion.reason = "failed", "redirect loop"
            return
        if len(chain) > self._config.fetch.max_redirects:
            completion.verdict = "failed"
            completion.reason = f"too many redirects (more than {self._config.fetch.max_redirects})"
            return
        host = host_key(target)
        if entry.depth == 0 and not self._scope.is_seed_host(host):
            completion.gained_host = host
            if not self._scope.has_host(host):
                if self._shared is not None:
                    await self._shared.record(host)
                self._scope.add_host(host)
        known = self._scope.host_count
        reason = self._scope.check(target, entry.depth)
        if reason == "out-of-scope" and await self._scope_grew(started, known, [(target, reason)]):
            reason = self._scope.check(target, entry.depth)
        if reason is not None:
            completion.drops.append((target, reason))
        else:
            completion.children.append(
                NewURL(
                    url=target,
                    fp=fingerprint(target),
                    host=origin(target),
                    depth=entry.depth,
                    kind="redirect",
                    referrer_fp=entry.fp,
                    via=chain,
                )
            )
