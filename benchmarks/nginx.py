"""Serve a directory with a private nginx on a free loopback port, for as long as a `with` block runs.

nginx (not a Python server) so that the server costs next to nothing and the figures measure the
crawler: one worker, sendfile, no access log (unless asked for), keep-alive connections that are never
closed mid-crawl. Everything it writes (config, pid, logs, temp dirs) lives in its own prefix directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType

CONFIG = """\
daemon off;
master_process on;
worker_processes 1;
{user}pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    types {{ text/html html; text/plain txt; application/json json; text/css css; }}
    default_type application/octet-stream;
    log_format bench '$status $bytes_sent $request_length $request_method $request_uri '
                     '$http_if_none_match $http_if_modified_since';
    {access_log}
    log_not_found off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 120s;
    keepalive_requests 100000;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        server_name localhost;
        root {root};
        index index.html;
    }}
}}
"""


ACCESS_FIELDS = ("status", "bytes_sent", "request_length", "method", "uri", "if_none_match", "if_modified_since")
"""The fields of an access-log line, space-separated, `-` when empty; the last one holds spaces (an HTTP
date), so split a line with `line.split(" ", len(ACCESS_FIELDS) - 1)`."""


class NginxError(RuntimeError):
    """nginx could not be installed or started; the message says what to do."""


def find_nginx() -> str | None:
    # /usr/sbin is not on every user's PATH.
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def ensure_nginx() -> str:
    """The nginx binary, installed with apt-get if missing (refreshing the index only if that fails)."""
    if found := find_nginx():
        return found
    if not shutil.which("apt-get"):
        raise NginxError("nginx is not installed and apt-get is not available: install nginx and retry")
    print("nginx not found: installing it with apt-get …", flush=True)
    attempts = (["install", "-y", "nginx-light"], ["update"], ["install", "-y", "nginx-light"])
    for args in (*attempts, ["install", "-y", "nginx"]):
        done = subprocess.run(["apt-get", "-q", *args], capture_output=True, text=True, check=False)
        if done.returncode == 0 and args[0] == "install" and (found := find_nginx()):
            return found
    raise NginxError(f"could not install nginx with apt-get:\n{done.stderr.strip()[-2000:]}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Nginx:
    """A running nginx serving `root`; use as a context manager so it is stopped on any exit."""

    def __init__(self, root: Path, prefix: Path, port: int | None = None, *, access_log: bool = False) -> None:
        self.root = root.resolve()
        self.prefix = prefix.resolve()
        self.port = port or free_port()
        self.access_log = self.prefix / "access.log" if access_log else None
        """With `access_log`: one line per request, written as it ends, in the `bench` format (see
        `ACCESS_FIELDS`); off by default, as logging costs nginx time the figures should not include."""
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 10.0) -> None:
        binary = ensure_nginx()
        for temp in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.prefix / "tmp" / temp).mkdir(parents=True, exist_ok=True)
        # Run as root, nginx would hand requests to a `nobody` worker that may not read the site.
        user = "user root;\n" if os.geteuid() == 0 else ""
        config = self.prefix / "nginx.conf"
        logging = f"access_log {self.access_log} bench;" if self.access_log else "access_log off;"
        config.write_text(
            CONFIG.format(user=user, prefix=self.prefix, port=self.port, root=self.root, access_log=logging)
        )
        command = [binary, "-p", str(self.prefix), "-c", str(config), "-e", str(self.prefix / "error.log")]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise NginxError(f"nginx exited with {self.process.returncode}:\n{self.error_log()}")
            try:
                with urllib.request.urlopen(self.url + "robots.txt", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise NginxError(f"nginx did not answer on {self.url} within {timeout:.0f} s:\n{self.error_log()}")

    def stop(self) -> None:
        """Fast shutdown (SIGTERM), then SIGKILL if it lingers; safe to call twice."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def error_log(self) -> str:
        log = self.prefix / "error.log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else "(no error log)"

    def __enter__(self) -> Nginx:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
