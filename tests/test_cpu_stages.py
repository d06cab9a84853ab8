"""Where a crawl's CPU went: the split by stage its last snapshot keeps (what `make bench` prints)."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
