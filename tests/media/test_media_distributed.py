"""Media collection in a distributed crawl: a coordinator and a worker, as real processes, on a local Redis."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from typing import Generic, TypeVar

import pytest

from tests.cluster.processes import coordinator, crawl_rows, node_of, wait_for_crawl, worker
from tests.redis_servers import RedisServer
from tests.sites import music_resolver
from tests.sites.music import MusicSite
from tests.sites.streams import PAGES, StreamSite, manifest_path

Site = TypeVar("Site", MusicSite, StreamSite)


class ThreadedSite(Generic[Site]):
    """A test site served from a thread, for tests whose crawlers are other processes."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    async def _serve(self) -> None:
        async with self.site:
            self._ready.set()
            while not self._stop.is_set():
                await asyncio.sleep(0.05)

    def __enter__(self) -> Site:
        self._thread.start()
        assert self._ready.wait(20)
        return self.site

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


class Seeds:
    def __init__(self, url: str) -> None:
        self.seeds = [url]


def crawl_with_a_worker(seed: str, redis_url: str, tmp_path: Path, kinds: str) -> dict[str, Path]:
    """A coordinator (its node in tmp_path/coord) and a worker (in tmp_path/w1) collect `kinds`; returns
    each node's directory by node id (whichever registered first is node-01)."""
    coord = coordinator(Seeds(seed), redis_url, tmp_path / "coord", "--media", kinds)  # type: ignore[arg-type]
    wait_for_crawl(redis_url)
    helper = worker(redis_url, tmp_path / "w1")
    helper_id = node_of(redis_url, helper.pid)
    code, _stdout, stderr = coord.finish()
    assert code == 0, stderr
    code, _out, stderr = helper.finish()
    assert code == 0, stderr
    own_id = "node-02" if helper_id == "node-01" else "node-01"
    return {helper_id: tmp_path / "w1", own_id: tmp_path / "coord"}


@pytest.mark.slow
def test_a_coordinator_and_a_worker_collect_every_track_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = music_resolver.install(tmp_path / "plugins")
    monkeypatch.setenv("PYTHONPATH", f"{plugins}:{Path.cwd()}")
    with ThreadedSite(MusicSite()) as site, RedisServer() as server:
        homes = crawl_with_a_worker(site.url + "/", server.url, tmp_path, "audio,video")
        expected = {url for urls in site.expected.values() for url in urls}
        sha = {site.url + track.path: track.sha256 for track in site.tracks.values()}
        sha[site.url + "/files/clip.vtt"] = site.served("/files/clip.vtt").sha256
        signed = {f"musicsite:{track_id}": track.sha256 for track_id, track in site.signed_tracks.items()}
    rows = crawl_rows(  # every node's shard, read as one crawl
        tmp_path / "coord", "SELECT task, url, sha256, path, node, error, page_url FROM media WHERE crawl_id = ?"
    )
    assert [row for row in rows if row[5]] == []
    by_task = {task: (url, digest, path, node, page) for task, url, digest, path, node, _error, page in rows}
    assert len(by_task) == len(rows)
    assert {url for task, (url, *_rest) in by_task.items() if task.startswith("generic:")} == expected
    for task, (url, digest, path, node, page) in by_task.items():
        assert digest == (signed[task] if task in signed else sha[url])
        assert page.startswith(site.url + "/")
        if path is not None:
            assert hashlib.sha256((homes[node] / path).read_bytes()).hexdigest() == digest
    assert set(signed) <= set(by_task)


@pytest.mark.slow
def test_streams_are_collected_once_each_in_a_distributed_crawl(tmp_path: Path) -> None:
    with ThreadedSite(StreamSite()) as site, RedisServer() as server:
        homes = crawl_with_a_worker(site.url + "/", server.url, tmp_path, "video")
        expected = {f"playlist:{site.url}{manifest_path(name)}": site.expected(name) for name in PAGES}
    rows = crawl_rows(tmp_path / "coord", "SELECT task, path, node, error, stream FROM media WHERE crawl_id = ?")
    assert sorted(task for task, *_rest in rows) == sorted(expected)
    for task, path, node, error, stream in rows:
        assert error is None and stream in ("hls", "dash")
        assert (homes[node] / path).read_bytes() == expected[task]
