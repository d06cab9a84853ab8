"""HLS streams: a ~200 MB stream of 2 s segments from a local nginx, joined by webtrawl and by ffmpeg; resumed.

A stream is one media task made of about a hundred small downloads, fetched one after the other and appended
to one file, with a record of the segments done written after each one. This measures what that costs next
to ffmpeg reading the same playlist (`-c copy`, no re-encoding): wall time, MB/s, CPU and peak memory of each
process; and what a `kill -9` halfway through costs the run that resumes it: the segments fetched twice and
the bytes downloaded beyond the stream's size, counted from nginx's access log.

    .venv/bin/python benchmarks/stream_bench.py [--timeout 600]

The stream is encoded once with ffmpeg into benchmarks/out/stream-200mb/ and reused. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from crawl_bench import OUT, warm_page_cache
from measure import Usage, print_columns, run_measured
from nginx import ACCESS_FIELDS, Nginx, NginxError

STREAM = OUT / "stream-200mb"
SECONDS = 192
"""Of video: libx264 at 8 Mbit/s with AAC audio makes about 1.04 MB of MPEG-TS a second, so ~200 MB."""
X264 = ["-c:v", "libx264", "-preset", "ultrafast", "-b:v", "8M", "-maxrate", "8M", "-bufsize", "16M"]
MPEG2 = ["-c:v", "mpeg2video", "-b:v", "8M", "-maxrate", "8M", "-bufsize", "16M"]
PAGE = '<!doctype html><title>stream</title><video><source src="index.m3u8" type="application/x-mpegURL"></video>'
KILL_AT = 0.5
"""Share of the stream in the part file past which the resumed crawl's first run is killed."""
POLL = 0.005
"""Seconds between two looks at the part file's size."""
SHOWN = 5
"""Segments named in the line of those fetched twice."""


class BenchError(RuntimeError):
    """A run failed or produced something other than the stream: no figures."""


@dataclass(frozen=True)
class Stream:
    """The served stream: its segments (playlist order) and what joining them gives."""

    segments: dict[str, int]
    """Each segment's URI path and size."""
    size: int
    sha256: str


@dataclass(frozen=True)
class Request:
    """One line of nginx's access log."""

    uri: str
    sent: int
    """Bytes nginx sent: response headers and body ($bytes_sent)."""


class AccessLog:
    """nginx's access log, read one run at a time: each `take` returns the requests logged since the last one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def take(self) -> list[Request]:
        with self.path.open("rb") as log:
            log.seek(self.offset)
            data = log.read()
        data = data[: data.rfind(b"\n") + 1]  # a line nginx is still writing belongs to the next take
        self.offset += len(data)
        requests = []
        for line in data.decode("latin-1").splitlines():
            row = dict(zip(ACCESS_FIELDS, line.split(" ", len(ACCESS_FIELDS) - 1), strict=True))
            requests.append(Request(row["uri"], int(row["bytes_sent"])))
        return requests


def prepare_stream(ffmpeg: str) -> Path:
    """The encoded stream and its page, reused when already there; built aside and renamed so a half stream
    is never served."""
    if (STREAM / "index.html").exists():
        print(f"stream: {STREAM} (cached)")
        return STREAM
    partial = OUT / f".{STREAM.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    encoders = subprocess.run([ffmpeg, "-hide_banner", "-encoders"], capture_output=True, text=True, check=True)
    video = X264 if " libx264 " in encoders.stdout else MPEG2
    print(f"stream: encoding {SECONDS} s of 720p video with {video[1]} into {STREAM} …", flush=True)
    started = time.perf_counter()
    subprocess.run(
        [ffmpeg, "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25",
         "-f", "lavfi", "-i", "sine=frequency=440", "-t", str(SECONDS), *video, "-g", "50", "-c:a", "aac",
         "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_segment_filename", "seg%05d.ts",
         "index.m3u8"],
        cwd=partial, check=True,
    )  # fmt: skip
    (partial / "robots.txt").write_text("User-agent: *\nAllow: /\n")  # nginx.py's readiness check asks for it
    (partial / "index.html").write_text(PAGE)  # last: its presence marks a whole stream
    partial.rename(STREAM)
    print(f"stream: encoded in {time.perf_counter() - started:.1f} s")
    return STREAM


def read_stream(root: Path) -> Stream:
    names = [line for line in (root / "index.m3u8").read_text().splitlines() if line and not line.startswith("#")]
    digest = hashlib.sha256()
    for name in names:
        digest.update((root / name).read_bytes())
    segments = {f"/{name}": (root / name).stat().st_size for name in names}
    return Stream(segments, sum(segments.values()), digest.hexdigest())


def crawl_command(url: str, out: Path, *media: str) -> list[str]:
    return [sys.executable, "-m", "webtrawl", "crawl", url, *media, "--delay", "0", "--out", str(out), "-q"]


def ended_well(what: str, usage: Usage) -> None:
    if usage.exit_code != 0 or usage.timed_out:
        raise BenchError(f"{what} exited with {usage.exit_code}" + (" (timed out)" * usage.timed_out))


def check_collected(label: str, out: Path, stream: Stream) -> tuple[dict[str, Any], list[str]]:
    """The crawl's one media row, once its file is checked to be the whole stream, joined in order; and notes
    about what the row says wrong of it."""
    shown = subprocess.run(
        [sys.executable, "-m", "webtrawl", "export", str(out), "--media"], capture_output=True, text=True, check=True
    )
    rows = [json.loads(line) for line in shown.stdout.splitlines() if line.strip()]
    if len(rows) != 1 or rows[0]["error"] is not None or not rows[0]["path"]:
        raise BenchError(f"{out}: expected one media row without error, got {rows}")
    row = rows[0]
    size = (out / row["path"]).stat().st_size
    if size != stream.size or row["size"] != stream.size:
        raise BenchError(f"{row['path']}: {size:,} bytes (row: {row['size']:,}), the segments hold {stream.size:,}")
    if row["sha256"] != stream.sha256:
        raise BenchError(f"{row['path']} is not the {len(stream.segments)} segments joined in order: {row}")
    notes = []
    if row["segments"] != len(stream.segments):
        notes.append(f"{label}: the media row says {row['segments']} segments, its file holds {len(stream.segments)}")
    return row, notes


def body_bytes(requests: list[Request], stream: Stream, headers: dict[str, int]) -> Counter[str]:
    """Bytes of segment bodies nginx sent, by segment (a response cut by a kill counts what went out)."""
    sent: Counter[str] = Counter()
    for request in requests:
        if request.uri in stream.segments:
            sent[request.uri] += min(max(request.sent - headers[request.uri], 0), stream.segments[request.uri])
    return sent


def part_size(out: Path) -> int:
    """Bytes in the crawl's stream part so far (0 before it exists)."""
    for part in out.glob("media/*/*.part"):
        with contextlib.suppress(FileNotFoundError):
            return part.stat().st_size
    return 0


