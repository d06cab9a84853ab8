"""The dashboard's live part: snapshots, events, control, metrics, `serve` and `crawl --serve`.

In-process tests drive the app through httpx's ASGI transport in the crawl's own event loop; the end-to-end
ones run the real commands (a crawl, a separate `serve`, a distributed coordinator) as subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import async_playwright

from tests.cluster.processes import Sites, coordinator
from tests.crawls import fast_config
from tests.sites import SiteServer
from tests.test_cli import one_line_error, webtrawl
from webtrawl import crawler as crawl_loop
from webtrawl.crawler import Crawler
from webtrawl.stats import CrawlReport
from webtrawl.store.db import DB_NAME, connect
from webtrawl.store.index import drop_counts, failure_counts
from webtrawl.store.live import STALE_AFTER, publish
from webtrawl.web.app import create_app
from webtrawl.web.metrics import render_metrics
from webtrawl.web.serve import Dashboard
from webtrawl.web.site import Site

CONTROL = {"X-Webtrawl-Control": "1"}


@asynccontextmanager
async def dashboard(directory: Path, **site: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The dashboard app in this process and event loop, as `http://testserver`."""
    transport = httpx.ASGITransport(app=create_app(Site(directory, **site)))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


async def until(client: httpx.AsyncClient, ok: Callable[[dict[str, Any]], bool], timeout: float = 10) -> dict:
    """The first `/api/live` state for which `ok` holds (polled every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while True:
        state = (await client.get("/api/live")).json()
        if ok(state):
            return state
        assert time.monotonic() < deadline, f"not reached in {timeout} s; last state: {state}"
        await asyncio.sleep(0.2)


_SAMPLE = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)")
_LABEL = re.compile(r'(?P<name>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"(?:,|$)')


def parse_prometheus(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Samples of the Prometheus text format (0.0.4), strictly: every sample's family has HELP and TYPE."""
    assert text.endswith("\n")
    kinds: dict[str, str] = {}
    helped: set[str] = set()
    samples = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split(" ", 3)[2])
        elif line.startswith("# TYPE "):
            _hash, _type, name, kind = line.split(" ")
            assert kind in ("counter", "gauge"), line
            assert name not in kinds, f"{name} declared twice"
            kinds[name] = kind
        else:
            match = _SAMPLE.fullmatch(line)
            assert match, f"not a sample line: {line!r}"
            name, raw = match["name"], match["labels"] or ""
            assert name in kinds and name in helped, f"{name} has no TYPE or HELP"
            labels, at = [], 0
            while at < len(raw):
                label = _LABEL.match(raw, at)
                assert label, f"bad labels in {line!r}"
                value = re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], label["value"])
                labels.append((label["name"], value))
                at = label.end()
            key = (name, frozenset(labels))
            assert key not in samples, f"duplicate sample {line!r}"
            samples[key] = float(match["value"])
    return samples


def sample(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CrawlReport]:
    """A small crawl that has ended: its directory and report."""
    out = tmp_path_factory.mktemp("finished")

    async def crawl() -> CrawlReport:
        async with SiteServer(pages=40, calendar=False) as server:
            return await Crawler(fast_config(server.url, out)).run()

    return out, asyncio.run(crawl())


async def test_a_finished_crawl_shows_its_outcome_and_the_stores_counts(finished: tuple[Path, CrawlReport]) -> None:
    out, report = finished
    async with dashboard(out) as client:
        state = (await client.get("/api/live")).json()
    assert state["mode"] == "embedded"
    assert (state["state"], state["live"]) == ("finished", False)
    assert state["counts"]["done"] == report.done_total
    assert state["counts"]["failed"] == report.failed_total
    assert (state["counts"]["waiting"], state["counts"]["running"]) == (0, 0)
    assert state["pages"] == report.pages and state["fetching"] == 0 and state["pages_per_second"] == 0


async def test_a_crawl_whose_process_died_shows_as_not_running(
    finished: tuple[Path, CrawlReport], tmp_path: Path
) -> None:
    out, report = shutil.copytree(finished[0], tmp_path / "crawl"), finished[1]
    conn = connect(out / DB_NAME)
    try:  # its last word was "running", long ago: it was killed
        publish(conn, 1, {"state": "running", "pages": 5, "fetching": 3, "pages_per_second": 9.0}, checkpoint=False)
        conn.execute("UPDATE crawl_live SET updated_at = updated_at - ?", (STALE_AFTER + 1,))
    finally:
        conn.close()
    async with dashboard(out) as client:
        state = (await client.get("/api/live")).json()
        assert (state["state"], state["live"]) == ("not running", False)
        assert (state["fetching"], state["pages_per_second"], state["eta_seconds"]) == (0, 0, None)
        assert state["counts"]["done"] == report.done_total
        assert (await client.post("/api/control/stop", headers=CONTROL)).status_code == 409


