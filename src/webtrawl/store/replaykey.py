"""Where replay tools look a request other than GET up: its URL with its method and body appended.

pywb, and the CDXJ it reads (`cdxj-indexer`), index a POST's response under its URL with
`__wb_method=POST&<the body as a query>` appended (a JSON body flattened to `key=value` pairs, a form as
sent, anything else as `__wb_post_data=<base64>`), and replay a POST by building the same key from the body
it is sent. The body is turned into that query by `cdxj-indexer`'s own code, so a crawl's index and pywb's
agree on every body they both read; a body that code cannot read (a JSON that is not, a multipart body cut
short) is keyed as pywb keys what it cannot read, and never stops a crawl.
"""

from __future__ import annotations

import base64
import io
import json

from cdxj_indexer.postquery import MAX_QUERY_LENGTH, append_method_query


def request_query(method: str, content_type: str | None, body: bytes, url: str) -> str:
    """The query a request's body stands for in its lookup key ("" for a GET, or a method without a body)."""
    if method == "GET":
        return ""
    mime = (content_type or "").lower()
    try:
        if mime.startswith("application/json") and not _is_json(body):
            return ""  # what cdxj-indexer gives it, after printing the body to stderr (which a crawl must not)
        if mime.startswith("application/x-amf"):
            # Its AMF reader prints a traceback on stdout for a body it cannot read: read as any binary body
            # (pywb keys a readable one by its decoded request, so such a POST is not found there).
            return _binary(body)
        query, _appended = append_method_query(method, content_type, str(len(body)), io.BytesIO(body), url)
    except Exception:  # a body its parsers choke on (a multipart body cut short, JSON nested too deep)
        return _binary(body)
    return query or ""


def _is_json(body: bytes) -> bool:
    """Whether cdxj-indexer reads `body` as JSON (a document, or one per line)."""
    try:
        json.loads(body)
    except ValueError:
        try:
            for line in body.split(b"\n"):
                json.loads(line)
        except ValueError:
            return False
    return True


def _binary(body: bytes) -> str:
    return f"__wb_post_data={base64.b64encode(body).decode()}"[:MAX_QUERY_LENGTH]


def lookup_url(url: str, method: str, query: str) -> str:
    """`url` as replay looks the response to a `method` request with body `query` up: `url` itself for a GET."""
    if method == "GET":
        return url
    return f"{url}{'&' if '?' in url else '?'}__wb_method={method}{'&' + query if query else ''}"
