"""Real redis-server processes for tests: each on free loopback ports, in its own temp dir, stopped by itself.

Tests talk only to servers they start, so a crash (`kill`), a restart from the same data dir and a real
Cluster are all what production would see; nothing depends on a Redis already running on the machine.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

import redis
import redis.cluster
from redis.backoff import NoBackoff
from redis.retry import Retry

INSTALL_HINT = "redis-server is not on PATH: install the Debian package redis-server (apt-get install redis-server)"
START_TIMEOUT = 10.0
CLUSTER_TIMEOUT = 30.0

_running: set[RedisServer] = set()


def free_port() -> int:
    """A port nobody listens on right now; a race with another process is caught by `RedisServer.start`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _probe(port: int) -> redis.Redis:
    """A client that fails at once instead of retrying, so polling loops own the timing."""
    return redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))


def blocking_client(url: str) -> redis.Redis | redis.cluster.RedisCluster:
    """A blocking client for the server at `url`: a Cluster client if that server is part of a Cluster."""
    with redis.Redis.from_url(url) as probe:
        clustered = probe.info("cluster").get("cluster_enabled") == 1
    return redis.cluster.RedisCluster.from_url(url) if clustered else redis.Redis.from_url(url)


class RedisServer:
    """One redis-server; AOF (`appendfsync everysec`) on by default so `kill` + `restart` keeps the data."""

    def __init__(
        self,
        *,
        appendonly: bool = True,
        maxmemory_policy: str = "noeviction",
        save: str = "",
        cluster: bool = False,
    ) -> None:
        self.appendonly = appendonly
        self.maxmemory_policy = maxmemory_policy
        self.save = save
        self.cluster = cluster
        self.port = 0
        self.bus_port = 0
        self.dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        assert self.dir is not None, "server never started"
        return self.dir / "redis.log"

    def start(self) -> Self:
        """Start on fresh ports; another process grabbing a port between pick and bind just means new ports."""
        if shutil.which("redis-server") is None:
            raise RuntimeError(INSTALL_HINT)
        assert self._proc is None, "already running"
        self.dir = Path(tempfile.mkdtemp(prefix="webtrawl-redis-"))
        for _ in range(3):
            self.port = free_port()
            self.bus_port = free_port() if self.cluster else 0
            if self._launch():
                return self
            if "Address already in use" not in self.log_tail():
                break
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"redis-server on port {self.port} did not start:\n{tail}")

    def restart(self) -> Self:
        """Start again on the same port and data dir, as a crashed Redis comes back and reloads its AOF."""
        assert self.dir is not None, "restart() needs a server that was started"
        self._terminate(signal.SIGKILL)
        if not self._launch():
            raise RuntimeError(f"redis-server on port {self.port} did not restart:\n{self.log_tail()}")
        return self

    def shut_down(self) -> None:
        """SIGTERM, as an administrator's restart: Redis writes out its AOF and exits; `restart` brings it back."""
        self._terminate(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed beyond what Redis already wrote."""
        self._terminate(signal.SIGKILL)

    def stop(self) -> None:
        """Shut down and delete the data dir; safe to call twice."""
        self._terminate(signal.SIGTERM)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _args(self) -> list[str]:
        assert self.dir is not None
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)]
        args += ["--appendonly", "yes" if self.appendonly else "no", "--appendfsync", "everysec"]
        args += ["--save", self.save, "--maxmemory-policy", self.maxmemory_policy, "--daemonize", "no"]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-port", str(self.bus_port)]
            args += ["--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"]
        return args

    def _launch(self) -> bool:
        """Run the server and wait until it answers PING; False (process reaped) if it does not."""
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(self._args(), cwd=self.dir, stdout=log, stderr=subprocess.STDOUT)
        _running.add(self)
        deadline = time.monotonic() + START_TIMEOUT
        with _probe(self.port) as client:
            while time.monotonic() < deadline and self._proc.poll() is None:
                with contextlib.suppress(redis.RedisError):
                    if client.ping():
                        return True
                time.sleep(0.02)
        self._terminate(signal.SIGKILL)
        return False

    def _terminate(self, sig: signal.Signals) -> None:
        proc, self._proc = self._proc, None
        _running.discard(self)
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisCluster:
    """A Redis Cluster of `masters` masters and no replicas, created by `redis-cli --cluster create`."""

    def __init__(self, masters: int = 3, *, appendonly: bool = True) -> None:
        self.nodes = [RedisServer(cluster=True, appendonly=appendonly) for _ in range(masters)]

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self) -> Self:
        try:
            for node in self.nodes:
                node.start()
            self._create()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def _create(self) -> None:
        """Assign the slots, then wait until every node agrees the cluster is ok (gossip takes a moment)."""
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        done = subprocess.run(
            ["redis-cli", "--cluster", "create", *addresses, "--cluster-yes"],
            capture_output=True,
            timeout=CLUSTER_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout.decode()}{done.stderr.decode()}")
        deadline = time.monotonic() + CLUSTER_TIMEOUT
        pending = list(self.nodes)
        while pending:
            with _probe(pending[0].port) as client:
                if client.execute_command("CLUSTER INFO").get("cluster_state") == "ok":
                    pending.pop(0)
                    continue
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster on {addresses} never reached cluster_state:ok")
            time.sleep(0.05)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    """Servers a test forgot (or an interrupted run left) must not outlive the test process."""
    for server in list(_running):
        server.stop()
