"""A ``NAME.source.json`` sidecar: the trusted fields kb writes beside a file it hands to the inbox (a web
import's URL and charset, where a chat capture came from and its comment), read defensively."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import structlog

from knowledge.ingest.files import is_link, is_regular
from knowledge.ingest.names import SIDECAR_SUFFIX
from knowledge.ingest.safepath import open_beneath
from knowledge.text import clean_text

log = structlog.get_logger()


@dataclass(frozen=True)
class Sidecar:
    """Trusted fields of a ``NAME.source.json`` written by kb (a web import, the bot)."""

    source_url: str | None
    charset: str | None
    origin_type: str | None = None  # something kept from the chat: where it came from…
    origin_name: str | None = None
    origin_date: str | None = None
    comment: str | None = None  # …and the comment or caption that came with it


def sidecar_path(path: Path) -> Path:
    """``NAME.source.json`` beside ``NAME``."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path, *, root: Path | None = None) -> Sidecar:
    """The trusted fields of a sidecar; a missing, linked or malformed one gives no metadata (logged)."""
    if not is_regular(path):
        if is_link(path):
            log.warning("ingest.sidecar_ignored", sidecar=path.name, reason="a symbolic link")
        return Sidecar(None, None)
    try:
        fd = open_beneath(root or path.parent.absolute(), path.absolute(), os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read(65536).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("ingest.sidecar_ignored", sidecar=path.name, reason=f"unreadable: {exc}")
        return Sidecar(None, None)
    if not isinstance(data, dict):
        log.warning("ingest.sidecar_ignored", sidecar=path.name, reason="not a JSON object")
        return Sidecar(None, None)
    url = data.get("source_url")
    if not (isinstance(url, str) and url.startswith(("http://", "https://")) and len(url) <= 4096):
        if url is not None:
            log.warning(
                "ingest.sidecar_ignored", sidecar=path.name, reason="source_url is not an http(s) URL"
            )
        url = None
    charset = data.get("charset")
    if not (isinstance(charset, str) and 0 < len(charset) <= 40):
        charset = None
    kept = {key: _sidecar_text(data.get(key), limit) for key, limit in _KEPT_FIELDS.items()}
    return Sidecar(url, charset, **kept)


_KEPT_FIELDS = {"origin_type": 100, "origin_name": 500, "origin_date": 40, "comment": 4000}


def _sidecar_text(value: object, limit: int) -> str | None:
    """A sidecar's string field as written to the raw front matter: text, cut to ``limit``, or None."""
    if not isinstance(value, str) or not value.strip():
        return None
    return clean_text(value.strip())[:limit]
