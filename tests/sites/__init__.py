"""Local web sites to crawl in tests: generated from a seed, served on 127.0.0.1, with their ground truth.

async with SiteServer(pages=300, seed=0) as server:      # or the `site_server` pytest fixture
    crawl(server.url)
    expected = server.site.expect(max_depth=server.site.deepest)
    assert fetched_paths == expected.fetched
"""

from .model import REASONS, Expectation, Rules
from .routes import Href, Route
from .server import Request, SiteServer
from .site import PageInfo, Site

__all__ = ["REASONS", "Expectation", "Href", "PageInfo", "Request", "Route", "Rules", "Site", "SiteServer"]
