"""Settings by one vocabulary, the crawl command's flags: on the command line, in a settings file (the example
`examples/crawl.toml` included), and as the keyword arguments of `webtrawl.crawl`; and the first mistakes a
new user makes, each answered in one line that says what to do."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tomllib
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path

import pytest
from aiohttp import web

import webtrawl
from tests.crawls import connect
from tests.sites import SiteServer
from tests.test_cli import FAST, one_line_error
from tests.test_cli import webtrawl as run
from webtrawl import ConfigError, ScopeConfig, WebtrawlError
from webtrawl.settings import OPTIONS, for_api
from webtrawl.store.db import DirectoryLock

EXAMPLE = Path(__file__).parents[1] / "examples" / "crawl.toml"


def test_the_example_file_holds_every_setting_and_loads_to_the_defaults(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    keys = {line.lstrip("# ").split(" =")[0] for line in text.splitlines() if " = " in line}
    assert set(OPTIONS) - {"config"} <= keys  # every flag is there, set or shown commented
    assert "seeds" in tomllib.loads(text)
    from_file = for_api((), {"config": EXAMPLE, "out": tmp_path})
    plain = for_api(("https://example.org/",), {"out": tmp_path})
    assert asdict(from_file) == asdict(plain)  # its values are the command line's defaults


def test_a_file_takes_flag_names_in_any_table_human_units_and_older_field_names(tmp_path: Path) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text(
        'seeds = ["https://example.org/"]\nout = "x"\n[crawl]\nmax-depth = 2\ndelay = "1.5s"\n'
        '[fetch]\ntimeout = 5\nmax_size = "2MB"\nconnect_timeout = 3\n[scope]\nmode = "domain"\n'
    )
    config = for_api((), {"config": path})
    assert (config.scope.max_depth, config.politeness.delay, config.scope.mode) == (2, 1.5, "domain")
    assert (config.fetch.read_timeout, config.fetch.max_size, config.fetch.connect_timeout) == (5, 2 * 1024**2, 3)
    assert config.seeds == ("https://example.org/",) and config.out == Path("x")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("max_depht = 2", ("unknown setting 'max_depht'", "did you mean max-depth")),
        ("[fetch]\ntimeuot = 5", ("unknown setting 'timeuot' in [fetch]", "did you mean timeout")),
        ('delay = "soon"', ("delay in", "'soon' is not a duration")),
        ("max-size = -1", ("max-size", "negative")),
        ('seeds = "https://example.org/"\n[a.b]\nc = 1', ("tables hold settings",)),
        ("cookies = 1", ("cookies", "not true or false")),
    ],
)
def test_a_bad_settings_file_names_the_key(tmp_path: Path, text: str, fragments: tuple) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as refused:
        for_api(("http://127.0.0.1:9/",), {"config": path, "out": tmp_path / "o"})
    assert all(fragment in str(refused.value) for fragment in fragments), refused.value


async def test_the_command_says_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text("[crawl]\nmax_depht = 2\n")
    code, _out, err = await run("crawl", "http://127.0.0.1:9/", "--out", str(tmp_path / "o"), "--config", str(path))
    assert code == 2
    one_line_error(err, "unknown setting 'max_depht' in [crawl]", "did you mean max-depth")


async def test_seeds_and_out_may_come_from_the_file_and_flags_win(site_server: SiteServer, tmp_path: Path) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text(f'seeds = ["{site_server.url}"]\nout = "{tmp_path / "out"}"\nmax-pages = 2\nmax-depth = 0\n')
    code, out, err = await run("crawl", "--config", str(path), "--max-pages", "1", "-q", *FAST)
    assert code == 0, err
    assert out.startswith("max-pages: 1 pages")
    (identity,) = connect(tmp_path / "out").execute("SELECT identity FROM crawls").fetchone()
    assert json.loads(identity)["scope"]["max_depth"] == 0


async def test_the_python_api_takes_the_flags_by_name(site_server: SiteServer, tmp_path: Path) -> None:
    settings = {"max_depth": 1, "delay": 0, "per_host": 4, "scope": "domain", "max_size": "1MB", "timeout": "5s"}
    report = await asyncio.to_thread(webtrawl.crawl, site_server.url, out=tmp_path, **settings)
    assert report.outcome == "finished" and report.done_total > 1
    (identity,) = connect(tmp_path).execute("SELECT identity FROM crawls").fetchone()
    assert json.loads(identity)["scope"]["mode"] == "domain" and json.loads(identity)["scope"]["max_depth"] == 1


def test_the_python_api_refuses_a_bad_setting_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown setting 'max_dept'.*did you mean max-depth"):
        webtrawl.crawl("https://example.org/", out=tmp_path, max_dept=1)
    with pytest.raises(ConfigError, match=r"delay .*'fast' is not a duration"):
        webtrawl.crawl("https://example.org/", out=tmp_path, delay="fast")
    with pytest.raises(ConfigError, match="quiet is a setting of the webtrawl command alone"):
        webtrawl.crawl("https://example.org/", out=tmp_path, quiet=True)
    config = for_api(("https://example.org/",), {"out": tmp_path, "scope": ScopeConfig(mode="prefix")})
    assert config.scope.mode == "prefix"  # a whole part, as earlier versions took it


async def test_the_blocking_api_in_a_running_event_loop_says_to_await_crawl_async(
    site_server: SiteServer, tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    """As in Jupyter: one clear error, no coroutine left never awaited, and the awaitable twin works."""
    with pytest.raises(WebtrawlError, match=r"^webtrawl.crawl\(\) blocks, .* use `await webtrawl.crawl_async\(...\)`"):
        webtrawl.crawl(site_server.url, out=tmp_path, max_pages=3)
    assert not [w for w in recwarn if "never awaited" in str(w.message)]
    report = await webtrawl.crawl_async(site_server.url, out=tmp_path, max_pages=3)
    assert report.pages == 3


async def test_help_is_in_sections_with_human_units() -> None:
    code, out, _err = await run("crawl", "--help")
    assert code == 0
    sections = [
        line.rstrip(":") for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(":")
    ]
    assert sections[:4] == ["Output", "Scope and limits", "Politeness", "Fetching"]
    assert "Distributed (with --redis)" in sections and "Media" in sections
    flat = " ".join(out.split())
    assert "[default: 10MB]" in flat and "[default: 500ms]" in flat and "[default: 1GB]" in flat
    assert "--connect-timeout DURATION" in flat and "--total-timeout DURATION" in flat
    assert "--max-url-length INTEGER Drop longer URLs" in flat


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("//exa mple.org",), ("bad seed URL '//exa mple.org'", "https://exa mple.org")),
        (("mailto:someone@example.org",), ("bad seed URL 'mailto:someone@example.org'", "unsupported scheme")),
        (("http://127.0.0.1:9/", "--delay", "1x"), ("'1x' is not a duration",)),
        ((), ("give at least one seed URL",)),
    ],
)
async def test_first_mistakes_are_one_line_saying_what_to_do(tmp_path: Path, args: tuple, fragments: tuple) -> None:
    code, _out, err = await run("crawl", *args, "--out", str(tmp_path / "o"))
    assert code == 2
    assert "Traceback" not in err and all(fragment in err for fragment in fragments), err


async def test_a_seed_without_its_scheme_is_taken_as_http_with_a_note(site_server: SiteServer, tmp_path: Path) -> None:
    bare = site_server.url.removeprefix("http://").rstrip("/")  # 127.0.0.1:PORT, as one types it for curl
    code, _out, err = await run("crawl", bare, "--out", str(tmp_path / "o"), "--max-pages", "2", *FAST)
    assert code == 0, err
    assert f"taking seed {bare} as http://{bare}" in err
    db = connect(tmp_path / "o")
    try:
        assert db.execute("SELECT COUNT(*) FROM captures WHERE url = ?", (f"http://{bare}/",)).fetchone() == (1,)
    finally:
        db.close()


async def test_serve_beside_a_crawl_whose_directory_is_in_use_says_so_before_any_address(tmp_path: Path) -> None:
    lock = DirectoryLock(tmp_path)
    lock.acquire()  # as a crawl running there holds it
    try:
        code, _out, err = await run("crawl", "http://127.0.0.1:9/", "--out", str(tmp_path), "--serve", "--port", "0")
    finally:
        lock.release()
    assert code == 2
    one_line_error(err, "is in use by a running crawl")
    assert "dashboard:" not in err


async def test_out_naming_a_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    code, _out, err = await run("crawl", "http://127.0.0.1:9/", "--out", str(tmp_path / "notes.txt"))
    assert code == 2
    one_line_error(err, "notes.txt is a file: a crawl needs a directory")
    assert (tmp_path / "notes.txt").read_text() == "mine"


async def test_a_dead_seed_says_connection_refused(tmp_path: Path) -> None:
    code, _out, err = await run("crawl", "http://127.0.0.1:9/", "--out", str(tmp_path), "--retries", "0", "-q")
    assert code == 1
    assert "nothing was fetched; failed: robots.txt unreachable (connection refused)" in err, err


async def test_verbose_logs_every_request_and_json_logs_and_report(site_server: SiteServer, tmp_path: Path) -> None:
    code, _out, err = await run("crawl", site_server.url, "--out", str(tmp_path / "a"), "--max-pages", "3", "-v", *FAST)
    assert code == 0
    assert f"GET {site_server.url}robots.txt -> 200" in err or f"GET {site_server.url}/robots.txt -> 200" in err
    assert f"GET {site_server.url}" in err and " -> 200 text/html" in err

    code, out, err = await run(
        "crawl", site_server.url, "--out", str(tmp_path / "b"), "--max-pages", "3", "-v", "--log-format", "json", *FAST
    )
    assert code == 0
    report = json.loads(out)  # stdout holds the report alone
    assert (report["outcome"], report["pages"], report["name"]) == ("max-pages", 3, "default")
    lines = [json.loads(line) for line in err.splitlines()]
    requests = [line for line in lines if line["logger"] == "webtrawl.requests"]
    assert len(requests) >= 3 and all({"time", "level", "message", "url", "status"} <= set(line) for line in requests)


async def test_seeds_join_an_existing_crawl_only_when_asked(tmp_path: Path) -> None:
    async with serve_two_sites() as (first, second):
        out = tmp_path / "crawl"
        code, _out, err = await run("crawl", first, "--out", str(out), "-q", *FAST)
        assert code == 0, err
        code, _out, err = await run("crawl", second, "--out", str(out), "-q", *FAST)
        assert code == 2
        one_line_error(err, "started with other seeds", f"new here: {second}", "--add-seeds")
        code, _out, err = await run("crawl", second, "--out", str(out), "--add-seeds", "-q", *FAST)
        assert code == 0, err
        code, _out, err = await run("crawl", first, "--out", str(out), "-q", *FAST)  # fewer seeds: it resumes
        assert code == 0, err
    done = {url for (url,) in connect(out).execute("SELECT url FROM urls WHERE state = 2")}
    assert {f"{first}a", f"{second}b"} <= done  # the second site's pages were crawled in the same crawl
    (identity,) = connect(out).execute("SELECT identity FROM crawls").fetchone()
    assert json.loads(identity)["seeds"] == sorted([first, second])


@contextlib.asynccontextmanager
async def serve_two_sites() -> AsyncIterator[tuple[str, str]]:
    """Two hosts (127.0.0.1 and 127.0.0.2) of one page and one link each."""
    runners = []
    for host, link in (("127.0.0.1", "a"), ("127.0.0.2", "b")):

        async def page(request: web.Request, link: str = link) -> web.Response:
            body = f'<a href="/{link}">{link}</a>' if request.path == "/" else "leaf"
            return web.Response(text=body, content_type="text/html")

        app = web.Application()
        app.router.add_get("/{path:.*}", page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, 0).start()
        runners.append((host, runner))
    try:
        yield tuple(f"http://{host}:{runner.addresses[0][1]}/" for host, runner in runners)  # type: ignore[misc]
    finally:
        for _host, runner in runners:
            await runner.cleanup()
