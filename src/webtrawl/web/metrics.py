"""The live state in the Prometheus text format (0.0.4): what `/metrics` serves.

Every name starts with `webtrawl_`. Counters (`_total`) count what the running crawl process did in this
run, so a restarted crawl shows as a counter reset, which Prometheus expects; gauges hold the whole
crawl's state (URLs by state, failures and drops by reason) and, for a distributed crawl, each node's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Sample = tuple[Mapping[str, str], float]


def render_metrics(state: Mapping[str, Any], failures: Mapping[str, int], drops: Mapping[str, int]) -> str:
    """`state` is a `LiveView` reading; `failures` and `drops` count URLs by reason."""
    out: list[str] = []

    def metric(name: str, kind: str, about: str, samples: Iterable[Sample]) -> None:
        out.append(f"# HELP webtrawl_{name} {about}")
        out.append(f"# TYPE webtrawl_{name} {kind}")
        out.extend(f"webtrawl_{name}{_labels(labels)} {_value(value)}" for labels, value in samples)

    def one(value: float) -> list[Sample]:
        return [({}, value)]

    counts = state["counts"]
    metric("crawl_running", "gauge", "1 while a crawl process runs (paused included), else 0.", one(state["live"]))
    metric("crawl_paused", "gauge", "1 while the crawl is paused.", one(state["state"] == "paused"))
    metric("elapsed_seconds", "gauge", "Seconds the current (or last) run has lasted.", one(state["elapsed"]))
    metric(
        "urls",
        "gauge",
        "URLs in the frontier by state (the whole crawl).",
        (({"state": name}, counts.get(name, 0)) for name in ("waiting", "running", "done", "failed")),
    )
    metric(
        "urls_waiting_by_depth",
        "gauge",
        "Waiting URLs by depth (embedded crawls).",
        (({"depth": depth}, n) for depth, n in counts.get("waiting_by_depth", {}).items()),
    )
    metric("pages_total", "counter", "Responses received in this run.", one(state["pages"]))
    metric("bytes_total", "counter", "Body bytes received in this run.", one(state["bytes"]))
    metric(
        "fetch_errors_total",
        "counter",
        "Fetches without a usable response, or 5xx/429, this run.",
        one(state["errors"]),
    )
    metric(
        "responses_total",
        "counter",
        "Responses by HTTP status in this run (embedded crawls).",
        (({"status": status}, n) for status, n in state["statuses"].items()),
    )
    metric("fetching", "gauge", "Fetches in flight.", one(state["fetching"]))
    metric("pages_per_second", "gauge", "Pages per second over the last seconds.", one(state["pages_per_second"]))
    metric("bytes_per_second", "gauge", "Body bytes per second over the last seconds.", one(state["bytes_per_second"]))
    metric("failed_urls", "gauge", "Failed URLs by reason (the whole crawl).", _by("reason", failures))
    metric("dropped_urls", "gauge", "URLs the scope or a budget dropped, by reason.", _by("reason", drops))
    render = state.get("render") or {}
    if render.get("rendered") or render.get("browser_restarts"):
        for name, key, kind, about in _RENDER_METRICS:
            metric(name, kind, about, one(render.get(key, 0)))
    nodes = state["nodes"]
    if nodes:
        for name, key, kind, about in _NODE_METRICS:
            metric(name, kind, about, (({"node": node["id"]}, node[key]) for node in nodes))
        metric(
            "node_up",
            "gauge",
            "1 if the node's heartbeat is recent and it has not left, else 0.",
            (
                ({"node": node["id"], "host": node["host"]}, node["state"] in ("running", "paused", "stopping"))
                for node in nodes
            ),
        )
    return "\n".join(out) + "\n"


_RENDER_METRICS = (
    ("rendered_pages_total", "rendered", "counter", "Pages rendered in the browser in this run."),
    ("render_seconds_total", "render_seconds", "counter", "Seconds spent rendering pages in this run."),
    ("subresources_total", "subresources", "counter", "Requests of rendered pages fetched and archived this run."),
    ("render_timeouts_total", "render_timeouts", "counter", "Rendered pages a step of which ran out of time."),
    ("browser_restarts_total", "browser_restarts", "counter", "Browsers started again after a crash this run."),
)

_NODE_METRICS = (
    ("node_pages_total", "pages", "counter", "Responses a node received in its run."),
    ("node_bytes_total", "bytes", "counter", "Body bytes a node received in its run."),
    ("node_fetch_errors_total", "errors", "counter", "Fetch errors of a node in its run."),
    ("node_pages_per_second", "pages_per_second", "gauge", "A node's pages per second at its last heartbeat."),
    ("node_in_flight", "in_flight", "gauge", "A node's fetches in flight at its last heartbeat."),
    ("node_partitions", "partitions", "gauge", "Partitions a node holds leases on."),
    ("node_heartbeat_age_seconds", "heartbeat_age", "gauge", "Seconds since a node's last heartbeat."),
)


def _by(label: str, counts: Mapping[str, int]) -> Iterable[Sample]:
    return (({label: str(key)}, n) for key, n in counts.items())


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{_escape(str(value))}"' for name, value in labels.items()) + "}"


def _escape(value: str) -> str:
    """Label values escape backslash, double quote and newline, as the text format requires."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: float | bool | None) -> str:
    if value is None:
        return "NaN"
    if isinstance(value, bool) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))
