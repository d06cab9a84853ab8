"""The generic media detector and the playlist reader: what they find on a page or in a playlist file."""

from __future__ import annotations

import json

import pytest

from webtrawl.media.playlists import MAX_BODY, MAX_ENTRIES, read_playlist
from webtrawl.models import MediaRef
from webtrawl.parse.media import (
    AUDIO_EXTENSIONS,
    MAX_REFS,
    MAX_SCRIPT_TEXT,
    PLAYLIST_EXTENSIONS,
    VIDEO_EXTENSIONS,
    find_media,
    media_kind,
)

PAGE = "http://example.com/dir/page.html"
BOTH = frozenset({"audio", "video"})


def _found(html: str, kinds: frozenset[str] = BOTH) -> list[tuple[str, str, str]]:
    return [(ref.url, ref.kind, ref.found_by) for ref in find_media(html, PAGE, kinds)]


def _urls(html: str, kinds: frozenset[str] = BOTH) -> list[str]:
    return [ref.url for ref in find_media(html, PAGE, kinds)]


# media_kind


@pytest.mark.parametrize(
    ("url", "content_type", "kind"),
    [
        ("/x", "audio/mpeg", "audio"),
        ("/x", "Audio/MPEG; charset=binary", "audio"),
        ("/x", "video/mp4; codecs=avc1", "video"),
        ("/x", "video/MP2T", "video"),
        ("/x", "audio/x-mpegurl", "playlist"),
        ("/x", "audio/mpegurl", "playlist"),
        ("/x", "application/vnd.apple.mpegurl", "playlist"),
        ("/x", "application/x-mpegURL", "playlist"),
        ("/x", "audio/x-scpls", "playlist"),
        ("/x", "application/xspf+xml", "playlist"),
        ("/a.mp3", "video/mp4", "video"),  # the server knows better than the name
        ("/a.mp3", "text/html; charset=utf-8", None),  # an error or landing page, whatever its name
        ("/a.mp4", "application/xhtml+xml", None),
        ("/a.mp4", "image/jpeg", None),
        ("/a.mp3", "application/octet-stream", "audio"),  # says nothing: the name decides
        ("/list.m3u", "text/plain", "playlist"),  # what servers send for .m3u
        ("/a.ogv", "application/ogg", "video"),
        ("/x", "application/octet-stream", None),
        ("/x", "", None),
        ("/x", None, None),
    ],
)
def test_media_kind_by_content_type(url: str, content_type: str | None, kind: str | None) -> None:
    assert media_kind(url, content_type) == kind


@pytest.mark.parametrize(
    ("extensions", "kind"),
    [(AUDIO_EXTENSIONS, "audio"), (VIDEO_EXTENSIONS, "video"), (PLAYLIST_EXTENSIONS, "playlist")],
)
def test_media_kind_by_extension(extensions: frozenset[str], kind: str) -> None:
    for extension in extensions:
        assert media_kind(f"http://h/dir/file.{extension}") == kind
        assert media_kind(f"file.{extension.upper()}") == kind
    assert len(AUDIO_EXTENSIONS) == 13 and len(VIDEO_EXTENSIONS) == 10 and len(PLAYLIST_EXTENSIONS) == 5


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://h/a.mp3?download=1#t=30", "audio"),
        ("http://h/a.MP4#t", "video"),
        ("/stream.m3u8?token=x.html", "playlist"),
        ("//cdn.example/a.flac", "audio"),
        ("a.weba ", "audio"),
        ("http://h/a.mp3/", None),  # a directory
        ("http://h/a.mp3.html", None),
        ("http://h/a.mp3x", None),
        ("http://h/dl?file=a.mp3", None),  # the name is the path's, not the query's
        ("http://host.mp3", None),  # a host name, no path
        ("http://host.mp3:8000/", None),
        ("//host.mp3", None),
        ("http://h/dir/.mp3", None),  # a hidden file has no extension
        ("http://h/mp3", None),
        ("http://h/page", None),
        ("", None),
    ],
)
def test_media_kind_reads_only_the_last_path_segment(url: str, kind: str | None) -> None:
    assert media_kind(url) == kind


