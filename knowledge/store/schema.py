"""The index's schema as numbered migrations (applied and recorded by knowledge.store.migrations).

The FTS5 table holds the *analysed* text (see ``knowledge.store.analysis``) under the ``ascii``
tokenizer, so SQLite indexes exactly the terms kb's analyzer produced, for every language.

A file made before migrations were recorded (its ``meta`` said ``schema_version`` 1) is adopted as it
is: see :func:`adopt`.
"""

from __future__ import annotations

import sqlite3

from knowledge.store.migrations import Migration, statements
from knowledge.store.notes import has_dates


def m001_tables(db: sqlite3.Connection) -> None:
    """Documents, chunks, their FTS5 table and term counts, ingest records, summaries, vectors."""
    # IF NOT EXISTS: adopt() runs it on a file an older kb made, to add only the tables it lacks.
    statements(
        db,
        """
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS documents (
            id TEXT PRIMARY KEY,
            raw_path TEXT NOT NULL UNIQUE,
            title TEXT NOT NULL,
            source_name TEXT NOT NULL,
            source_url TEXT,
            source_snapshot TEXT,
            source_sha256 TEXT NOT NULL,
            converter TEXT NOT NULL,
            raw_sha256 TEXT NOT NULL,
            chunk_count INTEGER NOT NULL,
            indexed_at TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS documents_source_sha256 ON documents (source_sha256);
        CREATE TABLE IF NOT EXISTS chunks (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            token_count INTEGER NOT NULL,
            text TEXT NOT NULL,
            text_sha256 TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS chunks_document ON chunks (document_id, seq);
        CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (title, body, tokenize = 'ascii');
        -- How many chunks contain each term (title or body), kept in step with chunks_fts: FTS5's own
        -- vocabulary table counts by walking a term's whole posting list, far too slow per query.
        CREATE TABLE IF NOT EXISTS term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS ingests (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL,
            sha256 TEXT,
            status TEXT NOT NULL CHECK (status IN ('indexed', 'duplicate', 'failed', 'removed')),
            doc_id TEXT,
            chunks INTEGER,
            duplicate_of TEXT,
            stage TEXT,
            error TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS ingests_sha256 ON ingests (sha256);
        -- A document's summary, made by the daemon (the model's, or its opening sentences while the
        -- model is down: kind 'excerpt'), for the raw text it was made from. It goes with its document.
        CREATE TABLE IF NOT EXISTS summaries (
            document_id TEXT PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
            raw_sha256 TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('model', 'excerpt')),
            language TEXT NOT NULL,
            text TEXT NOT NULL,
            made_at TEXT NOT NULL
        );
        -- One vector per chunk for search by meaning, written after the chunk's lexical commit by
        -- whoever embeds (see knowledge.retrieval.vectors). The model name says which vector space it is in.
        CREATE TABLE IF NOT EXISTS chunk_vectors (
            rowid INTEGER PRIMARY KEY REFERENCES chunks (rowid) ON DELETE CASCADE,
            model TEXT NOT NULL,
            lang TEXT NOT NULL,  -- the chunk's script group (see knowledge.text.language_group)
            vec BLOB NOT NULL
        );
        -- Vectors of kb's background passages (knowledge.retrieval.background) for each model: never
        -- searched. They stand for unrelated text when the knowledge base is small.
        CREATE TABLE IF NOT EXISTS background_vectors (
            model TEXT NOT NULL,
            seq INTEGER NOT NULL,
            version TEXT NOT NULL,  -- which set of passages (a hash of their texts)
            lang TEXT NOT NULL,
            vec BLOB NOT NULL,
            PRIMARY KEY (model, seq)
        );
        """,
    )


# Every vector row written gets a stamp greater than the vector epoch of any snapshot taken
# before it was written: the epoch at that moment plus one (the writing transaction bumps the
# epoch, before or after its rows). Triggers rather than code at each INSERT, so that every
# writer stamps, even a kb from before stamps writing to a file this version has opened once.
_STAMP = "(SELECT COALESCE(max(CAST(value AS INTEGER)), 0) + 1 FROM meta WHERE key = 'vector_epoch')"
_VECTOR_STAMPS = (
    "CREATE INDEX IF NOT EXISTS chunk_vectors_stamp ON chunk_vectors (model, stamp)",
    "CREATE TRIGGER IF NOT EXISTS chunk_vectors_stamp_insert AFTER INSERT ON chunk_vectors BEGIN"
    f" UPDATE chunk_vectors SET stamp = {_STAMP} WHERE rowid = NEW.rowid; END",
    "CREATE TRIGGER IF NOT EXISTS chunk_vectors_stamp_update AFTER UPDATE OF rowid, model, lang, vec"
    f" ON chunk_vectors BEGIN UPDATE chunk_vectors SET stamp = {_STAMP} WHERE rowid = NEW.rowid; END",
)


def m002_vector_stamps(db: sqlite3.Connection) -> None:
    """Each vector row's stamp (rows written before it: 0), its index and the triggers that set it
    (see Index.vector_changes). A reader trusts stamps once the triggers exist (has_vector_stamps)."""
    # The column may be there without the triggers: a file an older kb began, stopped before them.
    if not any(name == "stamp" for _, name, *_ in db.execute("PRAGMA table_info(chunk_vectors)")):
        db.execute("ALTER TABLE chunk_vectors ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0")
    for statement in _VECTOR_STAMPS:
        db.execute(statement)


