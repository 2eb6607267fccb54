"""What ``kb status`` reports: documents, chunks, tokenizer, inbox counts, recent ingests, the writer."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from knowledge.config import Settings
from knowledge.embed import EmbedderError, make_embedder
from knowledge.errors import IndexError_
from knowledge.index import Index
from knowledge.ingest import is_candidate_name
from knowledge.lock import holder
from knowledge.vectors import coverage


def status_report(settings: Settings) -> dict[str, object]:
    """What ``kb status --json`` prints (and the chat's and the bot's /status show)."""
    report: dict[str, object] = {
        "home": str(settings.home),
        "documents": 0,
        "chunks": 0,
        "tokenizer": None,
        "inbox": count_files(settings.inbox),
        "processed": count_files(settings.processed),
        "failed": count_files(settings.failed),
        "last_ingests": [],
        "writer": holder(settings.lock_path),
        "vectors": {"model": embed_model_name(settings), "vectors": 0, "chunks": 0},
    }
    if settings.index_path.exists():
        try:
            with Index(settings.index_path, readonly=True) as index:
                report["documents"] = index.document_count()
                report["chunks"] = index.chunk_count()
                report["tokenizer"] = index.meta("tokenizer")
                report["vectors"] = coverage(index, embed_model_name(settings)).to_json()
                report["last_ingests"] = [
                    {k: v for k, v in rec.__dict__.items() if v is not None} for rec in index.last_ingests(10)
                ]
        except (
            sqlite3.Error,
            IndexError_,
        ) as exc:  # being created by the daemon this very moment, or damaged
            report["index_error"] = str(exc)
    return report


def embed_model_name(settings: Settings) -> str | None:
    """The name vectors are stored under for the configured embedder (None: off or misconfigured)."""
    try:
        embedder = make_embedder(settings)
    except EmbedderError:
        return None
    return embedder.name if embedder is not None else None


def count_files(folder: Path) -> int:
    """Source files directly in a folder (sidecars, error records, hidden and temporary names excluded)."""
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.iterdir() if p.is_file() and is_candidate_name(p.name))
