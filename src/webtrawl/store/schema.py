"""The crawl database's schema, as numbered migrations applied in order (`PRAGMA user_version`).

One file, `DIR/crawl.db`, holds every crawl of a directory, each row tagged with its crawl's id:
- `crawls`: one row per named crawl, with its identity (compared on resume) and the hosts its seeds
  redirected to (they join the scope).
- `hosts`: host keys, so the frontier's rows carry a small integer.
- `urls`: the frontier, one row per URL ever accepted, keyed by fingerprint; `added_seq` and `claim_seq`
  place each URL's discovery (at its current depth) and hand-out on one sequence, so the breadth-first
  property can be checked after the fact.
- `captures`: one row per fetch; the search text lives here once, indexed by the external-content FTS5
  table `captures_fts`. The index follows the captures in chunks (`store.index.index_captures`), because
  FTS5 indexes a thousand documents in one statement ~3.5x cheaper than one small batch at a time;
  `fts_progress.upto` is the last capture id indexed, and the triggers keep indexed rows in step.
  A distributed crawl's rows also name the node that fetched them (it holds their WARC file) and the
  result they came from (`ingest_key`, unique within a crawl, so a result settled twice is written
  once: see `store.ingest`); an embedded crawl leaves both NULL.
- `links`: edges between fingerprints (the link graph), keyed by source: a page's out-links are written
  with it, together in the table's key order. `links_in` holds the same edges keyed by target, for a
  page's in-links; it follows `links` in the search index's catch-ups (`store.index.index_captures`,
  same chunks, same `fts_progress.upto`), edges sorted by target: written with each batch, the target
  index cost the writer more than anything else in a crawl (one random B-tree page per edge, 2.5 GB of
  WAL writes on a crawl of 20,000 pages with 40 links each; sorted chunks write 0.7 GB).
- `dropped`: URLs the crawl refused and has not taken, each once with the first reason. A URL in `urls`
  is never recorded (found too deep on one page, it may be in the frontier from another), and one that
  enters `urls` later (found closer, its host gained) leaves `dropped` (trigger `urls_taken`).
- `resources`: records archived outside the captures: a rendered page's requests, DOM and thumbnail
  (`page_fp` the page's; a request other than GET with its `method` and its body as replay keys it,
  `request_query`), and the robots.txt and sitemap files the crawl read (`site_file`, `page_fp` their own).
- `warc_files`: each WARC file's committed end; on resume every file is cut back to it.
- `pending_results`: where a node's shard staged the batch Redis had not yet accepted before its stage
  file (`store.shard.StageFile`) took over; read once by the next node started there, written no more.
- `crawl_live`, `crawl_control`: a running crawl's snapshot (JSON, rewritten every second) and the last
  command a dashboard gave it, so a dashboard in another process watches and steers it.

Never edit a migration that has shipped: add a new one.
"""

from __future__ import annotations

REQUESTS_SCHEMA = 14
"""The version from which `resources` has each request's method (and the refused requests their index):
readers of an older database, opened read-only and so not migrated, go without them."""

