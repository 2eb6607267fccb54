"""The pages of a scan OCR has read so far, kept on disk: a later turn, or the next start after a
restart, goes on from where the last one stopped instead of from page 1.

One JSON line per page read (its number, its lines, the seconds OCR took) in a file named after the
source's SHA-256 and the OCR settings (engine, languages, resolution: other settings read the
pages again). A line cut short by a kill is ignored. The converter appends to it in the conversion
worker; the pipeline removes it once the file is indexed or has failed.

Beside the stores, the daemon keeps a marker (``WAITING``) while tasks wait behind the one being
worked on: a scan's turn then ends after the page it is reading, rather than at ``ocr_turn_s``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from knowledge.convert.ocr import OcrSpec
from knowledge.convert.ocr_text import OcrLine

MAX_AGE_S = 30 * 86400  # the pages of a scan no longer in the inbox are dropped after this
WAITING = ".others-waiting"  # present while tasks wait behind the file being worked on


@dataclass(frozen=True)
class PageStore:
    """Small and picklable: it travels to the conversion worker."""

    path: Path

    def load(self) -> tuple[dict[int, list[list[OcrLine]]], float]:
        """The pages read so far (number → blocks of lines) and the OCR seconds spent on them."""
        pages: dict[int, list[list[OcrLine]]] = {}
        spent = 0.0
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return pages, spent
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                number, took = int(entry["page"]), float(entry["s"])
                blocks = [
                    [
                        OcrLine(str(t), float(c), (float(b[0]), float(b[1]), float(b[2]), float(b[3])))
                        for t, c, b in block
                    ]
                    for block in entry["blocks"]
                ]
            except (ValueError, KeyError, TypeError, IndexError):
                continue  # cut short by a kill, or not kb's
            pages[number] = blocks
            spent += took
        return pages, spent

    def add(self, number: int, blocks: list[list[OcrLine]], took_s: float) -> None:
        """Append one page read (one write of one line: a kill leaves whole lines and at most one torn one)."""
        entry = {
            "page": number,
            "s": round(took_s, 3),
            "blocks": [[[line.text, line.confidence, list(line.box)] for line in block] for block in blocks],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = ("\n" + json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()

    def others_waiting(self) -> bool:
        """Whether other work waits behind this scan (the daemon's marker beside the stores)."""
        return (self.path.parent / WAITING).exists()


def mark_waiting(folder: Path, waiting: bool) -> None:
    """Set or clear the marker that tells a scan's turn to end after its current page."""
    marker = folder / WAITING
    with contextlib.suppress(OSError):
        if waiting:
            folder.mkdir(parents=True, exist_ok=True)
            marker.touch()
        else:
            marker.unlink(missing_ok=True)


def page_store(folder: Path, sha256: str, spec: OcrSpec) -> PageStore:
    """The store of one source's pages under one OCR setting."""
    setting = json.dumps(
        [spec.kind, list(spec.langs), spec.dpi, type(spec.engine).__name__ if spec.engine else None]
    )
    key = hashlib.sha256(setting.encode()).hexdigest()[:12]
    return PageStore(folder / f"{sha256}-{key}.jsonl")


def drop_stale(folder: Path, *, now: float | None = None, max_age_s: float = MAX_AGE_S) -> int:
    """Remove stores untouched for ``max_age_s`` (their scan left the inbox some other way); how many."""
    now = time.time() if now is None else now
    dropped = 0
    with contextlib.suppress(OSError):
        for path in folder.glob("*.jsonl"):
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime > max_age_s:
                    path.unlink()
                    dropped += 1
    return dropped
