"""The `webtrawl` command: parse flags, build a config, call the library, talk to the terminal.

Exit codes: 0 done (or stopped from the dashboard or `webtrawl control`), 1 the crawl fetched nothing, 2 a
usage error (one line, no traceback), 130 stopped by Ctrl-C. A stopped crawl resumes when the same command
runs again. `show` exits 1 when its reader stops early (`| head`): what it printed is incomplete.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from . import __version__
from .archive_commands import export, merge, show
from .cluster.events import Event
from .config import CrawlConfig
from .crawler import Crawler
from .flags import GroupedCommand, crawl_options, layout_of
from .interrupts import Interrupts, interruptible
from .logs import setup_logging
from .progress import Progress, describe, print_nodes, print_report, print_status, report_line
from .settings import from_command_line
from .stats import CrawlReport
from .store.crawls import DEFAULT_NAME, crawl_id_of, crawl_name
from .store.db import DB_NAME, DirectoryLock, connect
from .store.index import rendered_counts
from .store.live import ACTIVE, obeyed, read_snapshot, send_command
from .store.media import media_counts
from .store.overview import overview
from .store.shards import Sources, load_places
from .terminal import NAME_HELP, USAGE_ERRORS, fail, say
from .web.serve import DEFAULT_HOST, DEFAULT_PORT, Dashboard
from .web.site import Site

# The distributed crawl's modules (the cluster package and Redis's client, 9 MB) are imported by the
# commands and passes that use them, so that an embedded crawl's process does not carry them.
if TYPE_CHECKING:
    from .cluster.layout import Layout

T = TypeVar("T")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="webtrawl")
def main() -> None:
    """A breadth-first, resumable, polite web crawler: WARC archive + SQLite index."""


main.add_command(export)
main.add_command(show)
main.add_command(merge)


@main.command(cls=GroupedCommand)
@click.argument("seeds", nargs=-1)
@crawl_options
@click.option("--serve", "serve_dashboard", is_flag=True, help="Run the dashboard beside the crawl (127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True, help="With --serve: its port."
)
def crawl(seeds: tuple[str, ...], serve_dashboard: bool, port: int, **flags: Any) -> None:
    """Crawl SEEDS breadth-first into the directory --out (run it again to resume)."""
    try:
        config, flags = from_command_line(click.get_current_context(), seeds, flags)
    except USAGE_ERRORS as exc:
        fail(str(exc))
    setup_logging(flags["verbose"], flags["log_format"])
    output: Output = "json" if flags["log_format"] == "json" else "quiet" if flags["quiet"] else "full"
    quiet, redis_url = output != "full", flags["redis_url"]  # a JSON report is all stdout holds
    with contextlib.ExitStack() as stack:
        if serve_dashboard:
            stack.enter_context(_dashboard_beside(config, redis_url, port))
        if redis_url is not None:
            if config.add_seeds:  # the nodes' scope is fixed in Redis when the crawl is created
                fail("--add-seeds works on a crawl run alone; a distributed crawl's seeds are fixed at creation")
            layout = layout_of(
                config,
                flags["partitions"],
                flags["dedup"],
                flags["expected_urls"],
                flags["fp_rate"],
                flags["lease_ttl"],
            )
            layout = replace(layout, partition_by=flags["partition_by"])
            run_pass = partial(
                _coordinator_pass, config, redis_url, layout, not flags["no_fetch"], flags["refetch_lost"], quiet
            )
        else:
            run_pass = partial(_embedded_pass, config, quiet)
        ended = _run(interruptible(partial(_passes, run_pass, config.revisit.every, output), say))
        if ended is None:
            click.echo("interrupted: run the same command again to resume", err=True)
            sys.exit(130)
        report, nodes = ended
        _finish(report, output)
        if output != "json":
            print_nodes(nodes)


Nodes = dict[str, dict[str, Any]]
"""Each node's final report, by node id (distributed crawls only)."""