# find_media: each form


def test_links_relative_absolute_and_root_relative() -> None:
    html = """<a href="a.mp3">a</a> <a href="../b.m4a">b</a> <a href="/c.webm">c</a>
    <a href="https://cdn.example.org/d.flac?sig=1#t=3">d</a> <a href="//cdn.example.org/e.mkv">e</a>
    <a href="/list.m3u8">f</a> <A HREF="/UPPER.MP3">g</A>"""
    assert _found(html) == [
        ("http://example.com/dir/a.mp3", "audio", "link"),
        ("http://example.com/b.m4a", "audio", "link"),
        ("http://example.com/c.webm", "video", "link"),
        ("https://cdn.example.org/d.flac?sig=1", "audio", "link"),
        ("http://cdn.example.org/e.mkv", "video", "link"),
        ("http://example.com/list.m3u8", "playlist", "link"),
        ("http://example.com/UPPER.MP3", "audio", "link"),
    ]


def test_links_by_type_attribute_and_link_elements() -> None:
    html = """<head><link rel="preload" as="audio" href="/pre.ogg">
    <link rel="alternate" type="application/x-mpegURL" href="/live">
    <link rel="stylesheet" href="/style.css"></head>
    <body><a href="/download?id=7" type="audio/mpeg">mp3</a>
    <a href="/player.mp3" type="text/html">a page named like a file</a>"""
    assert _found(html) == [
        ("http://example.com/pre.ogg", "audio", "link"),
        ("http://example.com/live", "playlist", "link"),
        ("http://example.com/download?id=7", "audio", "link"),
    ]


def test_links_that_are_not_media_are_ignored() -> None:
    html = """<a href="/page.html">p</a><a href="/img.jpg">i</a><a href="/">r</a><a href="/dl?f=a.mp3">q</a>
    <a href="/music/">d</a><a href="/a.mp3.zip">z</a><a href="/a.ts">segment</a><a>no href</a><a href="">e</a>
    <img src="/cover.mp3"><iframe src="/clip.mp4"></iframe><embed src="/old.mp3">"""
    assert _found(html) == []


def test_base_href_governs_every_address_even_before_it() -> None:
    html = """<a href="early.mp3">e</a><base href="https://media.example.net/files/"><base href="/ignored/">
    <audio src="track.ogg"></audio><script>var a = "/root.opus", b = "rel.mp3";</script>"""
    assert _urls(html) == [
        "https://media.example.net/files/early.mp3",
        "https://media.example.net/files/track.ogg",
        "https://media.example.net/root.opus",
        "https://media.example.net/files/rel.mp3",
    ]


def test_a_base_that_does_not_parse_is_ignored() -> None:
    assert _urls('<base href="http://[::1"><a href="a.mp3">') == ["http://example.com/dir/a.mp3"]
    assert _urls('<base href="javascript:x"><a href="a.mp3">') == ["http://example.com/dir/a.mp3"]


def test_audio_and_video_elements_take_their_own_kind() -> None:
    html = """<audio src="/a.webm" controls></audio> <video src="/v.ogg"></video>
    <audio data-src="/lazy.mp3"></audio> <video src="/live.m3u8"></video> <audio src="/stream"></audio>"""
    assert _found(html) == [
        ("http://example.com/a.webm", "audio", "audio"),  # audio-only webm
        ("http://example.com/v.ogg", "video", "video"),  # theora in ogg
        ("http://example.com/lazy.mp3", "audio", "audio"),
        ("http://example.com/live.m3u8", "playlist", "video"),
        ("http://example.com/stream", "audio", "audio"),  # no extension needed: the element says it
    ]