async def test_metrics_parse_as_prometheus_text_and_match_the_store(finished: tuple[Path, CrawlReport]) -> None:
    out, report = finished
    async with dashboard(out) as client:
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = parse_prometheus(response.text)
    assert all(name.startswith("webtrawl_") for name, _labels in samples)
    assert sample(samples, "webtrawl_urls", state="done") == report.done_total
    assert sample(samples, "webtrawl_urls", state="failed") == report.failed_total
    assert sample(samples, "webtrawl_pages_total") == report.pages
    assert sample(samples, "webtrawl_bytes_total") == report.bytes
    assert sample(samples, "webtrawl_crawl_running") == 0
    conn = sqlite3.connect(f"file:{out / 'crawl.db'}?mode=ro", uri=True)
    try:
        failures, drops = failure_counts(conn, 1), drop_counts(conn, 1)
    finally:
        conn.close()
    assert failures and drops, "the test site has failures and drops"
    for reason, n in failures.items():
        assert sample(samples, "webtrawl_failed_urls", reason=reason) == n
    for reason, n in drops.items():
        assert sample(samples, "webtrawl_dropped_urls", reason=reason) == n


def test_metric_labels_are_escaped_and_nodes_get_their_own_gauges() -> None:
    reason = 'a "quoted" reason\\with a backslash\nand a newline'
    state = {
        "live": True,
        "state": "paused",
        "elapsed": 12.5,
        "pages": 10,
        "bytes": 2048,
        "errors": 1,
        "fetching": 3,
        "statuses": {"200": 9, "500": 1},
        "pages_per_second": 1.5,
        "bytes_per_second": 300,
        "counts": {"waiting": 4, "running": 3, "done": 10, "failed": 1, "waiting_by_depth": {"2": 4}},
        "nodes": [
            {"id": "node-01", "host": 'h"1', "state": "paused", "pages": 6, "bytes": 1, "errors": 0,
             "pages_per_second": 0.5, "in_flight": 2, "partitions": 9, "heartbeat_age": 0.4},
            {"id": "node-02", "host": "h2", "state": "lost", "pages": 4, "bytes": 1, "errors": 1,
             "pages_per_second": 0.0, "in_flight": 0, "partitions": 0, "heartbeat_age": 30.0},
        ],
    }  # fmt: skip
    samples = parse_prometheus(render_metrics(state, {reason: 7}, {"too-deep": 2}))
    assert sample(samples, "webtrawl_failed_urls", reason=reason) == 7
    assert sample(samples, "webtrawl_crawl_paused") == 1
    assert sample(samples, "webtrawl_urls_waiting_by_depth", depth="2") == 4
    assert sample(samples, "webtrawl_responses_total", status="500") == 1
    assert sample(samples, "webtrawl_pages_per_second") == 1.5
    assert sample(samples, "webtrawl_node_up", node="node-01", host='h"1') == 1
    assert sample(samples, "webtrawl_node_up", node="node-02", host="h2") == 0
    assert sample(samples, "webtrawl_node_partitions", node="node-01") == 9
    assert sample(samples, "webtrawl_node_heartbeat_age_seconds", node="node-02") == 30


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({}, "needs the header"),
        ({"X-Webtrawl-Control": "yes"}, "needs the header"),
        ({**CONTROL, "Origin": "http://evil.example"}, "another origin"),
        ({**CONTROL, "Origin": "null"}, "another origin"),
        ({**CONTROL, "Sec-Fetch-Site": "cross-site"}, "cross-site"),
        ({**CONTROL, "Sec-Fetch-Site": "same-site"}, "cross-site"),
    ],
)
async def test_control_requests_that_may_be_cross_site_are_refused(
    finished: tuple[Path, CrawlReport], headers: dict[str, str], error: str
) -> None:
    async with dashboard(finished[0]) as client:
        response = await client.post("/api/control/stop", headers=headers)
    assert response.status_code == 403
    assert error in response.json()["error"]


