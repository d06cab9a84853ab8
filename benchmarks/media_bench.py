"""Media download throughput: one large file from a local nginx, fetched by curl and by webtrawl, same run.

Prints MB/s for:
- curl writing the file to disk;
- webtrawl's downloader alone (`media.download.download`: stream to `name.part`, written on a thread);
- the same downloader broken twice on purpose (the client drops the connection at 30% and 70%) and resumed
  with Range + If-Range: the overhead of resuming;
- a whole `webtrawl crawl PAGE --media audio` of a page linking the file (process start, page fetch, the
  download, SHA-256, tags and index included), and what it takes more than the same crawl without --media.

    .venv/bin/python benchmarks/media_bench.py [--size-mb 200] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nginx import Nginx
from webtrawl.media.download import discard, download

CUTS = (0.3, 0.7)


def make_site(root: Path, size: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (root / "index.html").write_text('<!doctype html><title>album</title><a href="/big.mp3">big</a>')
    with (root / "big.mp3").open("wb") as out:
        block = os.urandom(1024 * 1024)
        for _ in range(size // len(block)):
            out.write(block)


def timed(runs: int, job: Callable[[], object]) -> float:
    """The median wall time of `runs` runs of `job`."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        job()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def _download(url: str, part: Path, cuts: tuple[float, ...], size: int) -> None:
    """Download `url` into `part`, dropping the connection at each cut and resuming."""
    discard(part)
    async with aiohttp.ClientSession(headers={"Accept-Encoding": "identity"}) as session:
        for cut in cuts:
            task = asyncio.create_task(download(session, url, part))
            while not part.exists() or part.stat().st_size < cut * size:
                await asyncio.sleep(0.002)
            task.cancel()  # the connection drops here, as a broken network would drop it
            with contextlib.suppress(asyncio.CancelledError):
                await task
        attempt = await download(session, url, part)
        assert attempt.complete and attempt.resumed == bool(cuts) and part.stat().st_size == size, attempt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    size = args.size_mb * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="webtrawl-media-bench-") as tmp:
        work = Path(tmp)
        make_site(work / "site", size)
        with Nginx(work / "site", work / "nginx") as nginx:
            url = nginx.url + "big.mp3"
            out = work / "curl.bin"
            curl = timed(args.runs, lambda: subprocess.run(["curl", "-sS", "-o", str(out), url], check=True))
            part = work / "dl" / "big.mp3.part"
            part.parent.mkdir()
            plain = timed(args.runs, lambda: asyncio.run(_download(url, part, (), size)))
            broken = timed(args.runs, lambda: asyncio.run(_download(url, part, CUTS, size)))

            def crawl(*media: str) -> None:
                shutil.rmtree(work / "crawl", ignore_errors=True)
                subprocess.run(
                    [sys.executable, "-m", "webtrawl", "crawl", nginx.url, "--out", str(work / "crawl"),
                     "--delay", "0", "-q", *media],
                    check=True, stdout=subprocess.DEVNULL,
                )  # fmt: skip

            whole = timed(args.runs, lambda: crawl("--media", "audio"))
            pages_only = timed(args.runs, crawl)
    mb = size / 1e6
    print(f"{args.size_mb} MiB file from nginx on loopback, median of {args.runs} runs")
    print(f"{'what':<46} | seconds |   MB/s")
    print(f"{'-' * 46}-+---------+-------")
    for label, seconds in [
        ("curl -o FILE", curl),
        ("webtrawl download()", plain),
        ("webtrawl download(), broken at 30% and 70%", broken),
        ("webtrawl crawl PAGE --media audio (whole run)", whole),
        ("  of which the media (less a run without it)", whole - pages_only),
    ]:
        print(f"{label:<46} | {seconds:7.2f} | {mb / seconds:6.0f}")
    print(f"\nwebtrawl download / curl: {curl / plain:.2f}x the throughput")
    print(f"two resumes cost {broken - plain:+.2f} s ({(broken / plain - 1) * 100:+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
