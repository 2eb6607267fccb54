"""The index and its ranking: analysis, the SQLite store, chunk vectors, embedders, hybrid search."""