def crawl_and_kill(command: list[str], out: Path, threshold: int, timeout: float) -> tuple[float, int]:
    """Run the crawl in a process group of its own and SIGKILL the group once the part passes `threshold`
    bytes; the seconds it ran and the part's size then."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        while (size := part_size(out)) <= threshold:
            if process.poll() is not None:
                raise BenchError(f"the crawl to kill exited with {process.returncode} before its part reached half")
            if time.perf_counter() - started > timeout:
                raise BenchError(f"the crawl to kill did not reach half the stream within {timeout:.0f} s")
            time.sleep(POLL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return time.perf_counter() - started, size


def recorded_segments(out: Path) -> int | None:
    """The segments the part's record (`name.part.json`) says it holds; None when it cannot be read."""
    try:
        return int(json.loads(next(out.glob("media/*/*.part.json")).read_text())["segments"])
    except (StopIteration, OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Resume:
    """A crawl killed halfway through the stream, then run again to its end on the same directory."""

    killed_after: float
    killed_size: int
    """Bytes in the part when the kill was sent."""
    recorded: int | None
    """Segments the part's record said were done then; None when the kill left it unreadable."""
    usage: Usage
    """Of the second run."""
    resumes: int
    """What the media row says."""
    before: list[Request]
    """Requests logged until the kill (the one it cut included)."""
    after: list[Request]
    notes: list[str]


def killed_and_resumed(url: str, out: Path, stream: Stream, log: AccessLog, timeout: float, quiet: IO[bytes]) -> Resume:
    command = crawl_command(url, out, "--media", "video")
    killed_after, killed_size = crawl_and_kill(command, out, int(stream.size * KILL_AT), timeout)
    recorded = recorded_segments(out)
    time.sleep(0.5)  # nginx logs the request the kill cut once it notices the connection is gone
    before = log.take()
    usage = run_measured(command, timeout=timeout, stdout=quiet)
    ended_well("the resumed webtrawl crawl", usage)
    row, notes = check_collected("resumed webtrawl", out, stream)
    return Resume(killed_after, killed_size, recorded, usage, row["resumes"], before, log.take(), notes)


def print_figures(stream: Stream, crawled: Usage, page_only: Usage, copied: Usage) -> None:
    """The table: each process, and the crawl less the same crawl without --media (what the stream took)."""
    mb = stream.size / 1e6
    rows = [
        ("webtrawl crawl PAGE --media video", crawled.seconds, crawled.cpu_seconds, f"{crawled.peak_rss_mb:.0f}"),
        (
            "  of which the stream (less a run without it)",
            crawled.seconds - page_only.seconds,
            crawled.cpu_seconds - page_only.cpu_seconds,
            "",
        ),
        ("ffmpeg -i PLAYLIST -c copy", copied.seconds, copied.cpu_seconds, f"{copied.peak_rss_mb:.0f}"),
    ]
    print_columns(
        ("tool", "seconds", "MB/s", "CPU s", "peak RSS MB"),
        [(name, f"{seconds:.2f}", f"{mb / seconds:.0f}", f"{cpu:.2f}", rss) for name, seconds, cpu, rss in rows],
    )


def print_resume(resume: Resume, stream: Stream, headers: dict[str, int]) -> None:
    first = body_bytes(resume.before, stream, headers).total()
    second = body_bytes(resume.after, stream, headers).total()
    requested = Counter(r.uri for r in (*resume.before, *resume.after) if r.uri in stream.segments)
    twice = sorted(uri for uri, n in requested.items() if n > 1)
    named = ", ".join(twice[:SHOWN]) + " …" * (len(twice) > SHOWN)
    requests = sum(r.uri in stream.segments for r in resume.after)
    usage = resume.usage
    record = (
        f"{resume.recorded} of {len(stream.segments)} segments recorded as done"
        if resume.recorded is not None
        else "its record of the segments done unreadable"
    )
    print(
        f"\nresume: killed (SIGKILL to its process group) after {resume.killed_after:.2f} s, the part at "
        f"{resume.killed_size / 1e6:.1f} MB ({resume.killed_size / stream.size:.0%}), {record}\n"
        f"resume: second run {usage.seconds:.2f} s, {usage.cpu_seconds:.2f} CPU s, {usage.peak_rss_mb:.0f} MB "
        f"peak RSS, downloaded {second / 1e6:.1f} MB of segments in {requests} requests "
        f"({resume.resumes} resume in its media row)\n"
        f"resume: segments fetched twice: {len(twice)}{f' ({named})' if twice else ''}\n"
        f"resume: overhead {(first + second) / stream.size - 1:+.2%} ({(first + second) / 1e6:.1f} MB of segments "
        f"downloaded by both runs for {stream.size / 1e6:.1f} MB)"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a run is killed (600)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    # A plain `kill` of the harness must still stop nginx and the crawler: turn it into an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        print("ffmpeg is not installed: it encodes the stream and is the baseline (apt-get install ffmpeg)")
        return 1
    OUT.mkdir(exist_ok=True)
    try:
        root = prepare_stream(ffmpeg)
        stream = read_stream(root)
        warm_page_cache(root)
        with (
            tempfile.TemporaryDirectory(prefix="stream-", dir=OUT) as tmp,
            Nginx(root, Path(tmp) / "nginx", access_log=True) as nginx,
            open(os.devnull, "wb") as quiet,  # webtrawl's summary line
        ):
            work = Path(tmp)
            assert nginx.access_log is not None
            log = AccessLog(nginx.access_log)
            log.take()  # the harness's own check that nginx answers
            print(
                f"stream: {len(stream.segments)} segments, {stream.size / 1e6:.1f} MB, served at {nginx.url}\n"
                f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} (busy CPUs slow MB/s)"
            )
            page = nginx.url + "index.html"

            print("running webtrawl …", flush=True)
            page_only = run_measured(crawl_command(page, work / "page"), timeout=args.timeout, stdout=quiet)
            ended_well("webtrawl crawl without --media", page_only)
            crawled = run_measured(
                crawl_command(page, work / "webtrawl", "--media", "video"), timeout=args.timeout, stdout=quiet
            )
            ended_well("webtrawl crawl", crawled)
            notes = check_collected("webtrawl", work / "webtrawl", stream)[1]
            # Every segment came whole: what nginx sent beyond its size is the response's header.
            headers = {r.uri: r.sent - stream.segments[r.uri] for r in log.take() if r.uri in stream.segments}

            print("running ffmpeg …", flush=True)
            copy = [ffmpeg, "-nostdin", "-loglevel", "error", "-i", nginx.url + "index.m3u8", "-c", "copy"]
            copied = run_measured([*copy, "-f", "mpegts", str(work / "ffmpeg.ts")], timeout=args.timeout)
            ended_well("ffmpeg", copied)
            log.take()

            print(f"running webtrawl, killed at {KILL_AT:.0%} of the stream, then again …", flush=True)
            resume = killed_and_resumed(page, work / "resumed", stream, log, args.timeout, quiet)
    except (BenchError, NginxError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: no figures", file=sys.stderr)
        return 130
    print_figures(stream, crawled, page_only, copied)
    print_resume(resume, stream, headers)
    for note in notes + resume.notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
