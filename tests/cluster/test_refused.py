"""A Redis that answers but refuses what a command needs (a user without the permission, as ACLs make them):
the user's set-up, not a bug, so one line (exit 2) that says what Redis refused, with the password masked."""

from __future__ import annotations

from pathlib import Path

import redis

from tests.redis_servers import RedisServer
from tests.test_cli import one_line_error, webtrawl

PASSWORD = "s3cret-pass"


def reader_url(server: RedisServer) -> str:
    """A user that may read (and check the server's settings) but not write."""
    with redis.Redis.from_url(server.url) as admin:
        admin.acl_setuser(
            "reader",
            enabled=True,
            passwords=[f"+{PASSWORD}"],
            keys=["*"],
            commands=["+@read", "+@connection", "+info", "+config|get", "+time"],
        )
    return f"redis://reader:{PASSWORD}@127.0.0.1:{server.port}/0"


async def test_a_crawl_on_a_redis_that_refuses_writes_is_one_line(redis_server: RedisServer, tmp_path: Path) -> None:
    url = reader_url(redis_server)
    code, _out, err = await webtrawl("crawl", "http://127.0.0.1:9/", "--redis", url, "--out", str(tmp_path), "-q")
    assert code == 2
    one_line_error(err, "Redis refused a command", "no permissions to run the 'set' command")
    assert PASSWORD not in err


async def test_control_names_the_redis_without_its_password(redis_server: RedisServer) -> None:
    code, _out, err = await webtrawl("control", "stop", "--redis", reader_url(redis_server), "--name", "absent")
    assert code == 2
    one_line_error(err, "no crawl named 'absent'", f"reader:***@127.0.0.1:{redis_server.port}")
    assert PASSWORD not in err