MIGRATIONS: tuple[str, ...] = (
    # 1: the embedded crawler.
    """
    CREATE TABLE crawls(
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        identity TEXT NOT NULL,
        extra_hosts TEXT NOT NULL DEFAULT '[]',
        created_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE TABLE hosts(
        id INTEGER PRIMARY KEY,
        crawl_id INTEGER NOT NULL REFERENCES crawls(id),
        host TEXT NOT NULL,
        UNIQUE(crawl_id, host)
    );
    CREATE TABLE urls(
        id INTEGER PRIMARY KEY,
        crawl_id INTEGER NOT NULL REFERENCES crawls(id),
        fp INTEGER NOT NULL,
        url TEXT NOT NULL,
        host_id INTEGER NOT NULL REFERENCES hosts(id),
        depth INTEGER NOT NULL,
        kind TEXT NOT NULL,
        referrer_fp INTEGER,
        via TEXT,
        state INTEGER NOT NULL DEFAULT 0,
        attempts INTEGER NOT NULL DEFAULT 0,
        not_before REAL NOT NULL DEFAULT 0,
        reason TEXT,
        added_seq INTEGER NOT NULL,
        claim_seq INTEGER,
        discovered_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE(crawl_id, fp)
    );
    CREATE INDEX urls_waiting ON urls(host_id, depth, id) WHERE state = 0;
    CREATE INDEX urls_state ON urls(crawl_id, state);
    CREATE TABLE captures(
        id INTEGER PRIMARY KEY,
        crawl_id INTEGER NOT NULL REFERENCES crawls(id),
        fp INTEGER NOT NULL,
        url TEXT NOT NULL,
        fetched_at REAL NOT NULL,
        status INTEGER,
        content_type TEXT NOT NULL DEFAULT '',
        size INTEGER NOT NULL DEFAULT 0,
        truncated TEXT,
        title TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL DEFAULT '',
        location TEXT,
        redirects TEXT,
        request_headers TEXT,
        response_headers TEXT,
        etag TEXT,
        last_modified TEXT,
        payload_digest TEXT,
        ip TEXT,
        ttfb REAL,
        elapsed REAL,
        warc_file TEXT,
        warc_offset INTEGER,
        warc_length INTEGER,
        error TEXT
    );
    CREATE INDEX captures_fp ON captures(crawl_id, fp, fetched_at);
    CREATE VIRTUAL TABLE captures_fts USING fts5(
        title, url, text, content='captures', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
    );
    CREATE TABLE fts_progress(upto INTEGER NOT NULL);
    INSERT INTO fts_progress VALUES (0);
    CREATE TRIGGER captures_ad AFTER DELETE ON captures WHEN old.id <= (SELECT upto FROM fts_progress) BEGIN
        INSERT INTO captures_fts(captures_fts, rowid, title, url, text)
        VALUES ('delete', old.id, old.title, old.url, old.text);
    END;
    CREATE TRIGGER captures_au AFTER UPDATE OF title, url, text ON captures
    WHEN old.id <= (SELECT upto FROM fts_progress) BEGIN
        INSERT INTO captures_fts(captures_fts, rowid, title, url, text)
        VALUES ('delete', old.id, old.title, old.url, old.text);
        INSERT INTO captures_fts(rowid, title, url, text) VALUES (new.id, new.title, new.url, new.text);
    END;
    CREATE TABLE links(
        crawl_id INTEGER NOT NULL,
        src_fp INTEGER NOT NULL,
        dst_fp INTEGER NOT NULL,
        PRIMARY KEY(crawl_id, src_fp, dst_fp)
    ) WITHOUT ROWID;
    CREATE INDEX links_dst ON links(crawl_id, dst_fp);
    CREATE TABLE dropped(
        crawl_id INTEGER NOT NULL,
        fp INTEGER NOT NULL,
        url TEXT NOT NULL,
        reason TEXT NOT NULL,
        referrer_fp INTEGER,
        PRIMARY KEY(crawl_id, fp)
    ) WITHOUT ROWID;
    CREATE TABLE warc_files(
        crawl_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        committed_end INTEGER NOT NULL,
        PRIMARY KEY(crawl_id, name)
    ) WITHOUT ROWID;
    """,
    # 2: the distributed crawl's captures, written by the coordinator from the nodes' streams.
    """
    ALTER TABLE captures ADD COLUMN node TEXT;
    ALTER TABLE captures ADD COLUMN ingest_key TEXT;
    CREATE UNIQUE INDEX captures_ingest_key ON captures(crawl_id, ingest_key) WHERE ingest_key IS NOT NULL;
    """,
    # 3: a running crawl's live snapshot and the command a dashboard gave it (see `store.live`).
    """
    CREATE TABLE crawl_live(
        crawl_id INTEGER PRIMARY KEY,
        updated_at REAL NOT NULL,
        snapshot TEXT NOT NULL
    );
    CREATE TABLE crawl_control(
        crawl_id INTEGER PRIMARY KEY,
        command TEXT NOT NULL,
        requested_at REAL NOT NULL
    );
    """,
    # 4: the dashboard's pages list (`store.browse`): one index per sort order, so every page of every order
    # is a seek in its index, however deep. Measured inserting 1M captures (1 KB of text each, 500 per
    # transaction), over the last 200k: a capture row costs 51–60 µs without them. Time and status keys grow
    # as the crawl goes, so their entries land at the end of their index: within that noise. Size and URL
    # keys land anywhere in theirs (page-cache misses once an index outgrows the cache): +30–50 µs each, so
    # the four together about double the cost of a capture row (123 µs) at a million. They take ~125 MB per
    # million captures, half of it the URL index. The status index also serves the overview's counts.
    """
    CREATE INDEX captures_time ON captures(crawl_id, fetched_at);
    CREATE INDEX captures_status ON captures(crawl_id, IFNULL(status, 0), fetched_at);
    CREATE INDEX captures_size ON captures(crawl_id, size);
    CREATE INDEX captures_url ON captures(crawl_id, url);
    """,
    # 5: media files (`store.media`), one row per media task that ended, keyed like its frontier entry.
    """
    CREATE TABLE media(
        id INTEGER PRIMARY KEY,
        crawl_id INTEGER NOT NULL REFERENCES crawls(id),
        fp INTEGER NOT NULL,
        task TEXT NOT NULL,
        page_url TEXT NOT NULL,
        url TEXT,
        kind TEXT NOT NULL DEFAULT '',
        content_type TEXT NOT NULL DEFAULT '',
        path TEXT,
        size INTEGER NOT NULL DEFAULT 0,
        sha256 TEXT,
        duplicate_of TEXT,
        title TEXT,
        artist TEXT,
        album TEXT,
        duration REAL,
        fetched_at REAL NOT NULL,
        resumes INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        node TEXT,
        UNIQUE(crawl_id, fp)
    );
    CREATE INDEX media_sha256 ON media(crawl_id, sha256) WHERE sha256 IS NOT NULL;
    """,
    # 6: keeping a crawl fresh. A URL remembers its last fetch (validators for a conditional re-fetch, the
    # digest to tell a change), its revisit schedule and its importance (OPIC cash, which orders a depth's
    # waiting URLs under `--order importance`; it stays 0 otherwise, so one index serves both orders);
    # captures say whether they brought new content and whose duplicate they are. `digests` finds the first
    # URL with a body, `simhash_bands` the candidates of a near-duplicate (see `store.fingerprints`).
    """
    ALTER TABLE urls ADD COLUMN fetched_at REAL;
    ALTER TABLE urls ADD COLUMN digest TEXT;
    ALTER TABLE urls ADD COLUMN etag TEXT;
    ALTER TABLE urls ADD COLUMN last_modified TEXT;
    ALTER TABLE urls ADD COLUMN interval REAL;
    ALTER TABLE urls ADD COLUMN next_due REAL;
    ALTER TABLE urls ADD COLUMN priority REAL NOT NULL DEFAULT 0;
    DROP INDEX urls_waiting;
    CREATE INDEX urls_waiting ON urls(host_id, depth, priority DESC, id) WHERE state = 0;
    CREATE INDEX urls_due ON urls(crawl_id, next_due) WHERE next_due IS NOT NULL;
    ALTER TABLE captures ADD COLUMN unchanged INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE captures ADD COLUMN simhash INTEGER;
    ALTER TABLE captures ADD COLUMN duplicate_of INTEGER;
    ALTER TABLE captures ADD COLUMN near_duplicate_of INTEGER;
    CREATE TABLE digests(
        crawl_id INTEGER NOT NULL,
        digest TEXT NOT NULL,
        fp INTEGER NOT NULL,
        PRIMARY KEY(crawl_id, digest)
    ) WITHOUT ROWID;
    CREATE TABLE simhash_bands(
        crawl_id INTEGER NOT NULL,
        band INTEGER NOT NULL,
        fp INTEGER NOT NULL,
        simhash INTEGER NOT NULL,
        PRIMARY KEY(crawl_id, band, fp)
    ) WITHOUT ROWID;
    """,
    # 7: what was archived with a rendered page (its requests, its DOM, its thumbnail), found by URL and time
    # when the archive replays the page (see `store.replay`).
    """
    CREATE TABLE resources(
        id INTEGER PRIMARY KEY,
        crawl_id INTEGER NOT NULL,
        page_fp INTEGER NOT NULL,
        url TEXT NOT NULL,
        target TEXT NOT NULL,
        fetched_at REAL NOT NULL,
        status INTEGER,
        content_type TEXT NOT NULL,
        warc_file TEXT NOT NULL,
        warc_offset INTEGER NOT NULL,
        warc_length INTEGER NOT NULL,
        node TEXT
    );
    CREATE INDEX resources_url ON resources(crawl_id, url, fetched_at);
    """,
    # 8: streams (HLS, DASH) collected as media tasks: the protocol, the segments joined, and a DASH
    # stream's separate audio file when it was not muxed into the main one.
    """
    ALTER TABLE media ADD COLUMN stream TEXT;
    ALTER TABLE media ADD COLUMN segments INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE media ADD COLUMN audio_path TEXT;
    """,
    # 9: the drop log holds only URLs the crawl has not taken (earlier crawls recorded a URL refused as too
    # deep on one page even when it was fetched from another).
    """
    DELETE FROM dropped WHERE EXISTS (SELECT 1 FROM urls u WHERE u.crawl_id = dropped.crawl_id AND u.fp = dropped.fp);
    CREATE TRIGGER urls_taken AFTER INSERT ON urls BEGIN
        DELETE FROM dropped WHERE crawl_id = NEW.crawl_id AND fp = NEW.fp;
    END;
    """,
    # 10: responses archived for the crawl itself (robots.txt, sitemaps) join `resources` (`site_file` 1,
    # their `page_fp` the fingerprint of their own URL); every row keeps its payload digest, which the CDXJ
    # index of the archive lists.
    """
    ALTER TABLE resources ADD COLUMN payload_digest TEXT;
    ALTER TABLE resources ADD COLUMN site_file INTEGER NOT NULL DEFAULT 0;
    """,
    # 11: in-links move from an index on `links` to a table of their own, filled in chunks (see above).
    """
    CREATE TABLE links_in(
        crawl_id INTEGER NOT NULL,
        dst_fp INTEGER NOT NULL,
        src_fp INTEGER NOT NULL,
        PRIMARY KEY(crawl_id, dst_fp, src_fp)
    ) WITHOUT ROWID;
    INSERT INTO links_in(crawl_id, dst_fp, src_fp)
    SELECT crawl_id, dst_fp, src_fp FROM links ORDER BY crawl_id, dst_fp, src_fp;
    DROP INDEX links_dst;
    """,
    # 12: the search index merges its segments 16 at a time, not 4: a fifth less CPU and writes for a crawl's
    # catch-ups (20,000 pages: 8.2 s against 10.4-11.9 s), and searches as fast (benchmarks/README.md).
    """
    INSERT INTO captures_fts(captures_fts, rank) VALUES ('automerge', 16);
    """,
    # 13: a node's shard stages each batch until Redis has accepted it (see `store.shard`).
    """
    CREATE TABLE pending_results(
        batch INTEGER NOT NULL,
        fp INTEGER NOT NULL,
        node TEXT NOT NULL,
        partition INTEGER NOT NULL,
        result BLOB NOT NULL,
        PRIMARY KEY(batch, fp)
    );
    """,
    # 14: a rendered page's request may be a POST: its method and its body as replay tools key it
    # (`store.replaykey`), so the CDXJ index names the response as pywb looks it up; a capture's detail
    # lists its page's requests, those refused too (`store.detail`): the partial index holds only the drops
    # that are requests refused, so the many a crawl records for its links cost no more to write.
    """
    ALTER TABLE resources ADD COLUMN method TEXT NOT NULL DEFAULT 'GET';
    ALTER TABLE resources ADD COLUMN request_query TEXT NOT NULL DEFAULT '';
    CREATE INDEX resources_page ON resources(crawl_id, page_fp, fetched_at);
    CREATE INDEX dropped_refused ON dropped(crawl_id, referrer_fp)
        WHERE reason IN ('robots.txt', 'private-address') OR reason LIKE 'a form sent by %'
            OR reason LIKE 'over % a page';
    """,
)
