# Everything runs from a local virtualenv in .venv, created on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint bench bench-floors bench-frontier bench-redis bench-scale bench-media bench-stream bench-recrawl bench-render screenshots clean

$(STAMP): pyproject.toml src/webtrawl/parse/_simhash.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)  ## generate a local site, serve it, crawl it with live progress, then open its dashboard
	$(PY) -m tests.sites.demo

# Two test processes, each given whole files (module fixtures are built once): most tests wait on sockets,
# timers and child processes, so two run in about half the time of one on a 2-core machine.
PYTEST := $(PY) -m pytest -q -n 2 --dist loadfile

test: $(STAMP)  ## the whole test suite, slow end-to-end tests included
	$(PY) -m ruff check src tests benchmarks
	$(PYTEST)

test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

lint: $(STAMP)  ## what a reviewer checks: ruff, formatting, types (mypy) and the import rules (.importlinter)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m mypy
	$(VENV)/bin/lint-imports --no-cache

bench: $(STAMP)  ## crawl a 20,000-page site served by nginx, with webtrawl, Scrapy, wget and wget2; print figures and webtrawl's CPU by stage
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/crawl_bench.py

bench-floors: $(STAMP)  ## what a benchmark page costs in the libraries alone (aiohttp, lexbor, SQLite, FTS5 …), beside the newest `make bench` stages
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/floors_bench.py

bench-redis: $(STAMP)  ## the same site crawled embedded and distributed on Redis; print what Redis costs
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/redis_bench.py

bench-scale: $(STAMP)  ## does a distributed crawl grow with its machines: 1, 2, 4 workers; synthetic nodes on one Redis and a 3-master Cluster
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/scale_bench.py

bench-frontier: $(STAMP)  ## a crawl of an endless site that discovers about a million URLs: its peak memory, per URL
	$(PY) benchmarks/frontier_bench.py

bench-media: $(STAMP)  ## a 200 MB file from nginx: webtrawl's download vs curl, resumed, and in a crawl
	$(PY) benchmarks/media_bench.py

bench-stream: $(STAMP)  ## a 200 MB HLS stream (2 s segments) from nginx: webtrawl vs ffmpeg, and killed halfway and resumed
	$(PY) benchmarks/stream_bench.py

bench-recrawl: $(STAMP)  ## the same site crawled, then re-crawled with nothing changed (304s): what a re-crawl costs
	$(PY) benchmarks/recrawl_bench.py

bench-render: $(STAMP)  ## the JS site and 1,000 pages rendered and not, then 5,000 rendered: speed, CPU, memory
	$(PY) benchmarks/render_bench.py --pages 1000 --long 5000

screenshots: $(STAMP)  ## crawl the demo site and save the dashboard pictures of the README into docs/
	$(PY) docs/screenshots.py

clean:
	rm -rf $(VENV) demo-out benchmarks/out .pytest_cache
