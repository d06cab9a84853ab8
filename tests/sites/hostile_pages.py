"""What the hostile site (`hostile.py`) answers: pages in legacy charsets, malformed HTML, decompression bombs,
raw HTTP scripts, and the handlers of the main host and the robots.txt hosts.

The bodies are plain values and pure functions, so a test can compute what the crawl must have stored (the
exact title of a GBK page, the bytes of a bomb) from the same source the server sends.
"""

from __future__ import annotations

import email.utils
import hashlib
import random
import time
import zlib
from collections.abc import Awaitable, Callable
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import brotli
from aiohttp import web
from isal import isal_zlib

if TYPE_CHECKING:
    from .hostile import HostileSite

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

NORMAL = 15
KEEPALIVE = 4
FLAKY = 20
STORM = 20
SESSION_PAGES = 3
CHAIN = 20
MANY_LINKS = 100_000
BIG_PAGE = 50_000_000
LONG = 100_000
ROBOTS = ("html", "huge", "loop", "500")
BOMBS = ("gzip", "deflate", "br")
ROBOTS_HUGE = 600_000
"""Bytes of the huge robots.txt; its last rule lies beyond the 500 KiB that count."""


def page(title: str, *links: str, body: str = "", head: str = "") -> bytes:
    """A small UTF-8 HTML page with a title, some links and optional extra markup."""
    anchors = "".join(f'<a href="{escape(href)}">{escape(href)}</a>\n' for href in links)
    return (
        f"<!doctype html><html><head><title>{escape(title)}</title>{head}</head>"
        f"<body><h1>{escape(title)}</h1>{body}{anchors}</body></html>"
    ).encode()


# -- charsets ---------------------------------------------------------------------------------------


class Encoded(NamedTuple):
    """A page in some charset: its Content-Type header, its bytes, and the title a reader sees."""

    content_type: str
    body: bytes
    title: str


def _legacy(title: str, encoding: str, *, meta: str = "", filler: str = "") -> bytes:
    text = f"<html><head>{meta}<title>{title}</title></head><body><p>{title}</p><p>{filler}</p></body></html>"
    return text.encode(encoding)


_WESTERN = "Crème brûlée à la française, déjà vu, été, naïve señor – “quoted” 5 €"

CHARSETS: dict[str, Encoded] = {
    # The charset named only in the header.
    "gbk": Encoded("text/html; charset=GBK", _legacy("中文网页：编码测试", "gbk"), "中文网页：编码测试"),
    # Named only in <meta charset>.
    "big5": Encoded("text/html", _legacy("繁體中文網頁標題", "big5", meta='<meta charset="big5">'), "繁體中文網頁標題"),
    # Named only in <meta http-equiv=Content-Type>.
    "shift_jis": Encoded(
        "text/html",
        _legacy(
            "日本語のページタイトル",
            "shift_jis",
            meta='<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">',
        ),
        "日本語のページタイトル",
    ),
    # Labelled latin-1, which the web reads as windows-1252 (so 0x80 is €, 0x93/0x94 are curly quotes).
    "windows-1252": Encoded("text/html; charset=ISO-8859-1", _legacy(_WESTERN, "cp1252"), _WESTERN),
    # A byte-order mark and no label at all.
    "utf-16-bom": Encoded(
        "text/html", b"\xff\xfe" + _legacy("Ünïcödé ✓ 标题 UTF-16", "utf-16-le"), "Ünïcödé ✓ 标题 UTF-16"
    ),
    # A big-endian byte-order mark beats the header's label.
    "utf-16be-bom-wrong-label": Encoded(
        "text/html; charset=iso-8859-1", b"\xfe\xff" + _legacy("Größe ✓ BE", "utf-16-be"), "Größe ✓ BE"
    ),
    # Declared UTF-8, actually windows-1252: decoding as UTF-8 replaces every accented letter.
    "wrong-declared": Encoded("text/html; charset=utf-8", _legacy(_WESTERN, "cp1252", filler=_WESTERN * 3), _WESTERN),
    # A label that names no encoding is ignored: the <meta> decides.
    "bogus-label": Encoded(
        "text/html; charset=x-no-such-charset",
        _legacy("Ελληνικά κείμενα", "iso8859-7", meta='<meta charset="iso-8859-7">'),
        "Ελληνικά κείμενα",
    ),
    # No charset anywhere: UTF-8.
    "none": Encoded("text/html", _legacy("Überschrift ohne Angabe – ✓", "utf-8"), "Überschrift ohne Angabe – ✓"),
    # No charset anywhere, legacy bytes: UTF-8 evidently fails, windows-1252 is the fallback.
    "none-legacy": Encoded("text/html", _legacy(_WESTERN, "cp1252", filler=_WESTERN * 3), _WESTERN),
}


