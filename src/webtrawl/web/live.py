"""The live part of the dashboard: the crawl's state as Server-Sent Events, Prometheus metrics, and control.

An embedded crawl publishes a snapshot in its store every second and reads its control row there
(`store.live`); a distributed crawl's nodes, counts and control are in Redis (`cluster.status`). One reading,
refreshed at most once a second (every two for Redis, as often as nodes beat), is shared by every open
dashboard and by /metrics, so ten open tabs cost the crawl what one does.

A reading also holds the whole crawl as the overview's cards show it (`crawl`: captures, bytes, elapsed,
rate), so the cards and the live status line are one snapshot and cannot disagree; `/api/history` is the
chart's: pages per second over the whole crawl, from its captures' times.

Control requests are POSTs that must carry `X-Webtrawl-Control: 1`: a cross-site form cannot send a
custom header, and a cross-site script that tries needs a CORS preflight this app never grants. When the
browser sends `Origin` or `Sec-Fetch-Site`, they must say the request comes from the dashboard itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import asdict
from typing import Any, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool

from ..cluster.status import crawl_status, send_control
from ..errors import WebtrawlError
from ..store.live import (
    ACTIVE,
    STALE_AFTER,
    CrawlTotals,
    crawl_totals,
    published_counts,
    rate_history,
    read_snapshot,
    send_command,
    stored_counts,
    time_left,
)
from ..store.problems import drop_counts_of, failure_counts_of
from ..store.shards import Sources
from .metrics import render_metrics
from .site import Site

router = APIRouter()

EVENT_EVERY = 1.0
"""Seconds between two events of /api/events."""
REFRESH = {"embedded": 0.9, "distributed": 2.0}
"""Seconds a reading is shared before the next one (nodes publish their state every 2 s)."""
STORED_COUNTS_FOR = 10.0
"""Seconds the store's counts are reused while no crawl runs (counting a big frontier takes a while)."""
HISTORY_FOR = 5.0
"""Seconds the chart's history is shared before it is read again (it reads every capture's time)."""
CONTROL_HEADER = "X-Webtrawl-Control"