async def test_control_of_a_crawl_that_is_not_running_says_so(finished: tuple[Path, CrawlReport]) -> None:
    async with dashboard(finished[0]) as client:
        same_origin = {**CONTROL, "Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
        response = await client.post("/api/control/pause", headers=same_origin)
        assert response.status_code == 409
        assert (await client.post("/api/control/explode", headers=CONTROL)).status_code == 422
        assert (await client.get("/api/control/pause")).status_code == 405


async def test_the_token_is_required_on_every_live_route_when_set(finished: tuple[Path, CrawlReport]) -> None:
    async with dashboard(finished[0], token="s3cret") as client:
        for method, path in [("GET", "/api/live"), ("GET", "/metrics"), ("GET", "/static/live.js")]:
            assert (await client.request(method, path)).status_code == 401
            wrong = await client.request(method, path, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            right = await client.request(method, path, headers={"Authorization": "Bearer s3cret"})
            assert right.status_code == 200
        assert (await client.post("/api/control/stop", headers=CONTROL)).status_code == 401


def test_events_stream_through_a_real_server_and_end_when_it_stops(finished: tuple[Path, CrawlReport]) -> None:
    out, report = finished
    with Dashboard(Site(out), port=0).beside() as server:
        assert server.url == f"http://127.0.0.1:{server.port}/"
        events: list[dict[str, Any]] = []
        with httpx.Client(base_url=server.url, timeout=10) as client:
            assert client.get("/static/live.js").headers["content-type"].startswith("text/javascript")
            with client.stream("GET", "/api/events") as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line.removeprefix("data: ")))
                        if len(events) == 2:
                            threading.Thread(target=server.stop).start()
        # The stream went on until the server was told to stop, and then ended (the read returned).
        assert len(events) == 2 and events[0]["counts"]["done"] == report.done_total


@pytest.mark.slow
async def test_a_running_crawl_is_seen_live_paused_resumed_and_stopped(tmp_path: Path) -> None:
    async with SiteServer(pages=1500, calendar=False, delay=0.03) as server:
        crawler = Crawler(fast_config(server.url, tmp_path))
        crawl = asyncio.create_task(crawler.run())
        async with dashboard(tmp_path) as client:
            first = await until(client, lambda s: s["live"] and s["state"] == "running" and s["pages"] > 0)
            # Pages count as fetched at once and as done when their batch commits, which a loaded machine delays.
            later = await until(
                client,
                lambda s: s["updated_at"] > first["updated_at"] + 1 and s["counts"]["done"] > first["counts"]["done"],
            )
            assert later["pages"] > first["pages"]
            assert later["pages_per_second"] > 0 and later["counts"]["waiting_by_depth"]
            metrics = parse_prometheus((await client.get("/metrics")).text)
            assert sample(metrics, "webtrawl_crawl_running") == 1

            paused_at = time.monotonic()
            assert (await client.post("/api/control/pause", headers=CONTROL)).status_code == 200
            await until(client, lambda s: s["state"] == "paused", timeout=3)
            await asyncio.sleep(3)
            resumed_at = time.monotonic()
            late = [r.path for r in server.log if paused_at + 2 < r.time < resumed_at]
            assert late == [], "requests were sent more than 2 s after the pause"
            assert (await until(client, lambda s: True))["fetching"] == 0

            assert (await client.post("/api/control/resume", headers=CONTROL)).status_code == 200
            await until(client, lambda s: s["state"] == "running", timeout=3)
            await asyncio.sleep(2)
            assert [r for r in server.log if r.time > resumed_at], "no request within 2 s of resuming"

            assert (await client.post("/api/control/stop", headers=CONTROL)).status_code == 200
            report = await asyncio.wait_for(crawl, 15)
            assert report.outcome == "stopped" and report.waiting > 0
            final = await until(client, lambda s: not s["live"])
            assert final["state"] == "stopped"
            assert final["counts"]["done"] == report.done_total


