"""Ingest: the pipeline from a source file to raw Markdown and indexed chunks, and its file safety."""
