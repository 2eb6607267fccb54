"""The index on disk, on the ground floor: the SQLite connection and its errors, the schema as numbered
migrations, the records, the vector table and its codec, summaries, and the analyzer that turns text into
the terms FTS5 indexes. Ingest writes through it; retrieval reads through it."""