@pytest.mark.slow
async def test_the_wal_is_truncated_while_readers_keep_it_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers that keep coming never let SQLite restart its WAL; the crawl's own checkpoint waits for them."""
    monkeypatch.setattr(crawl_loop, "WAL_LIMIT", 4 * 1024 * 1024)
    wal = tmp_path / "crawl.db-wal"
    sizes: list[int] = []
    stop = threading.Event()

    def read_all_the_time() -> None:
        # One short read after another, as a busy dashboard does, each held open a little.
        while not stop.is_set():
            try:
                with Site(tmp_path).reader() as (conn, crawl_id):
                    conn.execute("BEGIN")
                    row = conn.execute("SELECT snapshot FROM crawl_live WHERE crawl_id = ?", (crawl_id,)).fetchone()
                    conn.execute("SELECT state, COUNT(*) FROM urls WHERE crawl_id = ? GROUP BY state", (crawl_id,))
                    time.sleep(0.01)
                    conn.execute("COMMIT")
            except Exception:  # the crawl is still creating its database
                time.sleep(0.01)
                continue
            if row is not None and json.loads(row[0])["state"] == "running":
                sizes.append(wal.stat().st_size if wal.exists() else 0)

    async with SiteServer(pages=3000, calendar=False) as server:
        reader = threading.Thread(target=read_all_the_time)
        reader.start()
        try:
            report = await Crawler(fast_config(server.url, tmp_path)).run()
        finally:
            stop.set()
            reader.join()
    assert report.outcome == "finished"
    # SQLite never makes the file smaller by itself: each shrink is the crawl's checkpoint getting through.
    shrinks = sum(later < earlier for earlier, later in pairwise(sizes))
    assert shrinks >= 1, f"the WAL was never truncated while read (sizes up to {max(sizes):,} bytes)"
    assert max(sizes) < 48 * 1024 * 1024


def _state_is(*states: str) -> str:
    return f"{list(states)!r}.includes(document.getElementById('live').dataset.state)"


@pytest.mark.slow
async def test_the_overview_follows_a_crawl_and_its_buttons_pause_resume_and_stop_it(tmp_path: Path) -> None:
    async with SiteServer(pages=1500, calendar=False, delay=0.03) as site:
        crawl = asyncio.create_task(Crawler(fast_config(site.url, tmp_path)).run())
        async with dashboard(tmp_path) as client:
            await until(client, lambda s: s["live"])
        with Dashboard(Site(tmp_path), port=0).beside() as server:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path="/usr/bin/chromium", args=["--no-sandbox", "--headless"]
                )
                try:
                    page = await browser.new_page()
                    errors: list[str] = []
                    page.on("pageerror", lambda error: errors.append(str(error)))
                    await page.goto(server.url)
                    if await page.locator('script[src="/static/live.js"]').count() == 0:
                        await page.add_script_tag(url="/static/live.js")  # an overview without it gets it here
                    await page.wait_for_function(_state_is("running"))
                    done = int((await page.text_content("#done") or "").replace(",", ""))
                    await page.wait_for_function(
                        f"Number(document.getElementById('done').textContent.replace(/,/g, '')) > {done}"
                    )
                    assert await page.get_attribute("#live-chart polyline", "points")
                    assert await page.is_disabled("#control-resume")

                    await page.click("#control-pause")
                    await page.wait_for_function(_state_is("paused"))
                    assert await page.is_disabled("#control-pause") and await page.is_enabled("#control-resume")
                    await page.click("#control-resume")
                    await page.wait_for_function(_state_is("running"))
                    await page.click("#control-stop")
                    await page.wait_for_function(_state_is("stopping", "stopped"))
                    assert errors == []
                finally:
                    await browser.close()
        report = await asyncio.wait_for(crawl, 15)
    assert report.outcome == "stopped"


async def test_serve_refuses_to_listen_beyond_loopback_without_a_token(finished: tuple[Path, CrawlReport]) -> None:
    code, _out, err = await webtrawl("serve", str(finished[0]), "--host", "0.0.0.0")
    assert code == 2
    one_line_error(err, "refusing to listen on 0.0.0.0 without a token")
    code, _out, err = await webtrawl("serve", str(finished[0] / "nowhere"), "--port", "0")
    assert code == 2
    one_line_error(err, "no crawl database")