async def _passes(
    run_pass: Callable[[Interrupts], Awaitable[tuple[CrawlReport, Nodes]]],
    every: float | None,
    output: Output,
    interrupts: Interrupts,
) -> tuple[CrawlReport, Nodes] | None:
    """Run the crawl once, or with `--every` pass after pass until interrupted. Returns the last pass's
    report, or None when the interrupt came as a pass ended or while its report was written."""
    while True:
        report, nodes = await run_pass(interrupts)
        if every is None or report.outcome != "finished":
            return report, nodes
        _finish(report, output, final=False)
        if interrupts.requested:
            return None
        click.echo(f"next re-crawl pass in {every:g} s (Ctrl-C to stop)", err=True)
        await asyncio.sleep(every)


async def _embedded_pass(config: CrawlConfig, quiet: bool, interrupts: Interrupts) -> tuple[CrawlReport, Nodes]:
    crawler = Crawler(config)
    progress = None if quiet else Progress(crawler, plain=not sys.stdout.isatty())
    with interrupts.stopping(crawler.stop):
        if progress is None:
            return await crawler.run(), {}
        async with progress:
            return await crawler.run(), {}


async def _coordinator_pass(
    config: CrawlConfig,
    redis_url: str,
    layout: Layout,
    fetch: bool,
    refetch_lost: bool,
    quiet: bool,
    interrupts: Interrupts,
) -> tuple[CrawlReport, Nodes]:
    from .cluster.runs import run_coordinator

    def on_event(event: Event) -> None:
        say(describe(event))

    return await run_coordinator(
        config,
        redis_url,
        layout,
        fetch=fetch,
        refetch_lost=refetch_lost,
        on_event=None if quiet else on_event,
        interrupts=interrupts,
    )


def _dashboard_beside(
    config: CrawlConfig, redis_url: str | None, port: int
) -> contextlib.AbstractContextManager[Dashboard]:
    """The dashboard of the crawl, on 127.0.0.1 (with the token of WEBTRAWL_TOKEN if set), for `crawl --serve`."""
    if DirectoryLock.held(config.out):  # said before the dashboard's address, which would be of no use
        fail(f"{config.out} is in use by a running crawl; wait for it to finish or stop it first")
    site = Site(config.out, name=config.name, redis_url=redis_url, token=os.environ.get("WEBTRAWL_TOKEN") or None)
    try:
        dashboard = Dashboard(site, DEFAULT_HOST, port)
    except USAGE_ERRORS as exc:
        fail(str(exc))
    click.echo(f"dashboard: {dashboard.url}", err=True)
    return dashboard.beside()


Output = Literal["full", "quiet", "json"]
"""How the end report is printed: the table, one line, or one JSON object (`--log-format json`)."""


def _finish(report: CrawlReport, output: Output, *, final: bool = True) -> None:
    """Print the report; exit 130 when interrupted, 1 when nothing was fetched (unless not `final`)."""
    if output == "json":
        click.echo(json.dumps({**asdict(report), "pages_per_second": round(report.pages_per_second, 2)}))
    elif output == "quiet":
        click.echo(report_line(report))
    else:
        print_report(report)
    if not final:
        return
    if report.outcome == "interrupted":
        click.echo("interrupted: run the same command again to resume", err=True)
        sys.exit(130)
    if report.outcome == "stopped":
        click.echo("stopped: run the same command again to resume", err=True)
    if report.done_total == 0:
        if report.failures and output != "full":  # the full report lists them already
            reasons = ", ".join(f"{reason} ({count:,})" for reason, count in report.failures.items())
            click.echo(f"nothing was fetched; failed: {reasons}", err=True)
        sys.exit(1)


