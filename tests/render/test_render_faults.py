"""Rendering survives faults and leaves nothing behind: Chromium killed mid-crawl, Ctrl-C, kill -9 of webtrawl
and resume, a missing browser; and `--render auto` pays for the browser only where a page needs it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.crawls import check_warcs, connect, fast_config, path_of
from tests.sites.jsapp import JsSite
from tests.test_cli import FAST, one_line_error, webtrawl
from webtrawl import Crawler
from webtrawl.config import RenderConfig, ScopeConfig
from webtrawl.render.browser import OWNER_FLAG

pytestmark = pytest.mark.slow

ARTICLES = {f"/article/{n}" for n in range(1, 6)}


def chromium_of(pid: int) -> list[int]:
    """The Chromium processes a webtrawl process started (they carry its pid on their command line)."""
    found = []
    flag = f"{OWNER_FLAG}{pid}".encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if flag in (proc / "cmdline").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


async def gone(pid: int, timeout: float = 15) -> bool:
    """Whether the Chromium of `pid` ends within `timeout` seconds (a bound on a wait, not a measurement)."""
    for _ in range(int(timeout * 10)):
        if not chromium_of(pid):
            return True
        await asyncio.sleep(0.1)
    return False


def done_paths(out: Path) -> set[str]:
    conn = sqlite3.connect(out / "crawl.db")
    try:
        return {path_of(url) for (url,) in conn.execute("SELECT url FROM urls WHERE state = 2")}
    finally:
        conn.close()


async def wait_for_done(out: Path, n: int) -> None:
    for _ in range(600):
        if (out / "crawl.db").exists():
            try:
                if len(done_paths(out)) >= n:
                    return
            except sqlite3.Error:
                pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"fewer than {n} pages done after a minute")


def render_args(site: JsSite, out: Path, *extra: str) -> list[str]:
    # The home page and the articles only (their links lead nowhere else): a small crawl each time.
    allow = site.origin.replace(".", r"\.") + r"/(article/\d+)?$"
    return ["crawl", site.url, "--out", str(out), *FAST, "--render", "--render-timeout", "5", "--allow", allow, *extra]


async def start(args: list[str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webtrawl", *args, "-q", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )


async def test_chromium_killed_mid_crawl_is_started_again_and_nothing_is_lost(tmp_path: Path) -> None:
    async with JsSite() as site:
        proc = await start(render_args(site, tmp_path, "--delay", "0.3", "--per-host", "1"))
        await wait_for_done(tmp_path, 2)
        killed = chromium_of(proc.pid)
        assert killed
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        _out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode()
        assert {"/", *ARTICLES} <= done_paths(tmp_path)
        assert await gone(proc.pid), "the crawl ended and left its Chromium behind"
    (snap,) = connect(tmp_path).execute("SELECT snapshot FROM crawl_live").fetchone()
    assert json.loads(snap)["render"]["browser_restarts"] >= 1
    titles = {path_of(url): title for url, title in connect(tmp_path).execute("SELECT url, title FROM captures")}
    assert {titles[path] for path in ARTICLES} == {f"Article {n}" for n in range(1, 6)}


async def test_ctrl_c_stops_the_crawl_and_its_chromium(tmp_path: Path) -> None:
    async with JsSite() as site:
        proc = await start(render_args(site, tmp_path, "--delay", "1", "--per-host", "1"))
        await wait_for_done(tmp_path, 1)
        assert chromium_of(proc.pid)
        proc.send_signal(signal.SIGINT)
        _out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 130 or proc.returncode == 0, err.decode()
        assert "Traceback" not in err.decode()
        assert await gone(proc.pid)


async def test_a_stop_from_the_dashboard_ends_the_crawl_and_its_chromium(tmp_path: Path) -> None:
    async with JsSite() as site:
        # 2 s between pages: a loaded machine's `webtrawl control` must start and be obeyed before the rest are done
        proc = await start(render_args(site, tmp_path, "--delay", "2", "--per-host", "1"))
        await wait_for_done(tmp_path, 1)
        assert chromium_of(proc.pid)
        code, _out, err = await webtrawl("control", "stop", str(tmp_path))
        assert code == 0, err
        _out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert await gone(proc.pid)
    assert len(done_paths(tmp_path)) < 1 + len(ARTICLES), "the crawl stopped before its end"


async def test_kill_9_then_resume_cleans_up_and_finishes(tmp_path: Path) -> None:
    async with JsSite() as site:
        args = render_args(site, tmp_path, "--delay", "0.5", "--per-host", "1")
        proc = await start(args)
        await wait_for_done(tmp_path, 2)
        proc.kill()
        await proc.wait()
        code, _out, err = await webtrawl(*args, "-q")
        assert code == 0, err
        assert await gone(proc.pid), "the next run ends the Chromium a killed run left"
        assert {"/", *ARTICLES} <= done_paths(tmp_path)
        fetched = [r.path for r in site.requests if r.path in ARTICLES]
        assert len(fetched) <= len(ARTICLES) + 1, "at most the page in flight at the kill is fetched twice"
    check_warcs(tmp_path)


async def test_a_missing_browser_is_one_line_saying_what_to_install(tmp_path: Path) -> None:
    async with JsSite() as site:
        code, _out, err = await webtrawl(
            *render_args(site, tmp_path), env={"WEBTRAWL_CHROMIUM": "/nonexistent/chromium"}
        )
    assert code != 0
    one_line_error(err, "Chromium", "apt-get install chromium")


async def test_render_auto_renders_only_the_pages_built_by_script(tmp_path: Path) -> None:
    async with JsSite() as site:
        # The pages that test the renderer's bounds (tested above) are left out: this is about which pages it gets.
        heavy = ScopeConfig(max_depth=2, deny=(r"/(huge-dom|busy-loop|never-idle)$",))
        config = fast_config(site.url + "static-page/1", tmp_path, scope=heavy)
        config = replace(config, render=RenderConfig(mode="auto", timeout=5))
        report = await Crawler(config).run()
    conn = connect(tmp_path)
    rendered = {path_of(url.removeprefix("urn:dom:")) for (url,) in conn.execute(
        "SELECT url FROM resources WHERE url LIKE 'urn:dom:%'")}  # fmt: skip
    crawled = {path_of(url) for (url,) in conn.execute("SELECT url FROM captures WHERE content_type = 'text/html'")}
    assert {"/static-page/1", "/static-page/2", "/static-page/3", "/", "/feed"} <= crawled
    scripted = {path for path in crawled if not path.startswith(("/static-page/", "/item/", "/after"))}
    assert rendered == scripted
    assert report.render["rendered"] == len(scripted)


async def test_a_user_behavior_runs_in_every_rendered_page(tmp_path: Path) -> None:
    """`--behavior FILE.js`: the body of an async function, run after the built-in behaviours; what it makes
    the page show is kept (here a link, after an await)."""
    script = tmp_path / "behavior.js"
    script.write_text(
        "await new Promise((resolve) => setTimeout(resolve, 50));\n"
        "const a = document.createElement('a');\n"
        "a.href = '/behaved' + location.pathname;\n"
        "document.body.append(a);\n"
    )
    async with JsSite() as site:
        code, _out, err = await webtrawl(*render_args(site, tmp_path / "out", "--behavior", str(script)), "-q")
        assert code == 0, err
    conn = connect(tmp_path / "out")
    found = {path_of(url) for (url,) in conn.execute("SELECT url FROM dropped UNION SELECT url FROM urls")}
    # The links lead outside --allow: found and judged by the scope like any link.
    assert {"/behaved/", *(f"/behaved{path}" for path in ARTICLES)} <= found, "each rendered page ran the script"


async def test_an_unreadable_behavior_file_is_one_line(tmp_path: Path) -> None:
    async with JsSite() as site:
        code, _out, err = await webtrawl(*render_args(site, tmp_path, "--behavior", str(tmp_path / "missing.js")))
    assert code != 0
    one_line_error(err, "--behavior", "missing.js")