@pytest.mark.slow
async def test_a_serve_process_watches_and_steers_a_crawl_with_its_own_dashboard(tmp_path: Path) -> None:
    async with SiteServer(pages=1500, calendar=False, delay=0.03) as site:
        crawl = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webtrawl", "crawl", site.url, "--out", str(tmp_path), "--delay", "0",
            "--per-host", "4", "--concurrency", "8", "-q", "--serve", "--port", "0",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        serve = None
        try:
            line = (await asyncio.wait_for(crawl.stderr.readline(), 20)).decode()  # type: ignore[union-attr]
            assert line.startswith("dashboard: http://127.0.0.1:"), line
            async with httpx.AsyncClient(base_url=line.split()[1], timeout=10) as beside:
                await until(beside, lambda s: s["live"] and s["pages"] > 0, timeout=20)
                serve = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "webtrawl", "serve", str(tmp_path), "--port", "0",
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                )  # fmt: skip
                line = (await asyncio.wait_for(serve.stdout.readline(), 20)).decode()  # type: ignore[union-attr]
                match = re.search(r"http://127\.0\.0\.1:\d+/", line)
                assert match, line
                async with httpx.AsyncClient(base_url=match[0], timeout=10) as other:
                    events = []
                    async with other.stream("GET", "/api/events") as response:
                        async for text in response.aiter_lines():
                            if text.startswith("data: "):
                                events.append(json.loads(text.removeprefix("data: ")))
                                if len(events) == 3:
                                    break
                    assert all(event["state"] == "running" for event in events)
                    assert events[-1]["pages"] > events[0]["pages"]

                    # Paused from the crawl's own dashboard, seen by the other; stopped from the other.
                    assert (await beside.post("/api/control/pause", headers=CONTROL)).status_code == 200
                    await until(other, lambda s: s["state"] == "paused", timeout=4)
                    assert (await other.post("/api/control/stop", headers=CONTROL)).status_code == 200
                    out, err = await asyncio.wait_for(crawl.communicate(), 20)
                    assert crawl.returncode == 0, err.decode()
                    assert out.decode().startswith("stopped: ")
                    assert "stopped: run the same command again to resume" in err.decode()
                    final = await until(other, lambda s: not s["live"])
                    assert final["state"] == "stopped"
            serve.send_signal(signal.SIGINT)
            assert await asyncio.wait_for(serve.wait(), 10) == 0
        finally:
            for process in (crawl, serve):
                if process is not None and process.returncode is None:
                    process.kill()
                    await process.wait()


@pytest.mark.slow
def test_a_distributed_crawl_shows_its_nodes_and_obeys_the_dashboard(tmp_path: Path, redis_url: str) -> None:
    with Sites(delay=0.1) as sites:
        process = coordinator(sites, redis_url, tmp_path / "coordinator", "--serve", "--port", "0")
        try:
            url = _dashboard_url(process.stderr_path)
            with httpx.Client(base_url=url, timeout=10) as client:

                def until_sync(ok: Callable[[dict[str, Any]], bool], timeout: float = 15) -> dict[str, Any]:
                    deadline = time.monotonic() + timeout
                    while not ok(state := client.get("/api/live").json()):
                        assert time.monotonic() < deadline, f"not reached; last state: {state}"
                        time.sleep(0.2)
                    return state

                state = until_sync(lambda s: s["state"] == "running" and any(n["pages"] for n in s["nodes"]))
                assert state["mode"] == "distributed" and state["live"]
                (node,) = state["nodes"]
                assert node["id"] == "node-01" and node["state"] == "running" and node["partitions"] > 0
                assert state["counts"]["done"] + state["counts"]["waiting"] > 0
                metrics = parse_prometheus(client.get("/metrics").text)
                assert sample(metrics, "webtrawl_node_up", node="node-01", host=node["host"]) == 1
                assert sample(metrics, "webtrawl_node_partitions", node="node-01") > 0

                assert client.post("/api/control/pause", headers=CONTROL).status_code == 200
                until_sync(lambda s: s["state"] == "paused" and s["nodes"][0]["state"] == "paused", timeout=8)
                assert client.post("/api/control/resume", headers=CONTROL).status_code == 200
                until_sync(lambda s: s["state"] == "running" and s["nodes"][0]["state"] == "running", timeout=8)
                assert client.post("/api/control/stop", headers=CONTROL).status_code == 200
            code, out, err = process.finish(60)
            assert code == 0, err
            assert out.startswith("stopped: ")
        finally:
            if process.popen.poll() is None:
                process.popen.kill()
                process.popen.wait()


def _dashboard_url(stderr: Path, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while not (match := re.search(r"^dashboard: (\S+)$", stderr.read_text(), re.MULTILINE)):
        assert time.monotonic() < deadline, f"no dashboard address; stderr: {stderr.read_text()}"
        time.sleep(0.1)
    return match[1]
