"""Web search: planned queries, providers (DuckDuckGo Lite, Brave), filters and import candidates."""