@main.command()
@click.argument("directory", type=click.Path(path_type=Path), required=False)
@click.option("--name", help=NAME_HELP + " With --redis: 'default'.")
@click.option("--redis", "redis_url", metavar="URL", help="Show a distributed crawl as Redis holds it (no DIRECTORY).")
def status(directory: Path | None, name: str | None, redis_url: str | None) -> None:
    """Print the frontier's counts of a crawl directory (or of a distributed crawl, with --redis)."""
    if redis_url is not None:
        from .cluster.status import crawl_status

        print_status(_run(crawl_status(redis_url, name or DEFAULT_NAME)))
        return
    if directory is None:
        fail("give the crawl DIRECTORY, or --redis URL for a distributed crawl")
    try:
        conn = connect(directory / DB_NAME, readonly=True)
        try:
            name = crawl_name(conn, name)
        finally:
            conn.close()
        with Sources.open(directory, name) as sources:
            totals = overview(sources)
            last = read_snapshot(sources.home.conn, sources.home.crawl_id) if sources.home else None
            media: Counter[str] = sum((Counter(media_counts(s.conn, s.crawl_id)) for s in sources.all), Counter())
            pairs = [rendered_counts(s.conn, s.crawl_id) for s in sources.all]
            rendered, subresources = sum(r for r, _ in pairs), sum(sub for _, sub in pairs)
            held = {
                source.number: source.conn.execute(
                    "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM captures WHERE crawl_id = ?", (source.crawl_id,)
                ).fetchone()
                for source in sources.all
                if sources.distributed
            }
        places = load_places(directory)
    except USAGE_ERRORS as exc:
        fail(str(exc))
    click.echo(f"crawl {name!r} in {directory}: {_state(directory, last)}")
    for label in ("waiting", "running", "done", "failed"):
        click.echo(f"  {label:8} {getattr(totals, label):>10,}")
    click.echo(f"  {'captures':8} {totals.captures:>10,}  ({totals.bytes:,} bytes)")
    if any(media.values()):
        click.echo(
            f"  {'media':8} {media['stored']:>10,}  ({media['bytes']:,} bytes; {media['duplicates']:,} duplicates, "
            f"{media['failed']:,} failed)"
        )
    if rendered or subresources:
        run = (last[1] if last else {}).get("render") or {}
        click.echo(
            f"  {'rendered':8} {rendered:>10,}  ({subresources:,} subresources archived; last run: "
            f"{run.get('render_seconds', 0):,.1f} s rendering, {run.get('render_timeouts', 0):,} cut by the timeout, "
            f"{run.get('browser_restarts', 0):,} browser restarts)"
        )
    due = totals.due
    if due.total:
        upcoming = "" if due.next_at is None else f"; next at {_when(due.next_at)}"
        click.echo(
            f"  {'revisits':8} {due.now:>10,} due now, {due.within_hour:,} within an hour, "
            f"{due.within_day:,} within a day, {due.later:,} later{upcoming} (webtrawl crawl … --recrawl)"
        )
    if places:
        click.echo(f"  {'shards':8} {len(places):>10,}  (each node's own index, in its directory)")
        for number, place in enumerate(places):
            if number in held:
                pages, size = held[number]
                click.echo(f"    {pages:>10,} captures ({size:,} bytes)  {', '.join(place.nodes)} at {place.key}")
            else:
                click.echo(f"  shard of {', '.join(place.nodes)} at {place.key} cannot be read from this machine")


_ENDED = {
    "finished": "finished",
    "interrupted": "interrupted (Ctrl-C or SIGTERM): run the same command again to resume",
    "stopped": "stopped (webtrawl control stop): run the same command again to resume",
    "max-pages": "stopped at --max-pages: run the same command with a higher one to go on",
    "max-time": "stopped at --max-time: run the same command again to go on",
}
"""What `status` says of a run that ended, by the outcome its last snapshot holds."""


def _state(directory: Path, last: tuple[float, dict[str, Any]] | None) -> str:
    """Whether the crawl runs now (and its pid), is paused, or how its last run ended."""
    state = str(last[1].get("state")) if last else None
    pid = DirectoryLock.holder(directory)
    if pid is not None:
        return f"{state if state in ('paused', 'stopping') else 'running'} (pid {pid})"
    if state is None:
        return "not run yet"
    if state in ACTIVE:  # its process ended without writing how: killed, or its machine went down
        return "interrupted (its process ended mid-run): run the same command again to resume"
    return _ENDED.get(state, state)