def m003_use_vectors(db: sqlite3.Connection) -> None:
    """The second embedder's vectors (the multilingual Universal Sentence Encoder), one per chunk text and
    model, with the script of the text (see knowledge.store.use_vectors); chunks found by their text."""
    # IF NOT EXISTS: a file adopted without its migrations table may hold them already.
    statements(
        db,
        """
        CREATE TABLE IF NOT EXISTS use_vectors (
            text_sha256 TEXT NOT NULL,
            model TEXT NOT NULL,
            script TEXT NOT NULL,  -- as knowledge.retrieval.second.script_of tells it ('' : not one it knows)
            vec BLOB NOT NULL,
            PRIMARY KEY (text_sha256, model)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS chunks_text_sha256 ON chunks (text_sha256)
        """,
    )


def m004_source_files(db: sqlite3.Connection) -> None:
    """What kb knows of each file in the owner's folder sources (knowledge.sources): its size, mtime and
    SHA-256 when last read, its document, or why it is skipped or failed. A source's file is keyed by
    (source, path relative to the source), never by where the source is."""
    # IF NOT EXISTS: a file adopted without its migrations table may hold them already.
    statements(
        db,
        """
        CREATE TABLE IF NOT EXISTS source_files (
            source TEXT NOT NULL,
            path TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            sha256 TEXT,
            status TEXT NOT NULL CHECK (status IN ('indexed', 'skipped', 'failed')),
            doc_id TEXT,
            reason TEXT,
            message TEXT,
            checked_at TEXT NOT NULL,
            PRIMARY KEY (source, path)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS source_files_sha256 ON source_files (source, sha256)
        """,
    )


def m005_notes(db: sqlite3.Connection) -> None:
    """A note's aliases, description, tags and links (knowledge.store.notes), its tags also one a row by
    their folded form (a search kept to a tag). The notes of folder sources are read again at the next
    scan (their records forget the hash read), so the notes indexed before get theirs."""
    statements(
        db,
        """
        CREATE TABLE IF NOT EXISTS document_notes (
            document_id TEXT PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
            aliases TEXT NOT NULL,  -- JSON list
            description TEXT NOT NULL,
            tags TEXT NOT NULL,  -- JSON list, as written
            links TEXT NOT NULL,  -- JSON list of the targets of links and embeds
            heading TEXT  -- title, aliases, description: read beside the first passage (None: the title)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS document_tags (
            key TEXT NOT NULL,  -- knowledge.text.tag_key of the tag
            document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
            tag TEXT NOT NULL,  -- as the note writes it
            PRIMARY KEY (key, document_id)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS document_tags_document ON document_tags (document_id);
        UPDATE source_files SET sha256 = NULL, mtime_ns = -1 WHERE status = 'indexed' AND (
            lower(path) LIKE '%.md' OR lower(path) LIKE '%.markdown' OR lower(path) LIKE '%.mdown'
            OR lower(path) LIKE '%.mkd' OR lower(path) LIKE '%.mkdn')
        """,
    )


def m006_source_url(db: sqlite3.Connection) -> None:
    """Documents found by the URL they were imported from: a page imported again replaces its earlier
    version (knowledge.ingest.pipeline)."""
    db.execute("CREATE INDEX IF NOT EXISTS documents_source_url ON documents (source_url)")


def m007_note_dates(db: sqlite3.Connection) -> None:
    """A note's front-matter dates (date, created, updated; a JSON object). The folder sources' notes are
    read again at the next scan so the notes indexed before get theirs (their vectors are kept). A file that
    holds the column already (its migrations' record lost) keeps it."""
    if not has_dates(db):
        db.execute("ALTER TABLE document_notes ADD COLUMN dates TEXT NOT NULL DEFAULT '{}'")
    statements(
        db,
        """
        UPDATE source_files SET sha256 = NULL, mtime_ns = -1 WHERE status = 'indexed' AND (
            lower(path) LIKE '%.md' OR lower(path) LIKE '%.markdown' OR lower(path) LIKE '%.mdown'
            OR lower(path) LIKE '%.mkd' OR lower(path) LIKE '%.mkdn')
        """,
    )


# The meta key of a repair the writer owes the file: pages imported more than once before m006, each
# import its own document (knowledge.ingest.duplicates keeps the newest, puts the others in the trash).
WEB_DUPLICATES = "web_duplicates"
DUPLICATE_URLS = (
    "SELECT source_url FROM documents WHERE source_url IS NOT NULL AND raw_path LIKE 'raw/%'"
    " GROUP BY source_url HAVING count(*) > 1"
)


def m008_web_duplicates(db: sqlite3.Connection) -> None:
    """A page imported again before m006 was a second document: the file owes the writer a repair, done
    once, outside this transaction (raw files move to the trash): noted in ``meta`` when there is any."""
    if db.execute(DUPLICATE_URLS + " LIMIT 1").fetchone() is not None:
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, 'to-merge')", (WEB_DUPLICATES,))


MIGRATIONS: tuple[Migration, ...] = (
    m001_tables, m002_vector_stamps, m003_use_vectors, m004_source_files, m005_notes, m006_source_url,
    m007_note_dates, m008_web_duplicates,
)  # fmt: skip


def adopt(db: sqlite3.Connection) -> int:
    """How many migrations a file without recorded ones already holds: none for a new file; for one made
    before migrations were recorded, the tables (any an older kb did not make are added now) and the
    vector stamps when its triggers exist. Its ``schema_version`` goes: the migrations table says it."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
        return 0
    m001_tables(db)
    db.execute("DELETE FROM meta WHERE key = 'schema_version'")
    return 2 if has_vector_stamps(db) else 1


def has_vector_stamps(db: sqlite3.Connection) -> bool:
    """Whether every vector row written to this file is stamped (its last trigger exists)."""
    return (
        db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'chunk_vectors_stamp_update'"
        ).fetchone()
        is not None
    )
