"""Generating the test site: page drafts, the tree of pages, and turning drafts into routes.

Everything random comes from one `random.Random(seed)` consumed in a fixed order, so a seed (and port)
always gives the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .routes import Href, Route, render_html

SPINE = 7
"""Pages 1..SPINE form a chain that nothing else links into, so the site is always at least this deep."""


@dataclass(slots=True)
class Draft:
    """A page under construction: links can be added until the site is rendered."""

    path: str
    links: list[Href] = field(default_factory=list)
    gzip: bool = False
    chunked: bool = False
    meta_nofollow: bool = False
    base: str | None = None

    def link(self, href: Href) -> Draft:
        self.links.append(href)
        return self


class Builder:
    """Collects drafts and fixed routes, then renders the drafts, numbering pages in the order drafted."""

    def __init__(self, origin: str, rng: random.Random) -> None:
        self.origin = origin
        self.rng = rng
        self.drafts: dict[str, Draft] = {}
        self.routes: dict[str, Route] = {}

    def href(self, href: str, target: str, *, nofollow: bool = False) -> Href:
        """A link written as `href` that resolves to `target` (a path on this site, or an absolute URL)."""
        return Href(href, self.origin + target if target.startswith("/") else target, nofollow)

    def draft(
        self,
        path: str,
        *,
        gzip: bool = False,
        chunked: bool = False,
        meta_nofollow: bool = False,
        base: str | None = None,
    ) -> Draft:
        draft = self.drafts[path] = Draft(path, [], gzip, chunked, meta_nofollow, base)
        return draft

    def redirect(self, path: str, status: int, location: str, target: str) -> None:
        """Serve `path` as a `status` redirect with header `location`, which resolves to `target`."""
        body = b"<!doctype html><title>Moved</title><p>Moved.</p>\n"
        self.routes[path] = Route(status, body=body, redirect=self.href(location, target))

    def render(self) -> dict[str, tuple[str, str]]:
        """Render every draft into `routes`; return path → (title, unique word) of each page."""
        rng = self.rng
        vocabulary = _vocabulary(rng)
        texts = {}
        for number, (path, draft) in enumerate(self.drafts.items()):
            title = f"Page {number} — {rng.choice(vocabulary)} {rng.choice(vocabulary)}"
            word = f"zq{number}{rng.choice(vocabulary)}"
            words = rng.choices(vocabulary, k=24)
            words.insert(rng.randrange(len(words) + 1), word)
            self.routes[path] = Route(
                200,
                body=render_html(
                    title, " ".join(words), draft.links, meta_nofollow=draft.meta_nofollow, base=draft.base
                ),
                links=tuple(draft.links),
                meta_nofollow=draft.meta_nofollow,
                gzip=draft.gzip,
                chunked=draft.chunked,
            )
            texts[path] = (title, word)
        return texts


def build_tree(builder: Builder, n: int) -> list[Draft]:
    """Draft `n` tree pages ("/" and "/pI/.../" below it); return shallow off-spine pages for special links.

    Each page links home ("/"), up ("../"), to its children (some twice, written another way), and to its
    next sibling; a few shallow pages cross-link to deep pages, making shorter paths to them. The spine is
    kept out of all of that so its last page stays SPINE deep.
    """
    rng, origin = builder.rng, builder.origin
    parents = [0] * n
    paths = ["/"] * n
    children: list[list[int]] = [[] for _ in range(n)]
    for i in range(1, n):
        parent = i - 1 if i <= SPINE else (j + SPINE if (j := rng.randrange(i - SPINE)) else 0)
        parents[i] = parent
        paths[i] = f"{paths[parent]}p{i}/"
        children[parent].append(i)
    drafts = [builder.draft(paths[i], gzip=i % 4 == 1, chunked=i % 6 == 3) for i in range(n)]
    for i, draft in enumerate(drafts):
        draft.link(builder.href("/", "/"))
        if i:
            draft.link(builder.href("../", paths[parents[i]]))
        for c in children[i]:
            draft.link(builder.href(f"p{c}/", paths[c]))
            if rng.random() < 0.35:
                variants = _variants(origin, f"p{c}/", paths[c])
                draft.link(builder.href(variants[rng.randrange(len(variants))], paths[c]))
        siblings = children[parents[i]]
        if i > SPINE and siblings[-1] != i:
            after = siblings[siblings.index(i) + 1]
            draft.link(builder.href(f"../p{after}/", paths[after]))
    shallow = [i for i in range(n) if i == 0 or (i > SPINE and paths[i].count("/") <= 3)]
    deep = [i for i in range(SPINE + 1, n) if paths[i].count("/") >= 5]
    for k in range(n // 15 if deep else 0):
        source, target = rng.choice(shallow), rng.choice(deep)
        drafts[source].link(builder.href(paths[target] if k % 2 else origin + paths[target], paths[target]))
    return [drafts[i] for i in range(SPINE + 1, n) if paths[i].count("/") <= 4]


def _variants(origin: str, relative: str, path: str) -> tuple[str, ...]:
    """Other ways to write a link to a child page; each must resolve to the same URL."""
    return (
        f"{relative}#top",
        f"{relative}#",
        f"./{relative}",
        f"zz/../{relative}",
        f" {relative}\n",
        origin + path,
        "HTTP" + origin[4:] + path,
    )


def _vocabulary(rng: random.Random, size: int = 240) -> list[str]:
    """Pronounceable made-up words (never starting with "zq", the prefix of unique page words)."""
    onsets = [*"bcdfghklmnprstvw", "br", "cl", "dr", "fl", "gr", "pl", "st", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
    codas = ["", "n", "r", "l", "s", "th", "m", "nd", "rk"]
    words: dict[str, None] = {}
    while len(words) < size:
        syllables = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(2, 3)))
        words[syllables + rng.choice(codas)] = None
    return list(words)
