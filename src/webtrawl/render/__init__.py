"""Rendering pages in headless Chromium (`--render`): a page fetcher whose pages run their scripts, with every
request they make served by the crawl's own fetcher (see `renderer`)."""
