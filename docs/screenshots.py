"""Screenshots of the dashboard for the README: the overview, the pages list and a search, 1280x800 PNGs.

Crawls the generated test site (tests/sites, 300 pages) into a temporary directory, serves its dashboard
on a loopback port and photographs three views with Chromium, so the pictures always show the current
templates over a real crawl:

    .venv/bin/python docs/screenshots.py [--chromium /usr/bin/chromium]

The files land beside this script: overview.png, pages.png, search.png.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # the test site lives in the repository's tests package, not in webtrawl

from playwright.sync_api import sync_playwright  # noqa: E402
from tests.crawls import fast_config  # noqa: E402
from tests.sites import SiteServer  # noqa: E402

from webtrawl import Crawler  # noqa: E402
from webtrawl.web.serve import Dashboard  # noqa: E402
from webtrawl.web.site import Site  # noqa: E402

VIEWPORT = {"width": 1280, "height": 800}


async def crawl(out: Path) -> str:
    """Crawl the test site into `out`; return a word worth searching for (it is in the home page's title)."""
    async with SiteServer(pages=300) as server:
        report = await Crawler(fast_config(server.url, out, max_depth=server.site.deepest)).run()
        if report.outcome != "finished":
            raise SystemExit(f"the crawl did not finish: {report.outcome}")
        return server.site.pages["/"].title.split()[-1]


def photograph(out: Path, word: str, chromium: str) -> None:
    with Dashboard(Site(out), port=0).beside() as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--headless"])
        try:
            page = browser.new_page(viewport=VIEWPORT, base_url=server.url.rstrip("/"))
            page.goto("/")
            page.wait_for_function("document.getElementById('crawl-state')?.textContent === 'finished'")
            page.screenshot(path=DOCS / "overview.png")
            page.goto("/pages")
            page.screenshot(path=DOCS / "pages.png")
            page.goto(f"/search?q={word}")
            page.locator("#hits mark").first.wait_for()
            page.screenshot(path=DOCS / "search.png")
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium executable")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="webtrawl-screenshots-") as directory:
        out = Path(directory)
        word = asyncio.run(crawl(out))
        photograph(out, word, args.chromium)
    for name in ("overview", "pages", "search"):
        print(DOCS / f"{name}.png")


if __name__ == "__main__":
    main()
