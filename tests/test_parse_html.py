"""What the parser finds in a page: links (resolved as a browser would), title, visible text, directives."""

from __future__ import annotations

import random

import pytest

from webtrawl.models import Link, ParsedPage
from webtrawl.parse.html import MAX_TEXT, MAX_TITLE, parse_html, refresh_url, srcset_urls
from webtrawl.urls import normalize

PAGE = "http://example.com/dir/page.html"


def _links(html: str, **options: bool) -> list[tuple[str, str]]:
    return [(link.url, link.kind) for link in parse_html(html, PAGE, **options).links]


def _expect(*urls: str | tuple[str, str]) -> list[tuple[str, str]]:
    """URLs as a browser resolves them (a bare path is on example.com), normalized as the crawl does."""
    pairs = [(url, "link") if isinstance(url, str) else url for url in urls]
    return [(normalize(url, "http://example.com/"), kind) for url, kind in pairs]


LINK_CASES = [
    # relative forms
    ("relative", '<a href="a.html">', {}, ["/dir/a.html"]),
    ("dot", '<a href="./b.html">', {}, ["/dir/b.html"]),
    ("parent", '<a href="../c.html">', {}, ["/c.html"]),
    ("dot segments", '<a href="/x/./y/../z">', {}, ["/x/z"]),
    ("above the root", '<a href="../../../../d">', {}, ["/d"]),
    ("root", '<a href="/root">', {}, ["/root"]),
    ("scheme-relative", '<a href="//other.org/p">', {}, ["http://other.org/p"]),
    ("query only", '<a href="?q=1">', {}, ["/dir/page.html?q=1"]),
    ("absolute", '<a href="https://secure.example.org/">', {}, ["https://secure.example.org/"]),
    ("spaces around", '<a href="  /sp \n">', {}, ["/sp"]),
    ("newline inside", '<a href="/new\nline">', {}, ["/newline"]),
    ("upper-case host", '<a href="HTTP://EXAMPLE.COM/Up">', {}, ["/Up"]),
    ("backslashes", '<a href="\\back\\slash">', {}, ["/back/slash"]),
    ("entity in href", '<a href="/q?a=1&amp;b=2">', {}, ["/q?a=1&b=2"]),
    ("non-ascii", '<a href="/café">', {}, ["/caf%C3%A9"]),
    ("upper-case markup", '<A HREF="/UP">x</A>', {}, ["/UP"]),
    ("duplicate attribute: first wins", '<a href="/first" href="/second">', {}, ["/first"]),
    ("empty href", '<a href="">x</a><a href>y</a><a>z</a>', {}, []),
    ("fragment only", '<a href="#top">', {}, ["/dir/page.html"]),
    ("fragments deduped", '<a href="a#x"></a><a href="a#y"></a><a href="a">', {}, ["/dir/a"]),
    ("first occurrence order", "<a href=/2></a><a href=/1></a><a href=/2></a>", {}, ["/2", "/1"]),
    (
        "other schemes",
        """<a href="javascript:void(0)"></a><a href="mailto:a@b.c"></a><a href="tel:+1"></a>
        <a href="data:text/html,hi"></a><a href="ftp://f.example/"></a><a href="http://"></a>
        <a href="http://[::1"></a><a href="/ok">""",
        {},
        ["/ok"],
    ),
    ("area", '<map><area href="/area" shape="rect"></map>', {}, ["/area"]),
    (
        "link rels",
        """<link rel="next" href="/p2"><link rel="Prev" href="/p0"><link rel="alternate" hreflang="de"
        href="/de"><link rel="stylesheet" href="/s.css"><link rel="author" href="/me">
        <link rel="alternate stylesheet" href="/alt.css"><link rel="alternate icon" href="/i.svg">""",
        {},
        ["/p2", "/p0", "/de"],
    ),
    ("script is not markup", '<script>var s = "<a href=/no>";</script><a href="/yes">', {}, ["/yes"]),
    ("comment is not a link", '<!-- <a href="/nope"> --><a href="/yes">', {}, ["/yes"]),
    ("noscript links are links", '<noscript><a href="/ns">no js</a></noscript>', {}, ["/ns"]),
    ("template content is inert", '<template><a href="/tpl"></a></template>', {}, []),
    # frames
    (
        "frames",
        """<frameset><frame src="top.html"><frameset><frame src="/left.html"><frame src="right.html">
        </frameset><noframes><a href="/nf">raw text, not markup</a></noframes></frameset>""",
        {},
        ["/dir/top.html", "/left.html", "/dir/right.html"],
    ),
    ("iframe", '<iframe src="/embed"></iframe><iframe></iframe>', {}, ["/embed"]),
    # <base href>
    ("absolute base", '<base href="http://cdn.example/b/"><a href="x">', {}, ["http://cdn.example/b/x"]),
    ("relative base", '<base href="/other/"><a href="x">', {}, ["/other/x"]),
    ("base after the link", '<a href="x"></a><base href="/late/">', {}, ["/late/x"]),
    ("first base wins", '<base href="/one/"><base href="/two/"><a href="x">', {}, ["/one/x"]),
    ("base without href", '<base target="_top"><base href="/b/"><a href="x">', {}, ["/b/x"]),
    ("script base ignored", '<base href="javascript:alert(1)"><a href="x">', {}, ["/dir/x"]),
    ("base and fragment", '<base href="/b/"><a href="#f">', {}, ["/b/"]),
    # <meta http-equiv=refresh>
    ("refresh", '<meta http-equiv="refresh" content="0; url=/r1">', {}, ["/r1"]),
    ("refresh quoted", "<meta http-equiv=REFRESH content=\"5;URL='/r2'\">", {}, ["/r2"]),
    ("refresh comma", "<meta http-equiv=refresh content='3, \"r3\"'>", {}, ["/dir/r3"]),
    ("refresh no url=", '<meta http-equiv="Refresh" content="0;/r4">', {}, ["/r4"]),
    ("refresh reload only", '<meta http-equiv="refresh" content="10">', {}, []),
    ("refresh without delay", '<meta http-equiv="refresh" content="url=/nope">', {}, []),
    ("refresh to script", '<meta http-equiv="refresh" content="0; url=javascript:x()">', {}, []),
    # rel=nofollow
    ("nofollow", '<a rel="nofollow" href="/nf"></a><a href="/f">', {}, ["/f"]),
    ("nofollow among tokens", '<a rel="external NoFollow" href="/nf"></a><area rel=nofollow href=/a>',
     {}, []),
    ("nofollow followed", '<a rel="nofollow" href="/nf">', {"follow_nofollow": True}, ["/nf"]),
    ("not the nofollow token", '<a rel="nofollowed" href="/x">', {}, ["/x"]),
    # <meta name=robots>
    ("robots nofollow", '<meta name="robots" content="nofollow"><a href="/x"></a><img src="i.png">', {}, []),
    (
        "robots nofollow keeps requisites",
        '<meta name="robots" content="nofollow"><a href="/x"></a><img src="i.png">',
        {"requisites": True},
        [("/dir/i.png", "requisite")],
    ),
    ("robots none", '<meta name=ROBOTS content="none"><a href="/x">', {}, []),
    ("robots other crawler", '<meta name="otherbot" content="nofollow"><a href="/x">', {}, ["/x"]),
    ("robots followed", '<meta name="robots" content="nofollow"><a href="/x">', {"follow_nofollow": True},
     ["/x"]),
    # page requisites
    ("requisites off", '<img src="i.png"><script src="s.js"></script><link rel=stylesheet href=s.css>',
     {}, []),
    (
        "requisites on",
        """<link rel="stylesheet" href="/s.css"><link rel="shortcut icon" href="/favicon.ico">
        <link rel="preload" href="/font.woff2" as="font"><script src="app.js"></script>
        <script>inline()</script>
        <a href="/page"><img src="i.png" srcset="i-2x.png 2x, /i-3x.png 3x"></a>
        <picture><source srcset="p.webp 1x, p2.webp 2x" type="image/webp"><img src="p.jpg"></picture>
        <video poster="/poster.jpg"><source src="/movie.mp4"></video>
        <input type="image" src="/button.png"><input type="text" src="/not-an-image.png">""",
        {"requisites": True},
        [
            ("/s.css", "requisite"),
            ("/favicon.ico", "requisite"),
            ("/font.woff2", "requisite"),
            ("/dir/app.js", "requisite"),
            ("/page", "link"),
            ("/dir/i.png", "requisite"),
            ("/dir/i-2x.png", "requisite"),
            ("/i-3x.png", "requisite"),
            ("/dir/p.webp", "requisite"),
            ("/dir/p2.webp", "requisite"),
            ("/dir/p.jpg", "requisite"),
            ("/poster.jpg", "requisite"),
            ("/movie.mp4", "requisite"),
            ("/button.png", "requisite"),
        ],
    ),
    (
        "css urls",
        """<style>@import "base.css"; @import url('print.css') print;
        .a { background: url(/bg.png) } .b { background: URL( "q.gif" ) }
        .c { background: url(data:image/png;base64,AAAA) }
        </style><div style="background-image: url('/inline.jpg')">
        <a href="/p" style="background:url(/a.png)">""",
        {"requisites": True},
        [
            ("/dir/base.css", "requisite"),
            ("/dir/print.css", "requisite"),
            ("/bg.png", "requisite"),
            ("/dir/q.gif", "requisite"),
            ("/inline.jpg", "requisite"),
            ("/p", "link"),
            ("/a.png", "requisite"),
        ],
    ),
    (
        "same URL twice: first kind wins",
        '<img src="/x.png"><a href="/x.png">',
        {"requisites": True},
        [("/x.png", "requisite")],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("html", "options", "expected"), [pytest.param(*case[1:], id=case[0]) for case in LINK_CASES])
def test_links(html: str, options: dict[str, bool], expected: list) -> None:
    assert _links(html, **options) == _expect(*expected)


@pytest.mark.parametrize(
    ("html", "nofollow", "noindex"),
    [
        ('<meta name="description" content="noindex, nofollow">', False, False),
        ('<meta name="robots" content="nofollow">', True, False),
        ('<meta name="robots" content="noindex">', False, True),
        ('<meta name="Robots" content="NOINDEX, NOFOLLOW">', True, True),
        ('<meta name="robots" content="none">', True, True),
        ('<meta name="robots" content="index,follow">', False, False),
        ('<meta name="robots" content="noindex"><meta name="robots" content="nofollow">', True, True),
        ('<meta name="googlebot" content="noindex, nofollow">', False, False),
        ('<meta name="robots">', False, False),
    ],
)
def test_robots_meta(html: str, nofollow: bool, noindex: bool) -> None:
    page = parse_html(f"<title>T</title>{html}<p>words", PAGE)
    assert (page.nofollow, page.noindex) == (nofollow, noindex)
    assert page.title == "T"
    assert page.text == ("" if noindex else "words")


def test_robots_nofollow_page_still_reports_links_when_following_nofollow() -> None:
    page = parse_html('<meta name="robots" content="nofollow"><a href="/x">', PAGE, follow_nofollow=True)
    assert page.nofollow
    assert page.links == [Link(normalize("http://example.com/x"))]


@pytest.mark.parametrize(
    ("html", "canonical"),
    [
        ('<link rel="canonical" href="/canon?id=1#frag">', "http://example.com/canon?id=1"),
        ('<base href="/b/"><link rel="CANONICAL" href="c">', "http://example.com/b/c"),
        ('<link rel="canonical" href="/one"><link rel="canonical" href="/two">', "http://example.com/one"),
        ('<link rel="canonical" href="mailto:x@example.com">', None),
        ('<link rel="canonical">', None),
        ("<p>none", None),
    ],
)
def test_canonical(html: str, canonical: str | None) -> None:
    assert parse_html(html, PAGE).canonical == (canonical and normalize(canonical))


TEXT_CASES = [
    ("entities", "<title>Caf&eacute; &amp; Bar &lt;3</title><p>a &gt; b &copy;", "Café & Bar <3", "a > b ©"),
    ("whitespace", "<title>\n  Two\t words \n</title><p>\n  one\n  two  </p>\t<p> three</p>",
     "Two words", "one two three"),
    ("no-break spaces", "<title>a&nbsp;&nbsp;b</title><p>c&nbsp; d\u3000e", "a b", "c d e"),
    ("no title", "<p>body", "", "body"),
    ("empty title", "<title> </title><p>body", "", "body"),
    ("first title", "<title>one</title><title>two</title>", "one", ""),
    ("svg title is not the page's", "<title>Page</title><body><svg><title>Icon</title></svg>x",
     "Page", "Icon x"),
    ("svg title only", "<body><svg><g><title>Icon</title></g></svg>", "", "Icon"),
    ("title in body", "<body><p>x</p><title>Late</title>", "Late", "x Late"),
    ("blocks are separated", "<p>One</p><p>Two<br>three</p><div>four</div><span>five</span>",
     "", "One Two three four five"),
    (
        "hidden contents left out",
        """<head><title>T</title><style>p { color: red }</style><script>var x = 1;</script></head>
        <body><p>seen</p><script>document.write("no")</script><noscript>nojs</noscript>
        <template><p>tpl</p></template><iframe src="/f">fallback</iframe><style>.x{}</style>
        <noembed>ne</noembed><p>also seen</p></body>""",
        "T",
        "seen also seen",
    ),
    ("head is not text", "<head><title>T</title><meta name=description content=d></head><body>b", "T", "b"),
    ("form controls", "<p>Name <input value=v> <textarea>typed</textarea> <select><option>opt</select>",
     "", "Name typed opt"),
]  # fmt: skip


@pytest.mark.parametrize(("html", "title", "text"), [pytest.param(*c[1:], id=c[0]) for c in TEXT_CASES])
def test_title_and_text(html: str, title: str, text: str) -> None:
    page = parse_html(html, PAGE)
    assert (page.title, page.text) == (title, text)


def test_title_and_text_are_capped() -> None:
    words = " ".join(f"word{n}" for n in range(60_000))
    page = parse_html(f"<title>{'t' * 5000}</title><p>{words}</p><p>{words}</p>", PAGE)
    assert page.title == "t" * MAX_TITLE
    assert len(page.text) <= MAX_TEXT
    assert len(page.text) > MAX_TEXT - 20  # cut near the cap (trailing space stripped)
    assert page.text.startswith("word0 word1 word2 ")


def test_text_cap_after_much_whitespace() -> None:
    page = parse_html("<p>start</p>" + "<p>\n\n\n</p>" * 200_000 + "<p>end</p>", PAGE)
    assert page.text == "start end"


@pytest.mark.parametrize(
    ("srcset", "urls"),
    [
        ("a.jpg", ["a.jpg"]),
        ("a.jpg 1x, b.jpg 2x", ["a.jpg", "b.jpg"]),
        ("  a.jpg   100w ,b.jpg 200w  ", ["a.jpg", "b.jpg"]),
        ("a.jpg,b.jpg", ["a.jpg,b.jpg"]),  # no space: one URL with a comma in it
        ("a.jpg, b.jpg", ["a.jpg", "b.jpg"]),
        ("a.jpg,, b.jpg", ["a.jpg", "b.jpg"]),
        ("/img?w=1,2 1x, /img?w=3 2x", ["/img?w=1,2", "/img?w=3"]),
        ("a.jpg (max-width: 1px, x) 1x, b.jpg", ["a.jpg", "b.jpg"]),
        (",,, a.jpg", ["a.jpg"]),
        ("", []),
        (" , ", []),
    ],
)
def test_srcset_urls(srcset: str, urls: list[str]) -> None:
    assert srcset_urls(srcset) == urls


@pytest.mark.parametrize(
    ("content", "url"),
    [
        ("0; url=/a", "/a"),
        ("0;URL=/a", "/a"),
        ("0; URL = /a", "/a"),
        ("5 ; url='/a b'", "/a b"),
        ('5;url="/a";junk', "/a"),
        ("3, /a", "/a"),
        ("3 /a", "/a"),
        ("0;'/a'", "/a"),
        ("1.5; url=/a", "/a"),
        (".5; url=/a", "/a"),
        ("  0  ;  url=/a  ", "/a"),
        ("0; urlx=/a", "urlx=/a"),
        ("0", None),
        ("0;", None),
        ("0; url=", None),
        ("url=/a", None),
        ("5abc; url=/a", None),
        ("", None),
    ],
)
def test_refresh_url(content: str, url: str | None) -> None:
    assert refresh_url(content) == url


MALFORMED = [
    ("unclosed tags", "<div><a href=/x>one<a href=/y>two<p>para<b>bold", ["/x", "/y"], "one two para bold"),
    ("stray end tags", "</a></p></div><a href=/x>x</b></i>", ["/x"], "x"),
    ("attribute soup", '<a href=/x"y class=a"b\'c>t</a><a =x href=/z>', ["/x%22y", "/z"], "t"),
    ("unterminated attribute", '<a href="/x>text', [], ""),
    ("NUL bytes", "<title>a\x00b</title><a href='/n\x00ul'>c\x00d</a>", ["/n%EF%BF%BDul"], "cd"),
    ("lone surrogate", "<p>a\ud800b<a href=/s>s</a>", ["/s"], None),
    ("empty document", "", [], ""),
    ("not html", '{"json": [1, 2, 3], "href": "/no"}', [], '{"json": [1, 2, 3], "href": "/no"}'),
    ("deep nesting", "<div>" * 20_000 + "<a href=/deep>deep</a>", ["/deep"], "deep"),
    ("nested frames", "<frameset>" * 50 + "<frame src=/f>" + "</frameset>" * 50, ["/f"], ""),
    ("huge attribute", f'<a href="/{"x" * 1_000_000}">x</a><a href="/ok">', [f"/{'x' * 1_000_000}", "/ok"],
     "x"),
]  # fmt: skip


@pytest.mark.parametrize(("html", "paths", "text"), [pytest.param(*c[1:], id=c[0]) for c in MALFORMED])
def test_malformed_input(html: str, paths: list[str], text: str | None) -> None:
    page = parse_html(html, PAGE)
    assert [link.url for link in page.links] == [normalize("http://example.com" + p) for p in paths]
    if text is not None:
        assert page.text == text


def test_binary_junk_does_not_break_parsing() -> None:
    junk = random.Random(7).randbytes(200_000).decode("latin-1")
    page = parse_html(junk[:100_000] + '<title>t</title><a href="/ok">' + junk[100_000:], PAGE)
    assert isinstance(page, ParsedPage)
    assert Link(normalize("http://example.com/ok")) in page.links


def test_hundred_thousand_links_stay_fast() -> None:
    html = "".join(f'<li><a href="/item/{n}">item {n}</a></li>' for n in range(100_000))
    page = parse_html(html, PAGE)
    assert len(page.links) == 100_000
    assert page.links[-1].url == normalize("http://example.com/item/99999")


def test_requisites_in_many_style_attributes_are_collected_once() -> None:
    html = '<div style="background:url(/bg.png)">x</div>' * 1000
    assert _links(html, requisites=True) == _expect(("http://example.com/bg.png", "requisite"))


BASES = [
    "http://example.com/",
    "http://example.com/a/b/page.html?x=1&y=/z/",
    "https://user:pw@example.com:8443/dir/sub/",
    "http://127.0.0.1:8080/only",
    "http://[::1]/a/?q",
]
HREFS = [
    "",
    " ",
    "?q=2",
    "#top",
    " \t?x",
    "\n#f",
    "page",
    "./page",
    "../up",
    "../../../../way/up",
    "/abs",
    "//other.org/x",
    "/",
    ".",
    "..",
    "http://example.org/x",
    "HTTPS://Example.org:443/",
    "http:relative",
    "http:/single",
    "http:?q=1",
    "http:",
    "HTTP:#f",
    "ht\ttp:?tab",
    "https:?q=1",
    "http:x?y",
    "https:\\\\back\\slash",
    "\\\\host\\x",
    " /lead-space",
    "a b",
    "%zz",
    "mailto:x@y",
    "javascript:void(0)",
    "ftp://x/",
    "é/ü",
    "/a/./b/../c",
    "?",
    "#",
    "data:,x",
]


def test_an_href_repeating_the_pages_scheme_resolves_against_the_page_itself() -> None:
    html = '<a href="http:?q=1">q</a><a href="http:">self</a><a href="HTTP:#f">frag</a>'
    for page in ("http://example.org/foo/bar", "http://example.org/foo/baz"):  # not the first page's answer
        links = [link.url for link in parse_html(html, page).links]
        assert links == [f"{page}?q=1", page]  # the page itself, with or without a fragment, is one link


@pytest.mark.parametrize("base", BASES)
def test_shared_resolution_equals_resolving_against_the_page(base: str) -> None:
    from webtrawl.errors import InvalidURL
    from webtrawl.parse.html import _normalize_shared, _resolution_base
    from webtrawl.urls import normalize

    for href in HREFS:
        try:
            expected = normalize(href, base)
        except InvalidURL:
            expected = None
        try:
            shared = _normalize_shared(href, _resolution_base(href, base))
        except InvalidURL:
            shared = None
        assert shared == expected, (href, base)
