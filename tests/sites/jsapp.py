"""A local site whose pages are built by JavaScript: what a crawler sees only when it renders pages in a browser.

`async with JsSite() as site:` serves on 127.0.0.1; every request is kept in `site.requests` before it is answered.
Each app page is a static shell (an empty `<div id="app">`, a `<noscript>`, /static/site.css, /static/logo.png) that
loads its own /static/NAME.js; the served HTML of an app page holds none of the links or text its script writes.

| path                 | what its script does                                                                    |
|----------------------|-----------------------------------------------------------------------------------------|
| /                    | fetches /api/nav.json, writes a link to each page below; title "JS Home"                |
| /article/1…5         | fetches /api/article/N.json: "scriptwordN", a link to the next one; title "Article N"   |
| /feed                | infinite scroll: /api/feed?page=1 at load, pages 2…4 near the bottom (/item/1…40)       |
| /player              | a click on `.play-button` fetches /api/player.json, then plays /media/track.mp3         |
| /dialogs             | alert, confirm and prompt at load, then a link to /after-dialogs; title "Dialogs done"  |
| /opener              | `window.open('/popup-target')` at load; title "Opener"                                  |
| /pushstate           | `history.pushState` to /virtual/route; title "Pushed"                                   |
| /framed              | writes an `<iframe src=/frame-doc>`; title "Framed"                                     |
| /new-window          | clicks a link with `target=_blank` to /blank-target, then removes it; title "New window"|
| /never-idle          | a link to /after-idle, then polls /api/poll (answered after 50 ms) every 100 ms forever |
| /busy-loop           | a link to /after-loop, then loops forever 50 ms later                                   |
| /navigate-away       | a link to /before-leaving, then goes to `elsewhere` + "/elsewhere" after 100 ms         |
| /huge-dom            | 100,000 `<div>`s in one go, then a link to /after-huge                                  |
| /private-sub         | the shell has an `<img>` on 10.255.255.1; the script fetches 192.168.255.1, then links  |
|                      | to /after-private; title "Private sub"                                                  |
| /article/1 only      | also fetches /api/secret, which /robots.txt disallows                                   |

Served as they are, with no script: /static-page/1…3 (links to each other and to /: pages that need no rendering),
and the leaf pages /item/1…40, /after-dialogs, /popup-target, /virtual/route, /after-idle, /after-loop,
/before-leaving, /after-huge, /after-private, /blank-target, /frame-doc. Anything else is 404.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
import zlib
from collections import Counter
from typing import NamedTuple, Self

from aiohttp import web

_HTML = "text/html; charset=utf-8"
_JS = "application/javascript"
_JSON = "application/json"
_ARTICLES = 5
_FEED_PAGES = 4
_FEED_PAGE_ITEMS = 10
_POLL_DELAY = 0.05
"""Seconds /api/poll waits before it answers, so a request is often in flight."""
_NAV = (
    *(f"/article/{n}" for n in range(1, _ARTICLES + 1)),
    *("/feed", "/player", "/dialogs", "/never-idle", "/busy-loop", "/navigate-away", "/huge-dom", "/private-sub"),
    *("/pushstate", "/opener", "/new-window", "/framed"),
)
_LEAVES = (
    *(f"/item/{k}" for k in range(1, _FEED_PAGES * _FEED_PAGE_ITEMS + 1)),
    *("/after-dialogs", "/popup-target", "/virtual/route", "/after-idle", "/after-loop", "/before-leaving"),
    *("/after-huge", "/after-private", "/blank-target", "/frame-doc"),
)
_MP3 = (b"\xff\xfb\x94\xc4" + bytes(380)) * 10
"""Ten silent MPEG-1 Layer III frames (see music.py): enough for a player to ask for, and to accept."""

_HELPERS = """\
const app = document.getElementById('app');
function link(href, text, parent = app) {
  const a = document.createElement('a');
  a.href = href;
  a.textContent = text || href;
  parent.append(a, document.createElement('br'));
}
"""
"""Prepended to every script: `link` writes an `<a href>` into #app."""
_SCRIPTS = {
    "home": """\
fetch('/api/nav.json').then(r => r.json()).then(nav => {
  for (const href of nav.links) link(href);
  document.title = 'JS Home';
});
""",
    "article": """\
const n = Number(location.pathname.split('/').pop());
if (n === 1) fetch('/api/secret').catch(() => {});
fetch(`/api/article/${n}.json`).then(r => r.json()).then(article => {
  const p = document.createElement('p');
  p.textContent = article.text;
  app.append(p);
  if (article.next) link(article.next, 'Next article');
  document.title = article.title;
});
""",
    "feed": """\
let next = 1, loading = false;
function more() {
  if (loading || next === null) return;
  loading = true;
  fetch('/api/feed?page=' + next).then(r => r.json()).then(feed => {
    for (const item of feed.items) {
      const div = document.createElement('div');
      div.style.height = '300px';
      app.append(div);
      link(item.href, item.title, div);
    }
    next = feed.next;
    loading = false;
  });
}
addEventListener('scroll', () => {
  if (innerHeight + scrollY >= document.documentElement.scrollHeight - 600) more();
});
more();
""",
    "player": """\
const audio = document.getElementById('a');
document.querySelector('.play-button').addEventListener('click', () => {
  fetch('/api/player.json').then(r => r.json()).then(track => {
    audio.src = track.src;
    audio.play().catch(() => {});
  });
});
""",
    "dialogs": """\
alert('hi');
confirm('sure?');
prompt('name?');
link('/after-dialogs');
document.title = 'Dialogs done';
""",
    "opener": "window.open('/popup-target');\ndocument.title = 'Opener';\n",
    "framed": """\
const frame = document.createElement('iframe');
frame.src = '/frame-doc';
app.append(frame);
document.title = 'Framed';
""",
    "new-window": """\
const a = document.createElement('a');
a.href = '/blank-target';
a.target = '_blank';
document.body.append(a);
a.click();
a.remove();
document.title = 'New window';
""",
    "pushstate": "history.pushState({}, '', '/virtual/route');\ndocument.title = 'Pushed';\n",
    "never-idle": """\
link('/after-idle');
setInterval(() => fetch('/api/poll').catch(() => {}), 100);
""",
    "busy-loop": """\
link('/after-loop');
setTimeout(() => { while (true) {} }, 50);
""",
    "navigate-away": """\
link('/before-leaving');
setTimeout(() => { location.href = ELSEWHERE + '/elsewhere'; }, 100);
""",
    "huge-dom": """\
const rows = document.createDocumentFragment();
for (let i = 0; i < 100000; i++) {
  const div = document.createElement('div');
  div.textContent = 'row ' + i;
  rows.append(div);
}
app.append(rows);
link('/after-huge');
""",
    "private": """\
fetch('http://192.168.255.1/beacon').catch(() => {});
link('/after-private');
document.title = 'Private sub';
""",
}
"""Name → script, served at /static/NAME.js (after `_HELPERS`)."""
_CSS = "body { font-family: sans-serif; margin: 2em; }\n#app a { line-height: 1.6; }\n"


