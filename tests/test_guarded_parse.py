"""Parsing bounded in time: pathological markup is parsed in a child process and given up when too slow."""

from __future__ import annotations

import pytest

from webtrawl.parse.guarded import GuardedParser, ParseTimeout

URL = "http://example.org/"


async def test_ordinary_pages_parse_in_process() -> None:
    parser = GuardedParser()
    page = await parser.parse('<title>t</title><a href="/x">x</a>', URL, requisites=False, follow_nofollow=False)
    assert page.title == "t" and [link.url for link in page.links] == ["http://example.org/x"]
    assert parser._pool is None
    parser.close()


async def test_many_tags_parse_in_a_child_with_the_same_result() -> None:
    parser = GuardedParser(max_inline_tags=100)
    html = "<title>many</title>" + "".join(f'<p><a href="/p{i}">{i}</a></p>' for i in range(300))
    try:
        page = await parser.parse(html, URL, requisites=False, follow_nofollow=False)
    finally:
        parser.close()
    assert page.title == "many" and len(page.links) == 300


async def test_a_page_too_slow_to_parse_is_given_up_and_the_parser_recovers() -> None:
    # The limit covers starting the child (about 0.5 s here); the nested page takes about 10 s of lexbor
    # time (it grows faster than linearly with nesting).
    parser = GuardedParser(timeout=2.0)
    nested = "<div>" * 60_000
    with pytest.raises(ParseTimeout, match="too complex"):
        await parser.parse(nested, URL, requisites=False, follow_nofollow=False)
    page = await parser.parse("<div>" * 6000 + "<title>ok</title>", URL, requisites=False, follow_nofollow=False)
    assert page.title == "ok"
    parser.close()