# -- malformed HTML ---------------------------------------------------------------------------------


def junk(size: int, seed: int = 7) -> bytes:
    """Random bytes (NULs, controls, high bytes) without '<', so no accidental tag or comment can open."""
    rng = random.Random(seed)
    return bytes(b for b in rng.randbytes(size * 2) if b != 0x3C)[:size]


MALFORMED: dict[str, bytes] = {
    # Nothing is ever closed; links sit inside unclosed inline, block and table elements.
    "unclosed": (
        b"<html><head><title>Unclosed tags</title><body><div><p><b><i><a href=/malformed/target-1>one"
        b"<a href=/malformed/target-2>two<table><tr><td><ul><li><a href='/malformed/target-3'>three<li><div"
    ),
    # Binary junk in the middle of the page: the link after it still counts.
    "binary": (
        b"<html><head><title>Binary junk</title></head><body><p>before</p>"
        + junk(20_000)
        + b'<a href="/malformed/after-junk">after</a></body></html>'
    ),
    # <base> on another host: relative links leave the site (and the scope).
    "base-away": (
        b'<html><head><base href="http://elsewhere.invalid/dir/"><title>Base away</title></head>'
        b'<body><a href="x.html">relative</a><a href="/normal/6">root-relative, on the base host too</a></body></html>'
    ),
    # <base> after a link still governs it (the first <base> counts for the whole document).
    "base-late": (
        b'<html><head><title>Base late</title></head><body><a href="p1">p1</a>'
        b'<base href="/based/"><base href="/ignored/"></body></html>'
    ),
    # Framesets that nest and loop back on themselves.
    "frames": (
        b"<html><head><title>Frames</title></head><frameset cols='50%,50%'>"
        b"<frame src='/frames/left'><frameset rows='*,*'><frame src='/frames/right'>"
        b"<frame src='/malformed/frames'></frameset></frameset></html>"
    ),
    # Two titles and an SVG title before them: the first document title wins.
    "titles": (
        b"<html><head></head><body><svg><title>icon</title></svg><title>First title</title>"
        b"<title>Second title</title></body></html>"
    ),
    # An empty 200 and a PNG that claims to be HTML: stored, nothing parsed, nothing breaks.
    "empty": b"",
    "png-as-html": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8,
}

FRAMES: dict[str, bytes] = {
    "left": b"<frameset><frame src='/frames/inner'><frame src='/malformed/frames'></frameset>",
    "right": b"<title>Right</title><iframe src='/frames/inner'></iframe><iframe src='/frames/deep'></iframe>",
    "inner": b"<title>Inner</title><frameset><frame src='/frames/left'></frameset>",
    "deep": b"<title>Deep frame</title>",
}


# -- decompression bombs ----------------------------------------------------------------------------

BOMB_HEAD = b"<!doctype html><html><head><title>bomb</title></head><body>"
_BLOCK = 1 << 20
_FILLER = b" " * _BLOCK