class Req(NamedTuple):
    """One request as the site saw it."""

    path: str
    """As sent (not decoded), query included."""
    method: str
    user_agent: str
    referer: str | None
    cookie: str | None
    time: float
    """`time.monotonic()` when it arrived."""


def _png() -> bytes:
    """A valid 1×1 opaque grey PNG, so a browser decodes the image rather than reporting it broken."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)  # 8-bit greyscale, no interlace
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b"")
    )


def _page(title: str, body: str, head: str = "") -> bytes:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>{head}</head>'
        f"<body>{body}</body></html>"
    ).encode()


def _shell(script: str, body: str = "") -> bytes:
    """An app page as served: nothing in it but what loads the script that builds it."""
    return _page(
        "Loading",
        f'<img src="/static/logo.png" alt="logo" width="16" height="16"><noscript>This site needs JavaScript</noscript>'
        f'{body}<div id="app"></div><script src="/static/{script}.js"></script>',
        '<link rel="stylesheet" href="/static/site.css">',
    )


def _static_page(n: int) -> bytes:
    links = "".join(f'<li><a href="/static-page/{m}">Static page {m}</a></li>' for m in range(1, 4) if m != n)
    return _page(f"Static page {n}", f'<h1>Static page {n}</h1><ul>{links}<li><a href="/">Home</a></li></ul>')


def _json(value: object) -> tuple[str, bytes]:
    return _JSON, json.dumps(value).encode()


class JsSite:
    """An aiohttp server for the JavaScript-built site; `url` and `origin` exist once it is started."""

    def __init__(self, *, address: str = "127.0.0.1", port: int = 0, elsewhere: str = "http://127.0.0.2:9") -> None:
        """`elsewhere`: the origin /navigate-away sends the browser to (port 9 by default: nothing listens there)."""
        self.requests: list[Req] = []
        self.url = ""
        """The root URL, "http://ADDRESS:PORT/"."""
        self.origin = ""
        """`url` without its trailing slash."""
        self._address = address
        self._port = port
        self._runner: web.AppRunner | None = None
        self._routes = self._build(elsewhere.rstrip("/"))

    def paths(self) -> Counter[str]:
        """How many times each path (query included) was asked for."""
        return Counter(req.path for req in self.requests)

    async def start(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # a short shutdown: a browser left polling /api/poll must not hold `close` up
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._address, self._port).start()
        self.origin = f"http://{self._address}:{self._runner.addresses[0][1]}"
        self.url = self.origin + "/"
        return self

    async def close(self) -> None:
        """Stop serving (a test may do so mid-crawl); closing again does nothing."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @staticmethod
    def _build(elsewhere: str) -> dict[str, tuple[str, bytes]]:
        """Path → (content type, body) for everything but /api/feed and /api/poll, which depend on the request."""
        routes: dict[str, tuple[str, bytes]] = {
            "/": (_HTML, _shell("home")),
            "/player": (
                _HTML,
                _shell("player", '<button class="play-button" aria-label="Play">▶</button><audio id="a"></audio>'),
            ),
            "/private-sub": (_HTML, _shell("private", '<img src="http://10.255.255.1/tracker.gif" alt="">')),
            "/robots.txt": ("text/plain", b"User-agent: *\nDisallow: /api/secret\n"),
            "/static/site.css": ("text/css", _CSS.encode()),
            "/static/logo.png": ("image/png", _png()),
            "/media/track.mp3": ("audio/mpeg", _MP3),
            "/api/nav.json": _json({"links": _NAV}),
            "/api/player.json": _json({"src": "/media/track.mp3"}),
            "/api/secret": _json({"secret": "robots.txt says no"}),
        }
        scripted = ("feed", "dialogs", "opener", "new-window", "framed", "pushstate", "never-idle", "busy-loop")
        for name in (*scripted, "navigate-away", "huge-dom"):
            routes[f"/{name}"] = (_HTML, _shell(name))
        for name, script in _SCRIPTS.items():
            if name == "navigate-away":
                script = f"const ELSEWHERE = {json.dumps(elsewhere)};\n{script}"
            routes[f"/static/{name}.js"] = (_JS, (_HELPERS + script).encode())
        for n in range(1, _ARTICLES + 1):
            routes[f"/article/{n}"] = (_HTML, _shell("article"))
            text = f"Article {n} exists only once a script has run: scriptword{n}."
            routes[f"/api/article/{n}.json"] = _json(
                {"title": f"Article {n}", "text": text, "next": f"/article/{n + 1}" if n < _ARTICLES else None}
            )
        for n in range(1, 4):
            routes[f"/static-page/{n}"] = (_HTML, _static_page(n))
        for path in _LEAVES:
            name = path.strip("/").replace("/", " ").replace("-", " ")
            routes[path] = (_HTML, _page(name, f"<h1>{name}</h1><p>{name}</p>"))
        return routes

    async def _handle(self, request: web.Request) -> web.Response:
        headers = request.headers
        self.requests.append(
            Req(
                request.raw_path,
                request.method,
                headers.get("User-Agent", ""),
                headers.get("Referer"),
                headers.get("Cookie"),
                time.monotonic(),
            )
        )
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, headers={"Allow": "GET, HEAD"})
        if request.path == "/api/poll":
            await asyncio.sleep(_POLL_DELAY)
            content_type, body = _json({})
        elif request.path == "/api/feed":
            content_type, body = _json(self._feed(request.query.get("page", "")))
        elif request.path in self._routes:
            content_type, body = self._routes[request.path]
        else:
            return web.Response(status=404, text="not found")
        return web.Response(body=body, headers={"Content-Type": content_type})

    @staticmethod
    def _feed(page: str) -> dict[str, object]:
        """One page of the feed: its items and the next page's number (null after the last)."""
        k = int(page) if page.isdigit() else 0
        if not 1 <= k <= _FEED_PAGES:
            return {"items": [], "next": None}
        first = (k - 1) * _FEED_PAGE_ITEMS + 1
        items = [{"href": f"/item/{i}", "title": f"Item {i}"} for i in range(first, first + _FEED_PAGE_ITEMS)]
        return {"items": items, "next": k + 1 if k < _FEED_PAGES else None}