class LiveView:
    """The crawl's current state as the dashboard shows it (see `/api/live`), read at most once per period."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.closing = threading.Event()
        """Set when the server stops: open event streams end, so shutting down waits for none of them."""
        self._every = REFRESH["distributed" if site.redis_url else "embedded"]
        self._state: dict[str, Any] | None = None
        self._read_at = 0.0
        self._stored: tuple[float, dict[str, Any]] | None = None
        self._totals: CrawlTotals | None = None
        self._history: tuple[float, dict[str, Any]] | None = None
        if site.redis_url:
            _quiet_repeats(logging.getLogger("webtrawl.cluster.redisconn"))

    async def current(self) -> dict[str, Any]:
        if self._state is None or time.monotonic() - self._read_at >= self._every:
            self._state = await self._distributed() if self.site.redis_url else await run_in_threadpool(self._embedded)
            self._read_at = time.monotonic()
        return self._state

    async def history(self) -> dict[str, Any]:
        """Pages per second over the whole crawl, to now while it runs (see `store.live.rate_history`)."""
        if self._history is None or time.monotonic() - self._history[0] >= HISTORY_FOR:
            state = await self.current()
            end = time.time() if state["live"] else state["crawl"]["last_fetch_at"] or 0.0
            self._history = (time.monotonic(), await run_in_threadpool(self._read_history, end))
        return self._history[1]

    def _read_history(self, end: float) -> dict[str, Any]:
        try:
            with self.site.sources() as sources:
                return asdict(rate_history(sources, end))
        except (WebtrawlError, sqlite3.Error):
            return {"start": 0.0, "step": 1.0, "rates": []}

    def invalidate(self) -> None:
        """The next reading is a fresh one (after a command, so the page shows its effect at once)."""
        self._state = None

    def _embedded(self) -> dict[str, Any]:
        try:
            with self.site.sources() as sources:
                home = sources.home
                assert home is not None
                found = read_snapshot(home.conn, home.crawl_id)
                snap = found[1] if found else {}
                live = found is not None and snap.get("state") in ACTIVE and time.time() - found[0] < STALE_AFTER
                counts = published_counts(found, live) or self._stored_counts(home.conn, home.crawl_id)
                totals = self._crawl_totals(sources)
        except (WebtrawlError, sqlite3.Error) as exc:  # no database or no such crawl (yet: it may be starting)
            return _idle("embedded", "not running", str(exc))
        # Never published, or its process died without a last word: not running; else the last word.
        gone = found is None or (not live and snap.get("state") in ACTIVE)
        state = "not running" if gone else snap["state"]
        pages_per_second = snap.get("pages_per_second", 0.0) if live else 0.0
        return {
            "mode": "embedded",
            "state": state,
            "live": live,
            "updated_at": found[0] if found else None,
            "elapsed": snap.get("elapsed", 0.0),
            "pages": snap.get("pages", 0),
            "bytes": snap.get("bytes", 0),
            "errors": snap.get("errors", 0),
            "fetching": snap.get("fetching", 0) if live else 0,
            "pages_per_second": pages_per_second,
            "bytes_per_second": snap.get("bytes_per_second", 0) if live else 0,
            "eta_seconds": _eta(counts, pages_per_second),
            "statuses": snap.get("statuses", {}),
            "render": snap.get("render", {}),
            "counts": counts,
            "crawl": _whole_crawl(totals, live, pages_per_second),
            "nodes": [],
        }

    def _crawl_totals(self, sources: Sources) -> CrawlTotals:
        self._totals = crawl_totals(sources, self._totals)
        return self._totals

    def _distributed_totals(self) -> CrawlTotals | None:
        """The captures of every shard (None until the crawl's directory holds its database)."""
        try:
            with self.site.sources() as sources:
                return self._crawl_totals(sources)
        except (WebtrawlError, sqlite3.Error):
            return None

    def _stored_counts(self, conn: Any, crawl_id: int) -> dict[str, Any]:
        if self._stored is None or time.monotonic() - self._stored[0] >= STORED_COUNTS_FOR:
            self._stored = (time.monotonic(), stored_counts(conn, crawl_id))
        return self._stored[1]

    async def _distributed(self) -> dict[str, Any]:
        assert self.site.redis_url is not None
        try:
            status = await crawl_status(self.site.redis_url, self.site.name)
        except (WebtrawlError, RedisError) as exc:
            return _idle("distributed", "unavailable", str(exc))
        nodes = [_node(node, info) for node, info in status["nodes"].items()]
        live = [node for node in nodes if node["state"] in ACTIVE]
        control = status["control"]
        if control == "finished":
            state = "finished"
        elif not live:
            state = "stopped" if control == "stop" else "not running"
        else:
            state = {"run": "running", "pause": "paused", "stop": "stopping"}.get(control, control)
        counts = {key.replace(" ", "_"): value for key, value in status["counts"].items()}
        counts["waiting_by_depth"] = {}  # Redis keeps each partition's queue, not counts by depth
        pages_per_second = round(sum(node["pages_per_second"] for node in live), 2)
        totals = await run_in_threadpool(self._distributed_totals)
        return {
            "mode": "distributed",
            "state": state,
            "live": bool(live) and control != "finished",
            "updated_at": time.time(),
            "elapsed": max((node["elapsed"] for node in nodes), default=0.0),
            "pages": sum(node["pages"] for node in nodes),
            "bytes": sum(node["bytes"] for node in nodes),
            "errors": sum(node["errors"] for node in nodes),
            "fetching": sum(node["in_flight"] for node in live),
            "pages_per_second": pages_per_second,
            "bytes_per_second": 0,  # nodes publish pages/s only
            "eta_seconds": _eta(counts, pages_per_second) if live else None,
            "statuses": {},
            "render": _summed(node["render"] for node in nodes),
            "counts": counts,
            "crawl": _whole_crawl(totals, bool(live) and control != "finished", pages_per_second),
            "nodes": nodes,
            "dedup": status["dedup"],
            "bloom": status["bloom"],
        }


def _node(node: str, info: dict[str, Any]) -> dict[str, Any]:
    """One row of the node table, from the node's last heartbeat (see `cluster.node.Heartbeat.publish`)."""
    return {
        "id": node,
        "host": str(info.get("host", "")),
        "pid": info.get("pid"),
        "state": info.get("state", "?"),
        "partitions": len(info.get("partitions", [])),
        "pages": info.get("pages", 0),
        "bytes": info.get("bytes", 0),
        "errors": info.get("errors", 0),
        "pages_per_second": info.get("pages_per_s", 0.0),
        "in_flight": info.get("in_flight", 0),
        "elapsed": info.get("elapsed", 0.0),
        "heartbeat_age": info.get("heartbeat_age"),
        "render": info.get("render") or {},
    }


def _summed(counters: Iterable[dict[str, float]]) -> dict[str, float]:
    """The nodes' rendering counters added up (see `Stats.render_counts`)."""
    total: dict[str, float] = {}
    for counts in counters:
        for name, value in counts.items():
            total[name] = round(total.get(name, 0) + value, 2)
    return total


def _idle(mode: str, state: str, error: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "state": state,
        "live": False,
        "error": error,
        "updated_at": None,
        "elapsed": 0.0,
        "pages": 0,
        "bytes": 0,
        "errors": 0,
        "fetching": 0,
        "pages_per_second": 0.0,
        "bytes_per_second": 0,
        "eta_seconds": None,
        "statuses": {},
        "counts": {"waiting": 0, "running": 0, "done": 0, "failed": 0, "waiting_by_depth": {}},
        "crawl": _whole_crawl(None, False, 0.0),
        "nodes": [],
    }


def _whole_crawl(totals: CrawlTotals | None, live: bool, pages_per_second: float) -> dict[str, Any]:
    """The overview's cards: captures and bytes of the whole crawl, its time since it was created (to now
    while it runs, else to its last fetch) and its rate (the current one while it runs, else its average),
    as `store.overview` counts them."""
    if totals is None:
        return {"started_at": None, "last_fetch_at": None, "captures": 0, "bytes": 0, "elapsed": 0.0,
                "pages_per_second": 0.0}  # fmt: skip
    elapsed, rate = totals.pace(pages_per_second if live else None)
    return {
        "started_at": totals.started_at,
        "last_fetch_at": totals.last_fetch_at,
        "captures": totals.captures,
        "bytes": totals.bytes,
        "elapsed": round(elapsed, 2),
        "pages_per_second": rate,  # unrounded: the page formats it as the server did (no double rounding)
    }


def _eta(counts: dict[str, Any], pages_per_second: float) -> float | None:
    left = time_left(counts["waiting"], counts["running"], pages_per_second)
    return None if left is None else round(left, 1)


class _Once(logging.Filter):
    """Lets each distinct message through once: every reading of a distributed crawl checks the Redis
    server again, and its warnings (no persistence, say) would otherwise repeat every two seconds."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self._seen:
            return False
        self._seen.add(message)
        return True


def _quiet_repeats(logger: logging.Logger) -> None:
    if not any(isinstance(f, _Once) for f in logger.filters):
        logger.addFilter(_Once())


def live_view(app: FastAPI) -> LiveView:
    """The app's one `LiveView`, made on first use."""
    view = getattr(app.state, "live_view", None)
    if view is None:
        view = app.state.live_view = LiveView(app.state.site)
    return view


@router.get("/api/live")
async def live_state(request: Request) -> dict[str, Any]:
    """The crawl's live state: counters, rates, frontier counts, and the node table of a distributed crawl."""
    return await live_view(request.app).current()


@router.get("/api/history")
async def history(request: Request) -> dict[str, Any]:
    """Pages per second over the whole crawl, from its captures' times: `rates[i]` covers the `step` seconds
    from `start + i * step`; at most 120 of them."""
    return await live_view(request.app).history()


@router.get("/api/events")
async def events(request: Request) -> StreamingResponse:
    """Server-Sent Events: the live state (as `/api/live`) once a second, until the client goes away."""
    view = live_view(request.app)
    loop = asyncio.get_running_loop()

    async def stream() -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        while not view.closing.is_set():
            yield f"data: {json.dumps(await view.current())}\n\n"
            next_at = loop.time() + EVENT_EVERY
            while loop.time() < next_at and not view.closing.is_set():
                await asyncio.sleep(0.1)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.post("/api/control/{command}")
async def control(command: Literal["pause", "resume", "stop"], request: Request) -> JSONResponse:
    """Pause, resume or stop the crawl; it obeys within a second (a distributed crawl's nodes within two)."""
    refusal = _cross_site(request)
    if refusal is not None:
        return JSONResponse({"error": refusal}, status_code=403)
    view = live_view(request.app)
    site = view.site
    try:
        if site.redis_url:
            await send_control(site.redis_url, site.name, command)
        else:
            view.invalidate()
            if not (await view.current())["live"]:
                return JSONResponse({"error": "the crawl is not running"}, status_code=409)
            await run_in_threadpool(send_command, site.directory, site.name, "run" if command == "resume" else command)
    except (WebtrawlError, RedisError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=503)
    view.invalidate()
    return JSONResponse({"command": command, "sent": True})


def _cross_site(request: Request) -> str | None:
    """Why a control request is refused as possibly cross-site, or None if it is the dashboard's own."""
    if request.headers.get(CONTROL_HEADER) != "1":
        return f"a control request needs the header {CONTROL_HEADER}: 1"
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return "a control request from another origin is refused"
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return "a cross-site control request is refused"
    return None


@router.get("/metrics")
async def metrics(request: Request) -> PlainTextResponse:
    """Prometheus metrics (text format 0.0.4), every name prefixed `webtrawl_`."""
    view = live_view(request.app)
    state = await view.current()
    failures, drops = await run_in_threadpool(_reasons, view.site)
    return PlainTextResponse(render_metrics(state, failures, drops), media_type="text/plain; version=0.0.4")


def _reasons(site: Site) -> tuple[dict[str, int], dict[str, int]]:
    """Failed and dropped URLs by reason, over every source of the crawl."""
    try:
        with site.sources() as sources:
            return failure_counts_of(sources), drop_counts_of(sources)
    except (WebtrawlError, sqlite3.Error):
        return {}, {}
