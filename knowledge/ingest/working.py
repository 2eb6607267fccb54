"""What the daemon is working on, for other processes to read: one small JSON file per source.

The daemon reads a 20-page scan by OCR for a minute or more; the bot (waiting to answer about the
photo it handed in) and ``kb status`` want to say how far it has got. The daemon publishes
``index/working/<sha256>.json`` (the source's content hash names it, so a reader that holds the bytes
finds it) after every page, written atomically (a reader sees the old or the new file, never half of
one), and removes it when the file is done or failed. Files left by a daemon that was killed are
removed when the next one starts; ``updated`` lets a reader judge an old one meanwhile.

```json
{"name": "scan.pdf", "sha256": "4f1c…", "stage": "ocr", "done": 3, "total": 20, "updated": "2025-…Z"}
```
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from knowledge.config import Settings
from knowledge.ingest.files import write_atomic

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Working:
    """One source in hand: its name, content hash, stage (``ocr``), steps done of total, when last told."""

    name: str
    sha256: str
    stage: str
    done: int
    total: int
    updated: str


def folder(settings: Settings) -> Path:
    """Where the progress files of this knowledge base live (beside the index, not watched)."""
    return settings.home / "knowledge" / "index" / "working"


def publish(
    folder: Path,
    sha256: str,
    *,
    name: str,
    stage: str,
    done: int,
    total: int,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """Write (or replace) the progress file of a source, atomically."""
    path = _path(folder, sha256)
    record = Working(
        name=name,
        sha256=sha256,
        stage=stage,
        done=done,
        total=total,
        updated=clock().isoformat(timespec="seconds"),
    )
    _write_json(path, asdict(record))


def read(folder: Path, sha256: str) -> Working | None:
    """The progress of a source, or None when it is not being worked on (or the file is unreadable)."""
    path = _path(folder, sha256)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Working(
            name=str(data["name"]),
            sha256=str(data["sha256"]),
            stage=str(data["stage"]),
            done=int(data["done"]),
            total=int(data["total"]),
            updated=str(data["updated"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def in_hand(folder: Path) -> list[Working]:
    """Every source being worked on, oldest report first (``kb status``, the bot's /status)."""
    if not folder.is_dir():
        return []
    found = [read(folder, path.stem) for path in folder.glob("*.json") if _SHA256.fullmatch(path.stem)]
    return sorted((w for w in found if w is not None), key=lambda w: w.updated)


def clear(folder: Path, sha256: str) -> None:
    """Remove a source's progress file (nothing happens when there is none)."""
    _path(folder, sha256).unlink(missing_ok=True)


def clear_all(folder: Path) -> None:
    """Remove every progress file: at start-up nothing is being worked on yet."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.suffix in (".json", ".tmp", ".pace"):
            with contextlib.suppress(OSError):
                path.unlink()


def publisher(folder: Path) -> Callable[..., None]:
    """An ingest progress listener that publishes each report and clears the file at ``finished``."""

    def report(*, name: str, sha256: str, stage: str, done: int, total: int) -> None:
        if stage == "finished":
            clear(folder, sha256)
        else:
            publish(folder, sha256, name=name, stage=stage, done=done, total=total)

    return report


PACE_FILE = "embedding.pace"  # not a source's file (those are <sha256>.json)
PACE_FRESH_S = 120.0


@dataclass(frozen=True)
class Pace:
    """How fast the daemon is making vectors: chunks a second (lately), for which model, when told."""

    model: str
    rate: float
    updated: str


def publish_pace(
    folder: Path, *, model: str, rate: float, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> None:
    """Write (or replace) the embedding pace, atomically."""
    record = Pace(model=model, rate=round(rate, 3), updated=clock().isoformat(timespec="seconds"))
    _write_json(folder / PACE_FILE, asdict(record))


def read_pace(folder: Path, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Pace | None:
    """The embedding pace when the daemon told it in the last two minutes, else None."""
    try:
        data = json.loads((folder / PACE_FILE).read_text(encoding="utf-8"))
        pace = Pace(model=str(data["model"]), rate=float(data["rate"]), updated=str(data["updated"]))
        age = (clock() - datetime.fromisoformat(pace.updated)).total_seconds()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pace if 0 <= age <= PACE_FRESH_S and pace.rate > 0 else None


def _write_json(path: Path, record: dict[str, object]) -> None:
    """Write a small JSON file through a temporary one and a rename: readers see the old or the new."""
    write_atomic(path, json.dumps(record, ensure_ascii=False).encode("utf-8"))


def _path(folder: Path, sha256: str) -> Path:
    """The progress file of a source; only a hex SHA-256 names one (never a path from elsewhere)."""
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a SHA-256 hex digest: {sha256[:80]!r}")
    return folder / f"{sha256}.json"