def test_sources_and_tracks_take_the_kind_of_their_element() -> None:
    html = """<video poster="/poster.jpg"><source src="/v.webm" type="video/webm"><source src="/v.mp4">
    <source src="/hls" type="application/vnd.apple.mpegurl"><source src="/sound" type="audio/mpeg; codecs=mp3">
    <track src="/subs.vtt" kind="subtitles"></video>
    <audio><source src="/a.ogg"><source data-src="/lazy.opus"><track src="/lyrics.vtt"></audio>
    <picture><source srcset="/img.webp" src="/img.mp4"><img src="/img.jpg"></picture>
    <div><source src="/orphan.mp3"><track src="/orphan.vtt"></div>"""
    assert _found(html) == [
        ("http://example.com/v.webm", "video", "source"),
        ("http://example.com/v.mp4", "video", "source"),
        ("http://example.com/hls", "playlist", "source"),
        ("http://example.com/sound", "audio", "source"),
        ("http://example.com/subs.vtt", "video", "track"),
        ("http://example.com/a.ogg", "audio", "source"),
        ("http://example.com/lazy.opus", "audio", "source"),
        ("http://example.com/lyrics.vtt", "audio", "track"),
    ]


def test_open_graph_and_twitter_meta_tags() -> None:
    html = """<head>
    <meta property="og:audio" content="/og/a.mp3">
    <meta property="og:audio:url" content="/og/b">
    <meta property="og:audio:secure_url" content="https://example.com/og/c.ogg">
    <meta property="og:video" content="/og/d.mp4">
    <meta name="og:video:url" content="/og/e">
    <meta property="OG:VIDEO:SECURE_URL" content=" /og/f.webm ">
    <meta name="twitter:player:stream" content="/og/g.mp4">
    <meta property="og:image" content="/og/cover.mp3">
    <meta name="description" content="/og/h.mp3">
    </head>"""
    assert _found(html) == [
        ("http://example.com/og/a.mp3", "audio", "og"),
        ("http://example.com/og/b", "audio", "og"),
        ("https://example.com/og/c.ogg", "audio", "og"),
        ("http://example.com/og/d.mp4", "video", "og"),
        ("http://example.com/og/e", "video", "og"),
        ("http://example.com/og/f.webm", "video", "og"),
        ("http://example.com/og/g.mp4", "video", "og"),
    ]


def test_an_open_graph_type_tells_a_player_page_from_a_file() -> None:
    html = """
    <meta property="og:video" content="https://www.youtube.com/embed/abc">
    <meta property="og:video:secure_url" content="https://www.youtube.com/embed/abc?s=1">
    <meta property="og:video:type" content="text/html">
    <meta property="og:video" content="https://example.com/player.swf">
    <meta property="og:video:type" content="application/x-shockwave-flash">
    <meta property="og:video" content="https://example.com/watch/9">
    <meta property="og:video:type" content="video/mp4">
    <meta property="og:audio" content="https://example.com/listen/9">
    <meta property="og:audio:type" content="audio/mpeg">
    <meta name="twitter:player:stream" content="https://example.com/stream/9">
    <meta name="twitter:player:stream:content_type" content="audio/mp4">"""
    assert _found(html) == [
        ("https://example.com/watch/9", "video", "og"),
        ("https://example.com/listen/9", "audio", "og"),
        ("https://example.com/stream/9", "audio", "og"),
    ]
    assert _found(html, frozenset({"video"})) == [("https://example.com/watch/9", "video", "og")]


