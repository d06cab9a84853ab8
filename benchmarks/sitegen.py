"""Generate a large, deterministic static web site for crawl benchmarks.

The site is shaped so that a crawl of it exercises what a real one does, and so that its result can be
checked: every public page is reachable from `/` and sits at a known depth (≤ 8), each page is about
20 KB of ordinary markup with about 40 same-host links (mostly relative, some absolute-path, a few with
fragments), a `/private/` directory is linked from every page but disallowed by `robots.txt`, and a few
links go to other hosts. `manifest.json` lists the URL paths a polite same-host crawler must fetch.

Page levels grow geometrically (1, 8, ~23, ~67, …), and every link points at most one level deeper than
its page, so a page's breadth-first depth is exactly its level. Text comes from a pool of paragraphs built
once from a seeded vocabulary: drawing words one by one for 400 MB of pages would take far longer than
writing them.

    python benchmarks/sitegen.py --pages 20000 --out benchmarks/out/site --seed 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 8
SECTIONS = ("news", "guides", "reference", "blog", "archive", "products", "community", "about")
LINKS_PER_PAGE = 40
PAGE_BYTES = 20_000
PRIVATE_DIR = "/private/"
ROBOTS_TXT = f"# Members-only pages are not for crawlers.\nUser-agent: *\nDisallow: {PRIVATE_DIR}\n"
EXTERNAL_HOSTS = ("www.example.org", "docs.example.com", "cdn.example.net")
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:0 auto;max-width:52rem;line-height:1.5}"
    "nav a{margin-right:.8rem}header,footer{padding:1rem 0;border-bottom:1px solid #ddd}"
    "footer{border-top:1px solid #ddd;font-size:.9rem}.crumbs{font-size:.85rem}"
)


@dataclass(frozen=True)
class SitePlan:
    """Where every page lives and what it links to, before any markup is written.

    Public pages are numbered in breadth-first order (index 0 is `/`), so the pages of level L are the
    index range `level_start[L]:level_start[L + 1]`. Private pages follow the public ones.
    """

    paths: list[str]
    titles: list[str]
    levels: list[int]
    parents: list[int]
    level_start: list[int]
    public_count: int

    @property
    def public_paths(self) -> list[str]:
        return self.paths[: self.public_count]

    @property
    def private_paths(self) -> list[str]:
        return self.paths[self.public_count :]


def level_sizes(public: int, depth: int = MAX_DEPTH, first: int = len(SECTIONS)) -> list[int]:
    """Sizes of levels 0..depth summing to `public`: one root, `first` sections, then geometric growth."""
    first = max(1, min(first, (public - 1) // depth))
    if public < depth + 1:
        raise ValueError(f"a site of depth {depth} needs at least {depth + 1} public pages")
    low, high = 0.5, 64.0
    for _ in range(60):  # bisection on the growth ratio
        ratio = (low + high) / 2
        sizes = [1] + [max(1, round(first * ratio**k)) for k in range(depth)]
        low, high = (ratio, high) if sum(sizes) < public else (low, ratio)
    sizes = [1] + [max(1, round(first * low**k)) for k in range(depth)]
    sizes[-1] += public - sum(sizes)
    while sizes[-1] < 1:  # rounding overshot: take pages back from the widest inner levels
        widest = max(range(1, depth), key=sizes.__getitem__)
        sizes[widest] -= 1
        sizes[-1] += 1
    return sizes


def make_vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    """Pronounceable pseudo-words, so text looks like text to parsers and compressors alike."""
    onsets = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z")
    onsets += ("br", "cl", "dr", "fl", "gr", "pl", "st", "tr", "sh", "ch", "th")
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
    codas = ["", "", "n", "r", "s", "t", "l", "nd", "st", "ck"]
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.choice((1, 2, 2, 3, 3, 4))
        parts = (rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syllables))
        words.add("".join(parts))
    return sorted(words)


def make_paragraphs(rng: random.Random, vocab: list[str], count: int = 1200) -> list[str]:
    paragraphs = []
    for _ in range(count):
        sentences = []
        for _ in range(rng.randint(3, 7)):
            words = rng.choices(vocab, k=rng.randint(7, 18))
            sentences.append(" ".join(words).capitalize() + ".")
        paragraphs.append(" ".join(sentences))
    return paragraphs


def plan_site(pages: int, rng: random.Random, vocab: list[str]) -> SitePlan:
    """Lay out `pages` HTML pages: about 1 in 200 private (plus their index), the rest public."""
    private = max(2, pages // 200)
    public = pages - private - 1
    sizes = level_sizes(public)
    level_start = [0]
    for size in sizes:
        level_start.append(level_start[-1] + size)
    topics = rng.sample(vocab, 12)
    titles = [" ".join(rng.choices(vocab, k=rng.randint(2, 5))).title() for _ in range(pages)]
    paths, levels, parents, sections = ["/"], [0], [-1], [""]
    for level in range(1, len(sizes)):
        above_start, above_size = level_start[level - 1], sizes[level - 1]
        for j in range(sizes[level]):
            index = level_start[level] + j
            parent = above_start + j * above_size // sizes[level]
            if level == 1:
                section = SECTIONS[j % len(SECTIONS)] + ("" if j < len(SECTIONS) else str(j))
                path = f"/{section}/"
            else:
                section = sections[parent]
                slug = titles[index].split(" ", 1)[0].lower()
                path = f"/{section}/{topics[index % len(topics)]}/{slug}-{index:05d}.html"
            paths.append(path)
            levels.append(level)
            parents.append(parent)
            sections.append(section)
    paths.append(PRIVATE_DIR)
    for k in range(private):
        slug = titles[public + 1 + k].split(" ", 1)[0].lower()
        paths.append(f"{PRIVATE_DIR}{slug}-{k:04d}.html")
    levels += [1] * (private + 1)
    parents += [0] * (private + 1)
    return SitePlan(paths, titles, levels, parents, level_start, public)


def href(source: str, target: str, roll: float) -> str:
    """A link from `source` to `target` in one of the forms real pages use, mostly relative.

    `roll` (uniform in [0, 1)) picks the form. `posixpath.relpath` would do, but costs 25 µs a link.
    """
    if roll < 0.22:
        return target
    if roll < 0.27:
        return f"{target}#part-{int(roll * 1000) % 4 + 1}"
    base = source.split("/")[1:-1]
    parts = target.split("/")[1:]
    name = parts.pop()
    common = 0
    while common < len(base) and common < len(parts) and base[common] == parts[common]:
        common += 1
    rel = "../" * (len(base) - common) + "".join(part + "/" for part in parts[common:]) + name
    if not rel:
        return "./"
    return f"./{rel}" if roll > 0.95 and not rel.startswith(".") else rel


class PageWriter:
    """Renders pages of a plan; one instance per generation run, deterministic from its generator."""

    def __init__(self, plan: SitePlan, rng: random.Random, paragraphs: list[str]) -> None:
        self.plan = plan
        self.rng = rng
        self.paragraphs = paragraphs
        self.children: list[list[int]] = [[] for _ in plan.paths]
        for index in range(1, plan.public_count):
            self.children[plan.parents[index]].append(index)
        sections = range(plan.level_start[1], plan.level_start[2])
        self.nav = "".join(f'<a href="{plan.paths[i]}">{plan.titles[i]}</a>' for i in (0, *sections))

    def link(self, source: str, target: int) -> str:
        plan = self.plan
        return f'<a href="{href(source, plan.paths[target], self.rng.random())}">{plan.titles[target]}</a>'

    def targets(self, index: int) -> list[int]:
        """Same-host links besides the navigation bar: breadcrumb, children, then random ones.

        Random targets never lie more than one level deeper, which keeps each page's depth its level.
        """
        plan, rng = self.plan, self.rng
        crumbs = []
        ancestor = plan.parents[index] if index < plan.public_count else -1
        while ancestor > 0 and plan.levels[ancestor] > 1:
            crumbs.append(ancestor)
            ancestor = plan.parents[ancestor]
        if index >= plan.public_count:  # private pages: links back into the public site
            horizon = plan.public_count
        else:
            horizon = plan.level_start[min(plan.levels[index] + 2, len(plan.level_start) - 1)]
        fixed = crumbs[::-1] + self.children[index]
        if index == plan.public_count:  # the private index lists every private page
            fixed = list(range(index + 1, len(plan.paths)))
        extra = max(12, LINKS_PER_PAGE - 10 - len(fixed))
        chosen = fixed + [rng.randrange(horizon) for _ in range(extra)]
        if index < plan.public_count and rng.random() < 0.1:
            chosen.append(rng.randrange(plan.public_count + 1, len(plan.paths)))
        return chosen

    def render(self, index: int) -> str:
        plan, rng, pool = self.plan, self.rng, self.paragraphs
        path, title = plan.paths[index], plan.titles[index]
        targets = self.targets(index)
        head = (
            f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta name="description" content="{pool[index % len(pool)][:150]}">\n'
            f"<style>{STYLE}</style>\n</head>\n<body>\n"
            f'<header><a class="logo" href="/">Example Site</a><nav>{self.nav}</nav></header>\n'
            f'<main>\n<h1 id="top">{title}</h1>\n'
        )
        parts = [head]
        size = len(head) + 900
        target_size = PAGE_BYTES + rng.randint(-3000, 3000)
        links = iter(targets)
        for number in range(1, 1000):
            if number % 5 == 1:
                heading = pool[rng.randrange(len(pool))].split(".", 1)[0][:60]
                parts.append(f'<h2 id="part-{number // 5 + 1}">{heading}</h2>\n')
            target = next(links, None)
            more = f" See {self.link(path, target)}." if target is not None else ""
            paragraph = f"<p>{pool[rng.randrange(len(pool))]}{more}</p>\n"
            parts.append(paragraph)
            size += len(paragraph)
            if size >= target_size:
                break
        related = "".join(f"<li>{self.link(path, t)}</li>" for t in links)
        host = EXTERNAL_HOSTS[index % len(EXTERNAL_HOSTS)]
        parts.append(
            f'<ul class="related">{related}</ul>\n</main>\n<footer><p><a href="#top">Back to top</a> · '
            f'<a href="{PRIVATE_DIR}">Members area</a> · <a href="https://{host}/">Partner site</a> · '
            f'<a href="mailto:webmaster@example.org">Contact</a></p></footer>\n</body>\n</html>\n'
        )
        return "".join(parts)


def generate(out: Path, pages: int = 20_000, seed: int = 1) -> dict[str, object]:
    """Write the site and its manifest into `out` (created if needed) and return the manifest."""
    rng = random.Random(seed)
    vocab = make_vocabulary(rng)
    plan = plan_site(pages, rng, vocab)
    writer = PageWriter(plan, rng, make_paragraphs(rng, vocab))
    made: set[str] = set()
    for index, path in enumerate(plan.paths):
        file = out / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))
        if file.parent not in made:
            os.makedirs(file.parent, exist_ok=True)
            made.add(file.parent)
        file.write_bytes(writer.render(index).encode())
    (out / "robots.txt").write_text(ROBOTS_TXT)
    manifest = {
        "seed": seed,
        "html_pages": len(plan.paths),
        "max_depth": len(plan.level_start) - 2,
        "level_sizes": [b - a for a, b in zip(plan.level_start, plan.level_start[1:], strict=False)],
        "disallowed": plan.private_paths,
        "pages": plan.public_paths,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000, help="HTML pages in all (default 20000)")
    parser.add_argument("--out", type=Path, required=True, help="directory to write the site into")
    parser.add_argument("--seed", type=int, default=1, help="same seed, same site (default 1)")
    args = parser.parse_args()
    if args.pages < 20:
        parser.error("--pages must be at least 20")
    started = time.perf_counter()
    manifest = generate(args.out, args.pages, args.seed)
    print(
        f"{manifest['html_pages']} pages ({len(manifest['pages'])} public, {len(manifest['disallowed'])} "
        f"disallowed), levels {manifest['level_sizes']}, in {time.perf_counter() - started:.1f} s "
        f"→ {args.out}"
    )


if __name__ == "__main__":
    main()