@main.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--name", help=NAME_HELP)
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on (others need a token).")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--token", envvar="WEBTRAWL_TOKEN", help="Required on every request [env WEBTRAWL_TOKEN].")
@click.option(
    "--redis", "redis_url", metavar="URL", help="A distributed crawl's Redis: nodes and control come from it."
)
@click.option("--verbose", "-v", is_flag=True, help="Log every request to stderr.")
def serve(
    directory: Path, name: str | None, host: str, port: int, token: str | None, redis_url: str | None, verbose: bool
) -> None:
    """Open the dashboard on a crawl directory, finished or running (Ctrl-C to quit)."""
    setup_logging(verbose)
    try:
        name = _crawl_in(directory, name)
        site = Site(directory, name=name, redis_url=redis_url, token=token or None)
        dashboard = Dashboard(site, host, port, log_requests=verbose)
        with site.reader():  # a missing directory or crawl is one line now, not an error on every page
            pass
    except USAGE_ERRORS as exc:
        fail(str(exc))
    click.echo(f"dashboard of crawl {name!r} in {directory}: {dashboard.url}  (Ctrl-C to quit)")
    asyncio.run(_serve_until_interrupted(dashboard))


async def _serve_until_interrupted(dashboard: Dashboard) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, dashboard.stop)
    await dashboard.serve()


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


YOUNG_COLLECTION = 10_000
"""Allocations between two collections of the youngest objects (Python's default: 700)."""


