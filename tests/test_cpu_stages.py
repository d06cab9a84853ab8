"""Where a crawl's CPU went: the split by stage its last snapshot keeps (what `make bench` prints)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.crawls import connect, fast_config
from tests.sites import SiteServer
from webtrawl import Crawler
from webtrawl.cpu import STAGES, split


async def test_a_crawl_records_its_cpu_by_stage(site_server: SiteServer, tmp_path: Path) -> None:
    before = os.times()
    await Crawler(fast_config(site_server.url, tmp_path, max_depth=2)).run()
    after = os.times()
    (snapshot,) = connect(tmp_path).execute("SELECT snapshot FROM crawl_live").fetchone()
    stages = json.loads(snapshot)["cpu_seconds"]
    assert tuple(stages) == STAGES
    for stage in ("fetch", "parse", "hashing", "archive", "database", "index"):
        assert stages[stage] > 0, stages  # every stage did some work
    process = (after.user + after.system) - (before.user + before.system)
    assert sum(stages.values()) <= process + 0.05  # the stages never count more than the process used


def test_the_split_takes_timed_sections_out_of_their_threads() -> None:
    stages = split({"parse": 1.0, "hashing": 0.5, "index": 2.0}, loop=3.0, archive=1.0, database=5.0, total=10.0)
    assert stages == {
        "fetch": 1.5,
        "parse": 1.0,
        "hashing": 0.5,
        "archive": 1.0,
        "database": 3.0,
        "index": 2.0,
        "other": 1.0,
    }


def test_seconds_a_worker_process_used_count_in_their_stage_not_against_the_loop_or_other() -> None:
    timed = {"parse": 1.0, "hashing": 0.5, "index": 2.0}
    # The worker, reaped when the run closed it, is in the process's 11.5 s: 1.2 s timed, the rest its own
    stages = split(timed, loop=3.0, archive=1.0, database=5.0, total=11.5, away=1.2)
    assert stages["fetch"] == pytest.approx(2.7)  # the loop ran 0.3 s of parsing and hashing itself
    assert (stages["parse"], stages["hashing"]) == (1.0, 0.5)
    assert stages["other"] == pytest.approx(11.5 - 3.0 - 1.0 - 5.0 - 1.2)
    assert sum(stages.values()) == pytest.approx(11.5)