def test_json_ld_media_objects() -> None:
    data = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebPage", "url": "/page-not-media.html"},
            {
                "@type": "MusicRecording",
                "name": "song",
                "url": "/song/1",
                "audio": {"@type": "AudioObject", "contentUrl": "/files/song1", "encodingFormat": "audio/mpeg"},
            },
            {
                "@type": ["VideoObject", "Thing"],
                "contentUrl": "https://cdn.example.com/v/clip",
                "embedUrl": "https://example.com/embed/clip",
            },
            {"@type": "VideoObject", "embedUrl": "/v/embedded.mp4"},
            {"@type": "http://schema.org/AudioObject", "contentUrl": ["/a/one.ogg", "/a/two.mp3", 3]},
            {"@type": "PodcastEpisode", "associatedMedia": {"@type": "MediaObject", "contentUrl": "/ep/1.m4a"}},
            {"@type": "MediaObject", "contentUrl": "/ep/notes.pdf"},
            {"@type": "AudioObject", "contentUrl": "/live.m3u8"},
            {
                "@type": "MusicAlbum",
                "track": [
                    {
                        "@type": "MusicRecording",
                        "audio": [
                            {"@type": "AudioObject", "contentUrl": "/album/t1.flac"},
                            {"@type": "AudioObject", "contentUrl": "/album/t2.flac"},
                        ],
                    }
                ],
            },
        ],
    }
    html = f'<script type="application/ld+json">{json.dumps(data)}</script>'
    assert _found(html) == [
        ("http://example.com/files/song1", "audio", "json-ld"),
        ("https://cdn.example.com/v/clip", "video", "json-ld"),
        ("http://example.com/v/embedded.mp4", "video", "json-ld"),
        ("http://example.com/a/one.ogg", "audio", "json-ld"),
        ("http://example.com/a/two.mp3", "audio", "json-ld"),
        ("http://example.com/ep/1.m4a", "audio", "json-ld"),
        ("http://example.com/live.m3u8", "playlist", "json-ld"),
        ("http://example.com/album/t1.flac", "audio", "json-ld"),
        ("http://example.com/album/t2.flac", "audio", "json-ld"),
    ]


def test_json_ld_as_a_top_level_list_and_escaped() -> None:
    html = """<script type="application/ld+json">[{"@type":"AudioObject","contentUrl":"https:\\/\\/x.example\\/a"},
    {"@type":"VideoObject","contentUrl":"\\u002Fv\\u002Fb"}]</script>"""
    assert _found(html) == [
        ("https://x.example/a", "audio", "json-ld"),
        ("http://example.com/v/b", "video", "json-ld"),
    ]


def test_malformed_json_ld_is_still_searched_as_script() -> None:
    html = """<script type="application/ld+json">{"@type": "AudioObject", "contentUrl": "https://x.example/a.mp3",
    "name": "cut here</script><script type="application/ld+json">{"@type": "AudioObject" "contentUrl": "/b"}</script>
    <script type="application/ld+json"></script><script type="application/ld+json">null</script>
    <script type="application/ld+json">"/c.mp3"</script><a href="/after.mp3">"""
    assert _found(html) == [
        ("https://x.example/a.mp3", "audio", "script"),
        ("http://example.com/c.mp3", "audio", "script"),
        ("http://example.com/after.mp3", "audio", "link"),
    ]


def test_urls_in_scripts() -> None:
    html = r"""<script>
    var player = {"file": "https:\/\/cdn.example.com\/a\/one.mp3",
                  "alt": "https:\u002F\u002Fcdn.example.com\u002Ftwo.m4a"};
    var nested = "{\"src\":\"https:\\/\\/cdn.example.com\\/three.ogg\"}";
    var rel = '/files/four.ogg', rel2 = "five.opus?token=a\u0026b=1", tpl = `six.mp4`;
    embed("player.swf?file=http://old.example.com:8080/seven.mp3&autostart=true");
    // http://comment.example.com/eight.flac
    var notMedia = ["https://cdn.example.com/app.js", "/page.html", "https://cdn.example.com/img.mp3.jpg"];
    var built = "/songs/" + id + ".mp3", fmt = "${id}.mp3", ext = ".mp3", glob = "*.mp3";
    </script>
    <script type="application/json" id="__NEXT_DATA__">{"props":{"video":"/v/nine.webm","hls":"/v/ten.m3u8"}}</script>
    <script type="text/x-template"><audio src="tpl/eleven.wav"></audio></script>"""
    assert _found(html) == [
        ("https://cdn.example.com/a/one.mp3", "audio", "script"),
        ("https://cdn.example.com/two.m4a", "audio", "script"),
        ("https://cdn.example.com/three.ogg", "audio", "script"),
        ("http://example.com/files/four.ogg", "audio", "script"),
        ("http://example.com/dir/five.opus?token=a&b=1", "audio", "script"),
        ("http://example.com/dir/six.mp4", "video", "script"),
        ("http://old.example.com:8080/seven.mp3", "audio", "script"),
        ("http://comment.example.com/eight.flac", "audio", "script"),
        ("http://example.com/v/nine.webm", "video", "script"),
        ("http://example.com/v/ten.m3u8", "playlist", "script"),
        ("http://example.com/dir/tpl/eleven.wav", "audio", "script"),
    ]