def _run(job: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine: errors are one line, a Ctrl-C before its own handling is in place exits."""
    _spare_collector()
    try:
        return asyncio.run(job)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        message = _expected(exc)
        if message is None:
            raise
        fail(message)


def _spare_collector() -> None:
    """Keep the cyclic garbage collector's pauses, which hold the GIL, short and few in a long run.

    What is loaded by now (~100,000 objects: modules, classes, functions) lives as long as the process:
    frozen, full collections no longer walk it. A page's objects are nearly all freed by their reference
    counts, so the youngest are looked at for cycles every 10,000 allocations rather than 700. Measured on
    the benchmark's 20,000 pages: collections took 1.0 s of the crawl instead of 2.3, and 1.4 s instead of
    4.1 in one Redis node (36 full collections of 64 ms each, there, before).
    """
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION, *gc.get_threshold()[1:])


def _expected(exc: BaseException) -> str | None:
    """The one line for a failure that is the user's or their Redis' rather than webtrawl's: a usage error, or a
    command Redis refused (a user without the permission, a read-only replica). Tasks run in groups, so it may
    come wrapped; a group that also holds anything else is a bug, and keeps its traceback."""
    messages = [_expected_leaf(leaf) for leaf in _leaves(exc)]
    return None if None in messages else messages[0]


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _expected_leaf(exc: BaseException) -> str | None:
    if isinstance(exc, USAGE_ERRORS):
        return str(exc)
    redis = sys.modules.get("redis.exceptions")  # redis-py not loaded: the error is not one of its own
    if redis is not None and isinstance(exc, redis.RedisError):
        return f"Redis refused a command: {exc}"
    return None


@main.command()
@click.option("--redis", "redis_url", metavar="URL", required=True, help="The Redis holding the crawl.")
@click.option("--name", default="default", show_default=True, help="The crawl to join.")
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    help="Where this node writes its WARC files (default: ./webtrawl-NODE).",
)
@click.option("--concurrency", type=int, help="Fetches in flight on this node (default: the crawl's).")
@click.option("--quiet", "-q", is_flag=True, help="Only the final summary line.")
@click.option("--verbose", "-v", is_flag=True, help="Log details to stderr.")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log lines as text, or as one JSON object each.",
)
@click.option("--attached", is_flag=True, hidden=True, help="Started by `crawl --redis` as its node (cluster.ownnode).")
@click.option(
    "--lock-fd", type=int, hidden=True, help="The lock of --out, held by `crawl --redis` (store.db.DirectoryLock)."
)
def worker(
    redis_url: str,
    name: str,
    out: Path | None,
    concurrency: int | None,
    quiet: bool,
    verbose: bool,
    log_format: str,
    attached: bool,
    lock_fd: int | None,
) -> None:
    """Join a distributed crawl as a node; leave when it ends or is told to stop."""
    from .cluster.runs import run_worker

    setup_logging(verbose, log_format)
    ended = _run(
        interruptible(
            lambda interrupts: run_worker(
                redis_url,
                name,
                out=out,
                concurrency=concurrency,
                interrupts=interrupts,
                coordinator_pipe=sys.stdin.fileno() if attached else None,
                lock_fd=lock_fd,
            ),
            say,
        )
    )
    if ended is None:
        click.echo("interrupted: the crawl goes on in Redis; run the command again to rejoin it", err=True)
        sys.exit(130)
    node, report = ended
    click.echo(
        f"{node}: {report.outcome}: {report.pages} pages, {report.bytes} bytes in {report.elapsed:.1f} s "
        f"({report.pages_per_second:.1f} pages/s)"
    )
    if report.outcome == "interrupted":
        sys.exit(130)


@main.command()
@click.argument("command", type=click.Choice(["pause", "resume", "stop"]))
@click.argument("directory", type=click.Path(path_type=Path), required=False)
@click.option("--redis", "redis_url", metavar="URL", help="The Redis holding a distributed crawl (no DIRECTORY).")
@click.option("--name", help="The crawl (default: the directory's only crawl; with --redis, 'default').")
def control(command: str, directory: Path | None, redis_url: str | None, name: str | None) -> None:
    """Pause, resume or stop a running crawl: the one in DIRECTORY, or every node of a distributed one.

    Says which obeyed; exits 1 if one did not within a few seconds.
    """
    from .cluster.status import OBEY_WAIT
    from .cluster.status import OBEYED as DISTRIBUTED_OBEYED
    from .cluster.status import control as distributed_control

    if redis_url is not None:
        name = name or DEFAULT_NAME
        states = _run(distributed_control(redis_url, name, command))
        click.echo(f"crawl {name!r}: {command} sent" + ("" if states else "; no node is running"))
        for node, shown in states.items():
            done = shown in DISTRIBUTED_OBEYED[command]
            click.echo(f"  {node}  {shown if done else f'did not obey within {OBEY_WAIT:.0f} s ({shown})'}")
        if not all(state in DISTRIBUTED_OBEYED[command] for state in states.values()):
            sys.exit(1)
        return
    if directory is None:
        fail("give the crawl DIRECTORY, or --redis URL for a distributed crawl")
    command = "run" if command == "resume" else command
    try:
        crawl = _crawl_in(directory, name)
        if not DirectoryLock.held(directory):
            fail(f"crawl {crawl!r} in {directory} is not running")
        sent = time.time()
        send_command(directory, crawl, command)
        state = _wait_obeyed(directory, crawl, command, sent, OBEY_WAIT)
    except USAGE_ERRORS as exc:
        fail(str(exc))
    if state is None:
        click.echo(f"crawl {crawl!r} in {directory}: {command} sent; it did not obey within {OBEY_WAIT:.0f} s")
        sys.exit(1)
    click.echo(f"crawl {crawl!r} in {directory}: {state}")


def _wait_obeyed(directory: Path, name: str, command: str, since: float, wait: float) -> str | None:
    """The state the crawl in `directory` shows once it obeyed `command` (it publishes one every second), if
    within `wait` seconds."""
    deadline = time.monotonic() + wait
    conn = connect(directory / DB_NAME, readonly=True)
    try:
        crawl_id = crawl_id_of(conn, name)
        while (state := obeyed(conn, crawl_id, command, since)) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        return state
    finally:
        conn.close()


def _crawl_in(directory: Path, name: str | None) -> str:
    """The crawl's name in `directory`: `name`, or the directory's only crawl."""
    conn = connect(directory / DB_NAME, readonly=True)
    try:
        return crawl_name(conn, name)
    finally:
        conn.close()
