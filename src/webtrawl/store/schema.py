"""The crawl database's schema, as numbered migrations applied in order (`PRAGMA user_version`).

One file, `DIR/crawl.db`, holds every crawl of a directory, each row tagged with its crawl's id:
- `crawls`: one row per named crawl, with its identity (compared on resume) and the hosts its seeds
  redirected to (they join the scope).
- `hosts`: host keys, so the frontier's rows carry a small integer.
- `urls`: the frontier, one row per URL ever accepted, keyed by fingerprint; `added_seq` and `claim_seq`
  place each URL's discovery (at its current depth) and hand-out on one sequence, so the breadth-first
  property can be checked after the fact.
- `captures`: one row per fetch; the search text lives here once, indexed by the external-content FTS5
  table `captures_fts`. The index follows the captures in chunks (`store.index.index_text`), because
  FTS5 indexes a thousand documents in one statement ~3.5x cheaper than one small batch at a time;
  `fts_progress.upto` is the last capture id indexed, and the triggers keep indexed rows in step.
  A distributed crawl's rows also name the node that fetched them (it holds their WARC file) and the
  stream entry they came from (`ingest_key`, unique within a crawl, so an entry read twice is written
  once: see `store.ingest`); an embedded crawl leaves both NULL.
- `links`: edges between fingerprints (the link graph; in-links are found through `links_dst`).
- `dropped`: URLs the scope refused, each once with the first reason (a URL later accepted at a
  smaller depth is in `urls` too, and reports leave it out).
- `warc_files`: each WARC file's committed end; on resume every file is cut back to it.

Never edit a migration that has shipped: add a new one.
"""

from __future__ import annotations

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
)