def test_other_schemes_are_dropped() -> None:
    html = r"""<a href="javascript:play('a.mp3')">j</a><a href="data:audio/mp3;base64,AAAA.mp3">d</a>
    <a href="mailto:x@example.com?subject=a.mp3">m</a><a href="ftp://files.example.com/a.mp3">f</a>
    <audio src="blob:http://example.com/1c2d"></audio><video src="data:video/mp4;base64,AAAA"></video>
    <meta property="og:audio" content="file:///home/a.mp3">
    <script>var b = "blob:http://example.com/x.mp3", f = "file:///c/a.mp3", bad = "\ud800.mp3";</script>
    <a href="http://[::1/a.mp3">broken</a><a href="/ok.mp3">ok</a>"""
    assert _urls(html) == ["http://example.com/ok.mp3"]


# find_media: kinds, dedup, order


MIXED = """<meta property="og:video" content="/v0.mp4">
<a href="/a1.mp3"></a><a href="/v1.mkv"></a><a href="/p1.pls"></a>
<audio src="/a2"></audio><video src="/v2"></video>
<script>x = ["/a3.wav", "/v3.avi", "/p3.xspf"]</script>"""


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (
            {"audio", "video"},
            ["/v0.mp4", "/a1.mp3", "/v1.mkv", "/p1.pls", "/a2", "/v2", "/a3.wav", "/v3.avi", "/p3.xspf"],
        ),
        ({"audio"}, ["/a1.mp3", "/p1.pls", "/a2", "/a3.wav", "/p3.xspf"]),
        ({"video"}, ["/v0.mp4", "/v1.mkv", "/p1.pls", "/v2", "/v3.avi", "/p3.xspf"]),
        (set(), []),
    ],
)
def test_kinds_filter_and_playlists_always_come(kinds: set[str], expected: list[str]) -> None:
    assert _urls(MIXED, frozenset(kinds)) == ["http://example.com" + path for path in expected]


def test_dedup_first_finding_in_document_order_wins() -> None:
    html = """<head><meta property="og:audio" content="/x/song.mp3"></head>
    <body><audio src="/x/song.mp3#t=10"></audio><a href="/x/song.mp3">same</a>
    <a href="http://EXAMPLE.com:80/x/./song.mp3">same, spelled differently</a>
    <video src="/v.mp4"></video><a href="/v.mp4"></a><a href="/v.mp4"></a>
    <script>var s = "http://example.com/x/song.mp3", t = "/v.mp4";</script></body>"""
    assert find_media(html, PAGE, BOTH) == [
        MediaRef("http://example.com/x/song.mp3", "audio", "og"),
        MediaRef("http://example.com/v.mp4", "video", "video"),
    ]


def test_a_json_ld_finding_comes_before_the_same_address_in_its_script() -> None:
    html = '<script type="application/ld+json">{"@type": "AudioObject", "contentUrl": "/x.mp3"}</script>'
    assert _found(html) == [("http://example.com/x.mp3", "audio", "json-ld")]


# find_media: hostile pages


