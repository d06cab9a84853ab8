"""A local site of media players whose addresses no HTML shows: a script asks an API when it runs.

`async with PlayerSite() as site:` serves on 127.0.0.1; every request is kept in `site.requests` (path with its
query, and headers). Each player page sets a `visitor` cookie, then its script fetches `/api/media/ID`, which
answers `{"url": ...}`: an address signed for the User-Agent that asked (HMAC of path, expiry and User-Agent),
valid for `site.ttl` seconds. A media address answers 403 unless its signature matches the request's
User-Agent, it has not expired and the request's Referer is a player page; one under /media/ also wants the
visitor cookie.
`site.refuse_first` names media ids whose first signed address is refused anyway (it "expired" at once).

| page             | how its player reveals its media                                                      |
|------------------|---------------------------------------------------------------------------------------|
| /player/load     | at load: an `<audio>` with the address of /media/1.mp3                                |
| /player/click    | a click on its `.play-button`: an `<audio>` with /media/2.mp3                         |
| /player/timer    | 300 ms after load: a `<video>` with /media/3.mp4                                      |
| /player/typed    | at load, `fetch()` of /stream?id=4 (no extension; served as audio/mpeg)              |
| /player/bytes    | at load, `fetch()` of /blob?id=5 (no extension; octet-stream, an MP3's first bytes)  |
| /player/hls      | at load, `fetch()` of /hls/6/index.m3u8 (as hls.js does), a 3-segment HLS stream     |
| /player/again    | the same player as /player/load (media 1), on another page                           |

`/` links to every player page. `site.body(ID)` is media ID's file; `site.hls_body()` the stream joined.

`/apps` links players that ask their API as today's apps do; each API answers 403 unless asked that way:

| page             | how its script asks for the address of its `<audio>`                                   |
|------------------|----------------------------------------------------------------------------------------|
| /app/keyed       | `fetch()` of /api/keyed/7 with a header it sets, `X-Player-Key: k7`                    |
| /app/posted      | POST of JSON `{"query": "media", "id": 8}` to /api/graphql                             |
| /app/session     | `fetch()` of /api/session/9, which wants the `visitor` cookie the page's response set  |
| /app/consent     | sets `document.cookie = "consent=yes"`, then `fetch()` of /api/consent/10, which wants it |
| /app/token       | `fetch()` of /api/login, whose answer sets a `token` cookie /api/token/11 wants         |
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass, field
from typing import Self
from urllib.parse import urlencode

from aiohttp import web

from tests.sites.serving import serve

_SECRET = b"players"
_PLAYERS = {"load": 1, "click": 2, "timer": 3, "typed": 4, "bytes": 5, "hls": 6, "again": 1}
_HEAD = "<!doctype html><meta charset=utf-8><title>Player {name}</title>"
_PLAY = ".then(r => r.json()).then(j => { const a = new Audio(j.url); document.body.append(a); });"
_APPS = {
    "keyed": "fetch('/api/keyed/7', {headers: {'X-Player-Key': 'k7'}})" + _PLAY,
    "posted": (
        "fetch('/api/graphql', {method: 'POST', headers: {'Content-Type': 'application/json'}, "
        "body: JSON.stringify({query: 'media', id: 8})})" + _PLAY
    ),
    "session": "fetch('/api/session/9')" + _PLAY,
    "consent": "document.cookie = 'consent=yes; path=/'; fetch('/api/consent/10')" + _PLAY,
    "token": "fetch('/api/login').then(() => fetch('/api/token/11'))" + _PLAY,
}


def _script(media_id: int, how: str) -> str:
    ask = f"fetch('/api/media/{media_id}').then(r => r.json())"
    if how == "load":
        return f"{ask}.then(j => {{ const a = new Audio(j.url); document.body.append(a); }});"
    if how == "click":
        return (
            "document.querySelector('.play-button').addEventListener('click', () => "
            f"{ask}.then(j => {{ const a = new Audio(j.url); document.body.append(a); a.play().catch(() => {{}}); }}));"
        )
    if how == "timer":
        return (
            f"setTimeout(() => {ask}.then(j => {{ const v = document.createElement('video'); v.src = j.url; "
            "document.body.append(v); }), 300);"
        )
    return f"{ask}.then(j => fetch(j.url)).then(r => r.arrayBuffer()).catch(() => {{}});"


def media_body(media_id: int) -> bytes:
    tag = hashlib.sha256(f"media {media_id}".encode()).digest()
    if media_id == 3:
        return b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + tag * 500
    return b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" + tag * 500


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    method: str = "GET"
    body: bytes = b""


@dataclass
class PlayerSite:
    host: str = "127.0.0.1"
    ttl: float = 600.0
    refuse_first: set[int] = field(default_factory=set)
    disallow: str = ""
    """A path robots.txt disallows to every crawler ("" serves no robots.txt)."""
    requests: list[Request] = field(default_factory=list)
    issued: dict[int, int] = field(default_factory=dict)
    first: dict[str, bool] = field(default_factory=dict)
    """Signature → whether it was the first address issued for its media."""
    url: str = ""

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get("/", self._home)
        app.router.add_get("/player/{name}", self._player)
        app.router.add_get("/api/media/{id}", self._api)
        app.router.add_get("/apps", self._apps)
        app.router.add_get("/robots.txt", self._robots)
        app.router.add_get("/app/{name}", self._app)
        app.router.add_get("/api/login", self._login)
        app.router.add_get("/api/{how}/{id}", self._app_api)
        app.router.add_post("/api/graphql", self._graphql)
        app.router.add_get("/media/{file}", self._media)
        app.router.add_get("/stream", self._media)
        app.router.add_get("/blob", self._media)
        app.router.add_get("/hls/{id}/{file}", self._hls)
        self._runner, self.url = await serve(app, self.host)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._runner.cleanup()

    def asked(self, prefix: str) -> list[Request]:
        return [r for r in self.requests if r.path.startswith(prefix)]

    @staticmethod
    def body(media_id: int) -> bytes:
        return media_body(media_id)

    @staticmethod
    def hls_body() -> bytes:
        return b"".join(_segment(i) for i in range(3))

    async def _home(self, request: web.Request) -> web.Response:
        self._log(request)
        links = "".join(f'<a href="/player/{name}">{name}</a> ' for name in _PLAYERS)
        return web.Response(text=f"<!doctype html><title>Players</title>{links}", content_type="text/html")

    async def _player(self, request: web.Request) -> web.Response:
        self._log(request)
        name = request.match_info["name"]
        if name not in _PLAYERS:
            raise web.HTTPNotFound()
        how = {"again": "load", "typed": "fetch", "bytes": "fetch", "hls": "fetch"}.get(name, name)
        button = '<button class="play-button">Play</button>' if how == "click" else ""
        html = f"{_HEAD.format(name=name)}<h1>{name}</h1>{button}<script>{_script(_PLAYERS[name], how)}</script>"
        response = web.Response(text=html, content_type="text/html")
        response.set_cookie("visitor", "v1", path="/")
        return response

    async def _robots(self, request: web.Request) -> web.Response:
        if not self.disallow:
            raise web.HTTPNotFound()
        return web.Response(text=f"User-agent: *\nDisallow: {self.disallow}\n", content_type="text/plain")

    async def _apps(self, request: web.Request) -> web.Response:
        self._log(request)
        links = "".join(f'<a href="/app/{name}">{name}</a> ' for name in _APPS)
        return web.Response(text=f"<!doctype html><title>Apps</title>{links}", content_type="text/html")

    async def _app(self, request: web.Request) -> web.Response:
        self._log(request)
        name = request.match_info["name"]
        if name not in _APPS:
            raise web.HTTPNotFound()
        html = f"{_HEAD.format(name=name)}<h1>{name}</h1><script>{_APPS[name]}</script>"
        response = web.Response(text=html, content_type="text/html")
        response.set_cookie("visitor", "v1", path="/")
        return response

    async def _login(self, request: web.Request) -> web.Response:
        self._log(request)
        response = web.json_response({"logged_in": True})
        response.set_cookie("token", "t1", path="/")
        return response

    async def _app_api(self, request: web.Request) -> web.Response:
        """/api/keyed/7, /api/session/9, /api/consent/10: each wants what its page's script sends."""
        self._log(request)
        how, media_id = request.match_info["how"], int(request.match_info["id"])
        wanted = {
            ("keyed", 7): request.headers.get("X-Player-Key") == "k7",
            ("session", 9): request.cookies.get("visitor") == "v1",
            ("consent", 10): request.cookies.get("consent") == "yes",
            ("token", 11): request.cookies.get("token") == "t1",
        }
        if not wanted.get((how, media_id)):
            raise web.HTTPForbidden()
        return self._signed(request, media_id)

    async def _graphql(self, request: web.Request) -> web.Response:
        self._log(request, await request.read())
        try:
            query = await request.json()
        except ValueError:
            raise web.HTTPBadRequest() from None
        if query != {"query": "media", "id": 8}:
            raise web.HTTPForbidden()
        return self._signed(request, 8)

    async def _api(self, request: web.Request) -> web.Response:
        self._log(request)
        return self._signed(request, int(request.match_info["id"]))

    def _signed(self, request: web.Request, media_id: int) -> web.Response:
        """A JSON answer with the address of media `media_id`, signed for the User-Agent that asked."""
        self.issued[media_id] = self.issued.get(media_id, 0) + 1
        path = {4: "/stream", 5: "/blob", 6: "/hls/6/index.m3u8"}.get(
            media_id, f"/media/{media_id}.mp{3 if media_id != 3 else 4}"
        )
        query = {"id": str(media_id)} if media_id in (4, 5) else {}
        query["expires"] = str(int(time.time() + self.ttl) * 1000 + self.issued[media_id])  # unique per issue
        query["signature"] = self._sign(path, query, request.headers.get("User-Agent", ""))
        self.first[query["signature"]] = self.issued[media_id] == 1
        return web.json_response({"url": f"{path}?{urlencode(query)}"})

    @staticmethod
    def _sign(path: str, query: dict[str, str], agent: str) -> str:
        message = f"{path}|{query.get('id', '')}|{query['expires']}|{agent}".encode()
        return hmac.new(_SECRET, message, hashlib.sha256).hexdigest()[:32]

    def _allowed(self, request: web.Request) -> bool:
        """Signed for this User-Agent, not expired, asked from a player (or app) page with its cookie."""
        query = dict(request.query)
        if not {"expires", "signature"} <= set(query) or int(query["expires"]) // 1000 < time.time():
            return False
        if not hmac.compare_digest(
            self._sign(request.path, query, request.headers.get("User-Agent", "")), query["signature"]
        ):
            return False
        media_id = int(query.get("id") or request.path.split("/")[2].split(".")[0])
        if media_id in self.refuse_first and self.first.get(query["signature"]):
            return False
        if not _from_a_player(request):
            return False
        # The page's own fetches go through the crawl's fetcher, which keeps no cookies unless told (--cookies).
        return request.path in ("/stream", "/blob") or "visitor=v1" in request.headers.get("Cookie", "")

    async def _media(self, request: web.Request) -> web.Response:
        self._log(request)
        if not self._allowed(request):
            raise web.HTTPForbidden()
        if request.path == "/stream":
            return web.Response(body=media_body(4), content_type="audio/mpeg")
        if request.path == "/blob":
            return web.Response(body=media_body(5), content_type="application/octet-stream")
        media_id = int(request.match_info["file"].split(".")[0])
        return web.Response(body=media_body(media_id), content_type="video/mp4" if media_id == 3 else "audio/mpeg")

    async def _hls(self, request: web.Request) -> web.Response:
        self._log(request)
        file = request.match_info["file"]
        if file == "index.m3u8":
            if not self._allowed(request):
                raise web.HTTPForbidden()
            segments = "".join(f"#EXTINF:2.0,\nseg{i}.ts\n" for i in range(3))
            text = f"#EXTM3U\n#EXT-X-TARGETDURATION:2\n{segments}#EXT-X-ENDLIST\n"
            return web.Response(text=text, content_type="application/vnd.apple.mpegurl")
        if not file.startswith("seg") or "/player/" not in request.headers.get("Referer", ""):
            raise web.HTTPForbidden()
        return web.Response(body=_segment(int(file[3:].split(".")[0])), content_type="video/mp2t")

    def _log(self, request: web.Request, body: bytes = b"") -> None:
        self.requests.append(Request(request.path_qs, dict(request.headers), request.method, body))


def _from_a_player(request: web.Request) -> bool:
    referer = request.headers.get("Referer", "")
    return "/player/" in referer or "/app/" in referer


def _segment(index: int) -> bytes:
    tag = hashlib.sha256(f"segment {index}".encode()).digest()
    return b"".join(b"\x47" + tag[:3] + tag * 5 + b"\xff" * 24 for _ in range(10))
