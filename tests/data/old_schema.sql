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
-- A document's summary, made by the daemon (the model's, or its opening sentences while the model is
-- down: kind 'excerpt'), for the raw text it was made from; it goes with its document.
CREATE TABLE IF NOT EXISTS summaries (
    document_id TEXT PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    raw_sha256 TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('model', 'excerpt')),
    language TEXT NOT NULL,
    text TEXT NOT NULL,
    made_at TEXT NOT NULL
);
-- One vector per chunk for search by meaning, written after the chunk's lexical commit by
-- whoever embeds (see knowledge.retrieval.vectors); the model name says which vector space it is in.
CREATE TABLE IF NOT EXISTS chunk_vectors (
    rowid INTEGER PRIMARY KEY REFERENCES chunks (rowid) ON DELETE CASCADE,
    model TEXT NOT NULL,
    lang TEXT NOT NULL,  -- the chunk's script group (see knowledge.text.language_group)
    vec BLOB NOT NULL,
    stamp INTEGER NOT NULL DEFAULT 0  -- set by the triggers below (see Index.vector_changes)
);
-- Vectors of kb's background passages (knowledge.retrieval.background) for each model: never
-- searched; they stand for unrelated text when the knowledge base is small (see vectors.py).
CREATE TABLE IF NOT EXISTS background_vectors (
    model TEXT NOT NULL,
    seq INTEGER NOT NULL,
    version TEXT NOT NULL,  -- which set of passages (a hash of their texts)
    lang TEXT NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (model, seq)
);