def test_a_five_megabyte_script_is_searched_only_up_to_the_cap() -> None:
    filler = "var a = 'some text' + b; // http://example.com/not-media.js\n"
    body = "x = '/first.mp3';\n" + filler * (MAX_SCRIPT_TEXT // len(filler)) + "y = '/beyond.mp3';\n"
    body += filler * ((5 * 1024 * 1024 - len(body)) // len(filler))
    html = f"<script>{body}</script><script>z = '/next-script.mp3'</script><a href='/link.mp3'>"
    assert len(html) > 5 * 1024 * 1024
    found = _urls(html)
    assert found == ["http://example.com/first.mp3", "http://example.com/link.mp3"]


@pytest.mark.parametrize(
    "script",
    [
        "http://" * 300_000,  # every start of a URL inside the previous one
        "https:\\/\\/" + "a\\/" * 600_000,  # one endless escaped URL
        '"' + "x.mp3?" * 350_000,  # a quote that never closes, a media extension every 6 characters
        "http://a/" + "b.mp3" * 400_000,  # one path, a media extension every 5 characters
    ],
    ids=["http", "escaped", "unclosed", "extensions"],
)
def test_script_patterns_take_linear_time(script: str) -> None:
    find_media(f"<script>{script}</script>", PAGE, BOTH)  # returns at all: the patterns never backtrack


def test_refs_are_capped_and_a_hundred_thousand_links_are_cheap() -> None:
    unique = "".join(f'<a href="/m/{i}.mp3">{i}</a>' for i in range(5 * MAX_REFS))
    found = _urls(unique)
    assert len(found) == MAX_REFS
    assert found[:2] == ["http://example.com/m/0.mp3", "http://example.com/m/1.mp3"]
    assert found[-1] == f"http://example.com/m/{MAX_REFS - 1}.mp3"

    same = '<a href="/same.mp3">x</a><a href="/page.html">y</a>' * 50_000 + '<a href="/last.mp3">'
    assert _urls(same) == ["http://example.com/same.mp3", "http://example.com/last.mp3"]


def test_a_script_repeating_media_urls() -> None:
    html = "<script>" + "".join(f'"https://cdn.example.com/{i}.mp3",' for i in range(100_000)) + "</script>"
    assert len(_urls(html)) == MAX_REFS
    html = "<script>" + '"https://cdn.example.com/one.mp3",' * 100_000 + "'/two.mp3'</script>"
    assert _urls(html) == ["https://cdn.example.com/one.mp3"]  # past the matches looked at


def test_deeply_nested_json() -> None:
    deep_list = "[" * 200_000 + "]" * 200_000
    deep_object = '{"a":' * 100_000 + "1" + "}" * 100_000
    medium = '{"a":' * 200 + '{"@type":"AudioObject","contentUrl":"/deep.mp3"}' + "}" * 200
    html = (
        f'<script type="application/ld+json">{deep_list}</script>'
        f'<script type="application/ld+json">{deep_object}</script>'
        f'<script type="application/json">{deep_list}</script>'
        f'<script type="application/ld+json">{medium}</script>'
    )
    assert _found(html) == [("http://example.com/deep.mp3", "audio", "json-ld")]


def test_broken_markup() -> None:
    html = "<audio src='/a.mp3'<source src=/b.mp3><video><source src='/c.mp4'" + "<div>" * 1000 + "<a href=/d.mp3"
    assert find_media(html, PAGE, BOTH)  # no crash; what a browser would recover is not the point
    assert find_media("", PAGE, BOTH) == []
    assert find_media("\x00\ufffd<<<>>>", PAGE, BOTH) == []


# read_playlist


LIST = "http://radio.example.com/lists/station.m3u"


def _entries(body: bytes | str, url: str = LIST, content_type: str | None = None) -> list[tuple[str, str]]:
    data = body.encode() if isinstance(body, str) else body
    refs = read_playlist(data, url, content_type)
    assert all(ref.found_by == "playlist" for ref in refs)
    return [(ref.url, ref.kind) for ref in refs]


def test_m3u() -> None:
    body = (
        "\ufeff#EXTM3U\r\n#EXTINF:123,Artist - Title\r\nsong.mp3\r\n\r\n# a comment\r\n"
        "  /other/clip.mp4  \r\nhttp://stream.example.net:8000/live\r\n../up.ogg?x=1\r\n"
        "C:\\Music\\local.mp3\r\nfile:///home/me/local.mp3\r\nsong.mp3\r\n"
    )
    assert _entries(body) == [
        ("http://radio.example.com/lists/song.mp3", "audio"),
        ("http://radio.example.com/other/clip.mp4", "video"),
        ("http://stream.example.net:8000/live", "audio"),  # a radio stream: no extension, taken as audio
        ("http://radio.example.com/up.ogg?x=1", "audio"),
    ]


def test_m3u_without_header_and_in_latin1() -> None:
    assert _entries("a.mp3\nb.flac\n") == [
        ("http://radio.example.com/lists/a.mp3", "audio"),
        ("http://radio.example.com/lists/b.flac", "audio"),
    ]
    assert _entries("#EXTM3U\nchanson-\xe9t\xe9.mp3\n".encode("latin-1")) == [
        ("http://radio.example.com/lists/chanson-%C3%A9t%C3%A9.mp3", "audio")
    ]


def test_hls_entries_keep_only_kinds_their_extension_names() -> None:
    master = (
        "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nlow/index.m3u8\n"
        "#EXT-X-STREAM-INF:BANDWIDTH=2000000\nhttps://cdn.example.com/high/index.m3u8?t=1\n"
    )
    assert _entries(master, "https://tv.example.com/live/master.m3u8") == [
        ("https://tv.example.com/live/low/index.m3u8", "playlist"),
        ("https://cdn.example.com/high/index.m3u8?t=1", "playlist"),
    ]
    media = (
        '#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXT-X-KEY:METHOD=AES-128,URI="key.bin"\n'
        "#EXTINF:10,\nseg1.ts\n#EXTINF:10,\nseg2.aac\n#EXTINF:10,\nseg3.mp4\n#EXTINF:10,\nseg4\n#EXT-X-ENDLIST\n"
    )
    assert _entries(media, "https://tv.example.com/live/low/index.m3u8") == [
        ("https://tv.example.com/live/low/seg2.aac", "audio"),
        ("https://tv.example.com/live/low/seg3.mp4", "video"),
    ]


def test_pls() -> None:
    body = (
        "[playlist]\nNumberOfEntries=4\nFile1=http://stream.example.net:8000/\nTitle1=Station\nLength1=-1\n"
        "file2 = backup.ogg\nFILE3=clip.webm\nFileX=/bad.mp3\nFile4\nFile5=\nVersion=2\n"
    )
    assert _entries(body, "http://radio.example.com/listen.pls") == [
        ("http://stream.example.net:8000/", "audio"),
        ("http://radio.example.com/backup.ogg", "audio"),
        ("http://radio.example.com/clip.webm", "video"),
    ]


def test_xspf() -> None:
    body = """<?xml version="1.0" encoding="UTF-8"?>
    <playlist version="1" xmlns="http://xspf.org/ns/0/">
      <location>http://radio.example.com/this-playlist.xspf</location>
      <trackList>
        <track><title>One</title><location>one.flac</location></track>
        <track><location> https://cdn.example.com/two.ogv </location><location>mirror/two.ogv</location></track>
        <track><location>http://stream.example.net/live</location></track>
        <track><title>no location</title></track>
        <track><location>one.flac</location><location>ftp://x/y.mp3</location></track>
      </trackList>
    </playlist>"""
    assert _entries(body, "http://radio.example.com/lists/p.xspf") == [
        ("http://radio.example.com/lists/one.flac", "audio"),
        ("https://cdn.example.com/two.ogv", "video"),
        ("http://radio.example.com/lists/mirror/two.ogv", "video"),
        ("http://stream.example.net/live", "audio"),
    ]


def test_malformed_xspf_keeps_the_entries_before_the_fault() -> None:
    cut = "<playlist><trackList><track><location>a.mp3</location></track><track><location>b.mp3</loc"
    assert _entries(cut, "http://h/p.xspf") == [("http://h/a.mp3", "audio")]
    assert _entries("<playlist><trackList><track><location>&undefined;</location>", "http://h/p.xspf") == []
    assert _entries("not xml at all", "http://h/p.xspf") == []


def test_xspf_with_a_dtd_is_refused() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE playlist [<!ENTITY lol "lol">'
        + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i else "&lol;" * 10}">' for i in range(9))
        + "]><playlist><trackList><track><location>/&lol8;.mp3</location></track>"
        + "<track><location>/fine.mp3</location></track></trackList></playlist>"
    )
    assert _entries(laughs, "http://h/p.xspf") == []  # stopped at the DTD, no entity expanded


@pytest.mark.parametrize(
    ("body", "url", "content_type", "expected"),
    [
        ("File1=/a.mp3\n", "http://h/get?id=1", "audio/x-scpls", [("http://h/a.mp3", "audio")]),
        ("/a.mp3\n", "http://h/get?id=1", "application/vnd.apple.mpegurl; charset=utf-8",
         [("http://h/a.mp3", "audio")]),
        ("<playlist><trackList><track><location>/a.mp3</location></track></trackList></playlist>",
         "http://h/get", None, [("http://h/a.mp3", "audio")]),
        ("[playlist]\nFile1=/a.mp3\n", "http://h/misnamed.m3u", "audio/x-mpegurl", [("http://h/a.mp3", "audio")]),
        ("#EXTM3U\n/a.mp3\n", "http://h/misnamed.pls", "audio/x-scpls", [("http://h/a.mp3", "audio")]),
        ("/a.mp3\n", "http://h/get?id=1", "text/plain", []),  # nothing says it is a playlist
        ("/a.mp3\n", "http://h/list.M3U8#x", None, [("http://h/a.mp3", "audio")]),
    ],
    ids=["pls-by-type", "m3u-by-type", "xspf-sniffed", "pls-sniffed", "m3u-sniffed", "unknown", "by-extension"],
)  # fmt: skip
def test_the_format_is_sniffed_then_typed_then_named(
    body: str, url: str, content_type: str | None, expected: list[tuple[str, str]]
) -> None:
    assert _entries(body, url, content_type) == expected


def test_playlists_are_bounded() -> None:
    many = "#EXTM3U\n" + "".join(f"/t/{i}.mp3\n" for i in range(MAX_ENTRIES + 500))
    found = _entries(many)
    assert len(found) == MAX_ENTRIES and found[0] == ("http://radio.example.com/t/0.mp3", "audio")
    huge = b"#EXTM3U\n/a.mp3\n" + b"#" * MAX_BODY
    assert _entries(huge) == []
    xspf = (
        "<playlist><trackList>" + "<track><location>/same.mp3</location></track>" * 20_000 + "</trackList></playlist>"
    )
    assert _entries(xspf, "http://h/p.xspf") == [("http://h/same.mp3", "audio")]
    assert _entries("#EXTM3U\n" + "".join(f"c:\\{i}.mp3\n" for i in range(100_000))) == []  # none resolves
    assert _entries("#EXTM3U\n" + "same.mp3\n" * 100_000) == [("http://radio.example.com/lists/same.mp3", "audio")]


def test_binary_bodies_give_nothing() -> None:
    gzipped = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + bytes(range(256)) * 10
    assert _entries(gzipped) == []
    assert _entries(gzipped, "http://h/p.pls") == []
    assert _entries(gzipped, "http://h/p.xspf") == []
    assert _entries(b"") == []