def build_bomb(path: Path, coding: str, inflated_mib: int) -> int:
    """Write a `coding` ("gzip", "deflate" or "br") stream of an HTML page of `inflated_mib` MiB; return its size.

    Built in milliseconds, not by compressing gigabytes: after a full flush a compressor's output for the
    same input block is the same bytes again, so one compressed block of spaces is written many times and
    the stream is closed with the trailer its checksums call for (gzip: CRC-32 and length, zlib: Adler-32;
    brotli has none). The stream is valid: it inflates to exactly BOMB_HEAD plus `inflated_mib` MiB of spaces.
    """
    if coding == "br":
        return _build_brotli(path, inflated_mib)
    gzip = coding == "gzip"
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31 if gzip else 15)
    head = compressor.compress(BOMB_HEAD) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(_FILLER) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert compressor.compress(_FILLER) + compressor.flush(zlib.Z_FULL_FLUSH) == block
    final = compressor.flush(zlib.Z_FINISH)[: -8 if gzip else -4]  # the last (empty) block, without trailer
    crc, adler = isal_zlib.crc32(BOMB_HEAD), isal_zlib.adler32(BOMB_HEAD)
    for _ in range(inflated_mib):
        crc, adler = isal_zlib.crc32(_FILLER, crc), isal_zlib.adler32(_FILLER, adler)
    size = len(BOMB_HEAD) + inflated_mib * _BLOCK
    trailer = crc.to_bytes(4, "little") + (size % 2**32).to_bytes(4, "little") if gzip else adler.to_bytes(4, "big")
    with path.open("wb") as out:
        out.write(head)
        for _ in range(inflated_mib):
            out.write(block)
        out.write(final + trailer)
    return path.stat().st_size


def _build_brotli(path: Path, inflated_mib: int) -> int:
    compressor = brotli.Compressor(quality=1, lgwin=24)
    head = compressor.process(BOMB_HEAD) + compressor.flush()
    # The encoder settles after a few blocks (its window fills); from then on each block is the same bytes.
    settling = [compressor.process(_FILLER) + compressor.flush() for _ in range(4)]
    block = compressor.process(_FILLER) + compressor.flush()
    assert block == settling[-1]
    with path.open("wb") as out:
        out.write(head)
        for piece in settling:
            out.write(piece)
        for _ in range(inflated_mib - len(settling)):
            out.write(block)
        out.write(compressor.finish())
    return path.stat().st_size


# -- raw HTTP scripts -------------------------------------------------------------------------------

HOLD = "hold"
"""Send nothing more; keep the connection open until the client gives up."""
RESET = "reset"
"""Abort the connection with a TCP RST."""
CLOSE = "close"
"""Close the connection with a FIN."""
TRICKLE = "trickle"
"""Send the body one byte every half second, forever (faster than any read timeout, so only a deadline ends it)."""

Step = bytes | float | str
_HTML = "Content-Type: text/html\r\n"
BODY_1000 = (b"<html><head><title>Cut short</title></head><body>" + b"<p>0123456789</p>" * 60)[:1000]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


