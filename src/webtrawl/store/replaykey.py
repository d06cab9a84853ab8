"""Where replay tools look a request other than GET up: its URL with its method and body appended.

pywb, and the CDXJ it reads (`cdxj-indexer`), index a POST's response under its URL with
`__wb_method=POST&<the body as a query>` appended (a JSON body flattened to `key=value` pairs, a form as
sent, anything else as `__wb_post_data=<base64>`), and replay a POST by building the same key from the body
it is sent. The body is turned into that query by `cdxj-indexer`'s own code, so a crawl's index and pywb's
agree on every body they both read.
"""

from __future__ import annotations

import io

from cdxj_indexer.postquery import append_method_query


def request_query(method: str, content_type: str | None, body: bytes, url: str) -> str:
    """The query a request's body stands for in its lookup key ("" for a GET, or a method without a body)."""
    if method == "GET":
        return ""
    query, _appended = append_method_query(method, content_type, str(len(body)), io.BytesIO(body), url)
    return query or ""


def lookup_url(url: str, method: str, query: str) -> str:
    """`url` as replay looks the response to a `method` request with body `query` up: `url` itself for a GET."""
    if method == "GET":
        return url
    return f"{url}{'&' if '?' in url else '?'}__wb_method={method}{'&' + query if query else ''}"
