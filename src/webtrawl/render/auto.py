"""`--render auto`: which served pages look built by script, so a mostly static site pays for the browser only
where it must.

A page is rendered when it has a script and one of these: an empty application root (`#app`, `#root`,
`#__next`, `#__nuxt`, `#___gatsby`, `app-root`, `[data-reactroot]`, `[ng-app]`, `[ng-version]`); a
`<noscript>` that asks for JavaScript; no link to a page of its own host. A page without a script is never
rendered: there is nothing to run.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from ..errors import InvalidURL
from ..urls import host_key, normalize

APP_ROOTS = "#app, #root, #__next, #__nuxt, #___gatsby, app-root, [data-reactroot], [ng-app], [ng-version]"


def looks_scripted(html: str, url: str) -> str | None:
    """Why the page looks built by script ("empty app root", "noscript", "no links"), or None."""
    tree = LexborHTMLParser(html)
    if tree.css_first("script") is None:
        return None
    for root in tree.css(APP_ROOTS):
        if next(root.iter(), None) is None and not (root.text(deep=True) or "").strip():
            return "empty app root"
    for noscript in tree.css("noscript"):
        if "javascript" in (noscript.text(deep=True) or "").lower():
            return "noscript"
    own = host_key(url)
    base_node = tree.css_first("base[href]")
    base = (base_node.attributes.get("href") if base_node is not None else None) or url
    for anchor in tree.css("a[href]"):
        href = anchor.attributes.get("href") or ""
        try:
            if host_key(normalize(href, normalize(base, url))) == own:
                return None
        except InvalidURL:
            continue
    return "no links"