RAW_SCRIPTS: dict[str, list[Step]] = {
    "/robots.txt": [b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"],
    "/stall-before-headers": [HOLD],
    "/stall-after-headers": [f"HTTP/1.1 200 OK\r\n{_HTML}Content-Length: 1000\r\n\r\n".encode(), HOLD],
    "/reset-mid-body": [f"HTTP/1.1 200 OK\r\n{_HTML}Content-Length: 5000\r\n\r\n".encode(), BODY_1000, 0.05, RESET],
    # Content-Length promises more than comes (the connection closes early) or less than comes.
    "/short-body": [f"HTTP/1.1 200 OK\r\n{_HTML}Content-Length: 5000\r\n\r\n".encode(), BODY_1000, CLOSE],
    "/long-body": [
        f"HTTP/1.1 200 OK\r\n{_HTML}Content-Length: 40\r\n\r\n".encode()
        + b"<title>Long body</title><p>0123456789ab"
        + b"<p>beyond the declared length</p>" * 20,
        0.2,
        CLOSE,
    ],
    "/broken-chunked": [
        f"HTTP/1.1 200 OK\r\n{_HTML}Transfer-Encoding: chunked\r\n\r\n".encode()
        + _chunk(b"<title>Bad chunks</title>")
        + b"zz\r\nnot a chunk size\r\n0\r\n\r\n",
        CLOSE,
    ],
    "/unterminated-chunked": [
        f"HTTP/1.1 200 OK\r\n{_HTML}Transfer-Encoding: chunked\r\n\r\n".encode()
        + _chunk(b"<title>No last chunk</title>"),
        0.05,
        CLOSE,
    ],
    "/garbage-status": [b"HELLO WORLD\r\n\r\n", CLOSE],
    "/binary-response": [junk(300, seed=3), CLOSE],
    "/empty-reply": [CLOSE],
    "/huge-header": [
        b"HTTP/1.1 200 OK\r\nX-Junk: " + b"j" * 40_000 + f"\r\n{_HTML}Content-Length: 2\r\n\r\nok".encode(),
        CLOSE,
    ],
    # HTTP/1.0 without a length: the body ends when the connection does.
    "/http10": [
        f"HTTP/1.0 200 OK\r\n{_HTML}\r\n".encode()
        + b"<title>HTTP/1.0 page</title><a href='/http10-child'>child</a>"
        + b"<p>until the connection closes</p>" * 50,
        CLOSE,
    ],
    "/http10-child": [f"HTTP/1.0 200 OK\r\n{_HTML}\r\n<title>HTTP/1.0 child</title>".encode(), CLOSE],
    "/slowloris": [f"HTTP/1.1 200 OK\r\n{_HTML}Content-Length: 100000\r\n\r\n".encode(), TRICKLE],
}
SHARED_RAW = tuple(path for path in RAW_SCRIPTS if path not in ("/robots.txt", "/http10-child", "/slowloris"))
"""Raw cases a crawl can take in seconds (the slowloris only ends at a deadline)."""


# -- what the main host answers ---------------------------------------------------------------------

WEIRD_HREFS = (
    "/weird/sp ace",
    "/weird/ünï",
    "\\weird\\back\\slash",
    "/weird/pct%zz%%",
    "http://user:pw@{host}/weird/userinfo",
    "http://bücher.invalid/",
    "/weird/tab\tnew\nline",
    "//{host}/weird/protocol-relative",
    "  /weird/padded  ",
    "HTTP://{host}/weird/UPPER",
    "/weird/%7Etilde",
    "/weird/~tilde",
    "/weird/" + "x" * LONG,
    "http://[oops/",
    "javascript:alert(1)",
    "mailto:someone@example.invalid",
)


def http_date(offset: float) -> str:
    return email.utils.formatdate(time.time() + offset, usegmt=True)


def session_id(n: int) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()[:16]


def query_start() -> str:
    return "/query?" + "&".join(f"p{k}={k}" for k in range(1, 9))


def _html(body: bytes) -> web.Response:
    return web.Response(body=body, headers={"Content-Type": "text/html"})


def _redirect(location: str, status: int = 302) -> web.Response:
    return web.Response(status=status, headers={"Location": location})


def main_routes(site: HostileSite) -> Handler:
    """The handler of the main host: every aiohttp-made case, dispatched on the path."""

    async def index(request: web.Request) -> web.StreamResponse:
        raw = [site.raw + path for path in SHARED_RAW]
        return _html(
            page(
                "Hostile index",
                "/normal/0",
                "/no-head",
                *(f"/charset/{name}" for name in CHARSETS),
                *(f"/malformed/{name}" for name in MALFORMED),
                *("/redirect/loop-a", "/redirect/self", "/redirect/chain/1", "/redirect/away"),
                *("/redirect/garbage", "/redirect/long", "/refresh/a"),
                *("/calendar/2024/01", f"/session/0?sid={session_id(0)}", "/deeper/", query_start()),
                *("/rate/429", "/rate/503-date", "/rate/503-always", "/rate/429-forever"),
                *(f"/storm/{n}" for n in range(STORM)),
                "/weird",
                *raw,
                *(f"{site.keepalive}/ka/{n}" for n in range(KEEPALIVE)),
                f"{site.flaky}/f/0",
                *(f"{origin}/" for origin in site.robots.values()),
                f"{site.mute}/",
                "http://elsewhere.invalid/",
            )
        )

    async def robots(request: web.Request) -> web.StreamResponse:
        return web.Response(text="User-agent: *\nAllow: /\n")

    async def indexes(request: web.Request) -> web.StreamResponse:
        links = {
            "/timeouts": (f"{site.raw}/slowloris", f"{site.unconnectable}/never-connects"),
            "/big": ("/big/page", "/big/many-links"),
            "/bombs": tuple(f"/bomb/{coding}" for coding in BOMBS),
        }[request.path]
        return _html(page(f"Index {request.path}", *links, "/normal/0"))

    async def normal(request: web.Request) -> web.StreamResponse:
        n = int(request.path.rsplit("/", 1)[1])
        children = [f"/normal/{k}" for k in (2 * n + 1, 2 * n + 2) if k < NORMAL]
        return _html(page(f"Normal {n}", *children, body=f"<p>Normal page number {n}.</p>"))

    async def no_head(request: web.Request) -> web.StreamResponse:
        if request.method == "HEAD":
            return web.Response(status=405, headers={"Allow": "GET"})
        return _html(page("GET only"))

    async def charset(request: web.Request) -> web.StreamResponse:
        encoded = CHARSETS[request.path.rsplit("/", 1)[1]]
        return web.Response(body=encoded.body, headers={"Content-Type": encoded.content_type})

    async def malformed(request: web.Request) -> web.StreamResponse:
        name = request.path.rsplit("/", 1)[1]
        if name in MALFORMED:
            return _html(MALFORMED[name])
        return _html(page(f"Malformed {name}"))

    async def frames(request: web.Request) -> web.StreamResponse:
        return _html(FRAMES[request.path.rsplit("/", 1)[1]])

    async def redirect(request: web.Request) -> web.StreamResponse:
        name = request.path.removeprefix("/redirect/")
        if name.startswith("chain/"):
            n = int(name[6:])
            return _redirect(f"/redirect/chain/{n + 1}" if n < CHAIN else "/redirect/chain-end")
        targets = {
            "loop-a": "/redirect/loop-b",
            "loop-b": "/redirect/loop-a",
            "self": "/redirect/self",
            "away": "http://elsewhere.invalid/landing",
            "garbage": "http://[oops/",
            "long": "/weird/" + "y" * LONG,
        }
        if name in targets:
            return _redirect(targets[name], 301 if name == "self" else 302)
        return _html(page(f"Redirect {name}"))

    async def refresh(request: web.Request) -> web.StreamResponse:
        other = "/refresh/b" if request.path == "/refresh/a" else "/refresh/a"
        return _html(page(f"Refresh {request.path}", head=f'<meta http-equiv="refresh" content="0; URL=\'{other}\'">'))

    async def calendar(request: web.Request) -> web.StreamResponse:
        year, month = map(int, request.path.split("/")[2:4])
        index = year * 12 + month - 1
        prev, nxt = divmod(index - 1, 12), divmod(index + 1, 12)
        links = [f"/calendar/{y}/{m + 1:02d}" for y, m in (prev, nxt)]
        return _html(page(f"Calendar {year}-{month:02d}", *links))

    async def session(request: web.Request) -> web.StreamResponse:
        # Every answer hands out fresh session ids, in the query and as a ;jsessionid path parameter.
        fresh = session_id(site.count("session"))
        links = [f"/session/{k}?sid={fresh}" for k in range(SESSION_PAGES)]
        links += [f"/session/{k};jsessionid={fresh}" for k in range(SESSION_PAGES)]
        return _html(page(f"Session {request.path.rsplit('/', 1)[1].split(';')[0]}", *links))

    async def deeper(request: web.Request) -> web.StreamResponse:
        return _html(page("Deeper", "a/b/"))

    async def query(request: web.Request) -> web.StreamResponse:
        qs = request.query_string
        k = qs.count("&") + 2
        return _html(page(f"Query {k - 1}", f"/query?{qs}&p{k}={k}", f"/query?{qs}&q{k}={k}"))

    async def rate(request: web.Request) -> web.StreamResponse:
        name = request.path.removeprefix("/rate/")
        first = site.count(request.path) == 1
        if name == "429" and first:
            return web.Response(status=429, headers={"Retry-After": "1"})
        if name == "503-date" and first:
            return web.Response(status=503, headers={"Retry-After": http_date(2)})
        if name == "503-always":
            return web.Response(status=503, headers={"Retry-After": "1"})
        if name == "429-forever":
            return web.Response(status=429, headers={"Retry-After": "9999999"})
        return _html(page(f"Rate {name}"))

    async def storm(request: web.Request) -> web.StreamResponse:
        return web.Response(status=500, text="storm")

    async def weird(request: web.Request) -> web.StreamResponse:
        if request.path == "/weird":
            host = site.main.removeprefix("http://")
            anchors = "".join(f'<a href="{escape(href.format(host=host))}">w</a>' for href in WEIRD_HREFS)
            return _html(f"<html><head><title>Weird links</title></head><body>{anchors}</body></html>".encode())
        return _html(page("Weird target"))

    async def big_page(request: web.Request) -> web.StreamResponse:
        head = page("Fifty megabytes", "/normal/0").removesuffix(b"</body></html>")
        tail = b'<a href="/big/after-the-cut">too late</a></body></html>'
        unit = b"<p>" + b"lorem ipsum dolor sit amet " * 36 + b"</p>\n"
        chunk = unit * 256
        count, rest = divmod(BIG_PAGE - len(head) - len(tail), len(chunk))
        response = web.StreamResponse(headers={"Content-Type": "text/html", "Content-Length": str(BIG_PAGE)})
        await response.prepare(request)
        try:
            await response.write(head)
            for _ in range(count):
                await response.write(chunk)
            await response.write(b" " * rest + tail)
        except ConnectionError:  # the crawler stops reading at its size limit
            pass
        return response

    async def big(request: web.Request) -> web.StreamResponse:
        if request.path == "/big/many-links":
            return _html(site.many_links())
        return _html(page(f"Big {request.path}"))

    async def bomb(request: web.Request) -> web.StreamResponse:
        coding = request.path.rsplit("/", 1)[1]
        assert site.bombs is not None, "bombs are served only when built"
        path = site.bombs / f"bomb.{coding}"
        headers = {"Content-Type": "text/html", "Content-Encoding": coding, "Content-Length": str(path.stat().st_size)}
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        try:
            with path.open("rb") as stream:
                while chunk := stream.read(1 << 20):
                    await response.write(chunk)
        except ConnectionError:
            pass
        return response

    exact: dict[str, Handler] = {
        "/": index,
        "/robots.txt": robots,
        "/timeouts": indexes,
        "/big": indexes,
        "/bombs": indexes,
        "/no-head": no_head,
        "/deeper/": deeper,
        "/query": query,
        "/weird": weird,
        "/big/page": big_page,
        "/refresh/a": refresh,
        "/refresh/b": refresh,
    }
    prefixes: list[tuple[str, Handler]] = [
        ("/normal/", normal),
        ("/charset/", charset),
        ("/malformed/", malformed),
        ("/frames/", frames),
        ("/based/", malformed),
        ("/redirect/", redirect),
        ("/calendar/", calendar),
        ("/session/", session),
        ("/deeper/", deeper),
        ("/rate/", rate),
        ("/storm/", storm),
        ("/weird/", weird),
        ("/big/", big),
        ("/bomb/", bomb),
    ]

    async def dispatch(request: web.Request) -> web.StreamResponse:
        site.record(site.main, request.method, request.raw_path, dict(request.headers))
        path = request.path
        handler = exact.get(path) or next((h for prefix, h in prefixes if path.startswith(prefix)), None)
        if handler is None:
            return web.Response(status=404, text="not found")
        return await handler(request)

    return dispatch


def robots_handler(site: HostileSite, name: str) -> Handler:
    """The handler of the host whose robots.txt misbehaves as `name` says."""
    padding = b"# " + b"padding " * 100 + b"\n"
    huge = b"User-agent: *\nDisallow: /private\n" + padding * (ROBOTS_HUGE // len(padding)) + b"Disallow: /secret\n"

    async def handle(request: web.Request) -> web.StreamResponse:
        origin = site.robots[name]
        site.record(origin, request.method, request.raw_path, dict(request.headers))
        path = request.path
        if path in ("/robots.txt", "/robots-b.txt"):
            if name == "html":
                return _html(b"<html><head><title>Not Found</title></head><body><h1>Sorry!</h1></body></html>")
            if name == "huge":
                return web.Response(body=huge, content_type="text/plain")
            if name == "loop":
                return _redirect("/robots-b.txt" if path == "/robots.txt" else "/robots.txt", 301)
            return web.Response(status=500, text="robots.txt is broken")
        if path == "/":
            return _html(page(f"Robots {name}", "/page", "/private", "/secret"))
        return _html(page(f"Robots {name} {path}"))

    return handle
