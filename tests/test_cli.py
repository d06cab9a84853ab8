"""The `webtrawl` command as a user runs it: exit codes, one-line errors, export, status."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.crawls import connect
from tests.sites import SiteServer
from webtrawl.store.db import DirectoryLock
from webtrawl.store.db import connect as store_connect
from webtrawl.store.live import publish


async def webtrawl(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run the real command in a subprocess (the test's event loop keeps serving the test site)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "webtrawl",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


FAST = ("--delay", "0", "--per-host", "4", "--concurrency", "8")


def one_line_error(err: str, *fragments: str) -> None:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("webtrawl: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["crawl", "http://[oops/", "--out", "{tmp}"], ["bad seed URL", "http://[oops/"]),
        (["crawl", "ftp://example.org/", "--out", "{tmp}"], ["unsupported scheme"]),
        (
            ["crawl", "http://127.0.0.1:9/", "--out", "/proc/no/such/dir"],
            ["cannot write to /proc/no/such/dir"],
        ),
        (["crawl", "http://127.0.0.1:9/", "--out", "{tmp}", "--deny", "("], ["bad regular expression"]),
        (
            ["crawl", "http://127.0.0.1:9/", "--out", "{tmp}", "--concurrency", "0"],
            ["concurrency must be > 0"],
        ),
        (["crawl", "http://127.0.0.1:9/", "--out", "{tmp}", "--name", "a/b"], ["crawl name"]),
        (["status", "{tmp}"], ["no crawl database"]),
        (["export", "{tmp}"], ["no crawl database"]),
    ],
)
async def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    code, _out, err = await webtrawl(*(a.format(tmp=tmp_path) for a in args))
    assert code == 2
    one_line_error(err, *fragments)


async def test_a_lease_shorter_than_a_heartbeat_is_refused(tmp_path: Path) -> None:
    code, _out, err = await webtrawl(
        "crawl", "http://127.0.0.1:9/", "--out", str(tmp_path), "--redis", "redis://127.0.0.1:9", "--lease-ttl", "2"
    )
    assert code == 2
    assert "Traceback" not in err and "--lease-ttl ≥ 3 s (a heartbeat and a margin)" in err


async def test_unreachable_seed_is_a_failed_url_and_exit_1(tmp_path: Path) -> None:
    code, out, _err = await webtrawl(
        "crawl", "http://127.0.0.1:9/", "--out", str(tmp_path), "--retries", "0", "--ignore-robots", "-q"
    )
    assert code == 1
    assert "0 done, 1 failed" in out
    (reason,) = connect(tmp_path).execute("SELECT reason FROM urls WHERE state = 3").fetchone()
    assert "refused" in reason


async def test_crawl_export_status_round_trip(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    code, out, err = await webtrawl(
        "crawl", site_server.url, "--out", str(tmp_path), "--max-depth", str(site.deepest), *FAST
    )
    assert code == 0, err
    assert "finished" in out and "dropped by reason" in out
    captures = connect(tmp_path).execute("SELECT COUNT(*) FROM captures").fetchone()[0]

    code, jsonl, _ = await webtrawl("export", str(tmp_path))
    rows = [json.loads(line) for line in jsonl.splitlines()]
    assert len(rows) == captures
    by_url = {row["url"]: row for row in rows}
    home = by_url[site_server.url]
    assert home["status"] == 200 and home["depth"] == 0 and home["title"] == site.pages["/"].title
    assert home["warc_file"].endswith(".warc.gz") and home["warc_offset"] >= 0
    assert by_url[site.url("/docs")]["final_url"] == site.url("/docs/")
    assert by_url[site.url("/hop/1")]["final_url"] == site.url("/chain-end/")
    assert by_url[site.url("/hop/3")]["redirects"] == [site.url("/hop/1"), site.url("/hop/2")]

    out_file = tmp_path / "pages.csv"
    code, _, _ = await webtrawl("export", str(tmp_path), "--format", "csv", "-o", str(out_file))
    assert code == 0
    assert len(list(csv.DictReader(io.StringIO(out_file.read_text())))) == captures

    code, cdxj, _ = await webtrawl("export", str(tmp_path), "--format", "cdxj")
    keys = [line.split(" ", 2)[0] for line in cdxj.splitlines()]
    assert keys == sorted(keys) and keys[0].startswith("1,0,0,127:")  # surt reverses IP addresses too

    code, status, _ = await webtrawl("status", str(tmp_path))
    assert code == 0 and "done" in status and "waiting" in status


async def test_a_crawl_run_alone_does_not_load_the_distributed_or_stream_code(
    site_server: SiteServer, tmp_path: Path
) -> None:
    """Redis's client and the HLS decryption's bindings cost 15 MB of memory that only distributed crawls
    and encrypted streams use; `-X importtime` names every module the crawl's process loaded."""
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-X", "importtime", "-m", "webtrawl", "crawl", site_server.url, "--out", str(tmp_path)),
        *(*FAST, "--max-pages", "20", "--quiet"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    loaded = {line.rsplit("|", 1)[1].strip() for line in err.decode().splitlines() if line.startswith("import time:")}
    assert "webtrawl.crawler" in loaded and "aiohttp" in loaded
    assert not {name for name in loaded if name.split(".")[0] in ("redis", "cryptography")}
    assert "webtrawl.cluster.node" not in loaded


async def test_resuming_a_crawl_whose_urls_were_normalized_otherwise_says_what_to_do(
    site_server: SiteServer, tmp_path: Path
) -> None:
    code, _, _ = await webtrawl("crawl", site_server.url, "--out", str(tmp_path), "--max-pages", "3", *FAST)
    assert code == 0
    with sqlite3.connect(tmp_path / "crawl.db") as conn:  # as a crawl begun before escapes were upper-cased
        conn.execute("UPDATE crawls SET identity = json_set(identity, '$.normalization', 2)")
    code, _, err = await webtrawl("crawl", site_server.url, "--out", str(tmp_path), *FAST)
    assert code == 2
    one_line_error(err, "older webtrawl", "percent escapes are upper-cased", "--name", "--out")


async def test_resume_with_changed_scope_is_a_usage_error(site_server: SiteServer, tmp_path: Path) -> None:
    code, _, _ = await webtrawl("crawl", site_server.url, "--out", str(tmp_path), "--max-pages", "3", *FAST)
    assert code == 0
    code, _, err = await webtrawl("crawl", site_server.url, "--out", str(tmp_path), "--deny", "x", *FAST)
    assert code == 2
    one_line_error(err, "other settings", "scope.deny")


async def test_config_file_values_hold_unless_a_flag_is_given(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text('[scope]\ndeny = ["/private/"]\n[politeness]\ndelay = 0\nper_host = 3\n')
    out = tmp_path / "out"
    code, _, err = await webtrawl(
        "crawl",
        "http://127.0.0.1:9/",
        "--out",
        str(out),
        "--config",
        str(config),
        "--per-host",
        "5",
        "--retries",
        "0",
        "--ignore-robots",
        "-q",
    )
    assert code == 1, err
    (identity,) = connect(out).execute("SELECT identity FROM crawls").fetchone()
    assert json.loads(identity)["scope"]["deny"] == ["/private/"]  # from the file: no --deny was given


async def test_status_says_whether_the_crawl_runs_and_how_its_last_run_ended(
    site_server: SiteServer, tmp_path: Path
) -> None:
    async def first_line() -> str:
        code, out, err = await webtrawl("status", str(tmp_path))
        assert code == 0, err
        return out.splitlines()[0].removeprefix(f"crawl 'default' in {tmp_path}: ")

    code, _out, err = await webtrawl("crawl", site_server.url, "--out", str(tmp_path), "--max-pages", "3", *FAST)
    assert code == 0, err
    assert await first_line() == "stopped at --max-pages: run the same command with a higher one to go on"

    def publish_state(state: str) -> None:
        conn = store_connect(tmp_path / "crawl.db")
        try:
            (crawl_id,) = conn.execute("SELECT id FROM crawls").fetchone()
            (snapshot,) = conn.execute("SELECT snapshot FROM crawl_live").fetchone()
            publish(conn, crawl_id, json.loads(snapshot) | {"state": state}, checkpoint=False)
        finally:
            conn.close()

    publish_state("running")  # as a crawl killed mid-run leaves it: no process holds the directory
    assert await first_line() == "interrupted (its process ended mid-run): run the same command again to resume"
    lock = DirectoryLock(tmp_path)
    lock.acquire()  # as the crawl's process holds it
    try:
        publish_state("paused")
        assert await first_line() == f"paused (pid {os.getpid()})"
        publish_state("running")
        assert await first_line() == f"running (pid {os.getpid()})"
    finally:
        lock.release()
    code, _out, err = await webtrawl("crawl", site_server.url, "--out", str(tmp_path), *FAST)
    assert code == 0, err
    assert await first_line() == "finished"
