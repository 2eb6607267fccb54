"""An archive's manifest (``kb-backup.json``) read as untrusted input: its shape checked, its depth bounded,
one clear refusal (``bad-manifest``) for anything else."""

from __future__ import annotations

import json
import re
from pathlib import Path

from knowledge.backup.archive import FORMAT, FORMAT_VERSION, MANIFEST_NAME, name_problem
from knowledge.backup.errors import BackupError

MAX_DEPTH = 6  # kb writes 3 levels (files → name → size); room for a later format's additions
DATABASE_KINDS = ("index", "state")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def parse_manifest(data: bytes, archive: Path) -> dict:
    """The manifest's JSON, checked for shape; BackupError ``bad-manifest`` / ``newer-format``."""

    def bad(why: str) -> BackupError:
        return BackupError(
            "bad-manifest", f"{archive}: its manifest {MANIFEST_NAME} {why}", member=MANIFEST_NAME
        )

    try:
        found = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"is not JSON ({exc})") from exc
    except RecursionError:
        raise bad(f"is nested too deeply (more than {MAX_DEPTH} levels)") from None
    if depth(found, MAX_DEPTH + 1) > MAX_DEPTH:
        raise bad(f"is nested too deeply (more than {MAX_DEPTH} levels)")
    if not isinstance(found, dict) or found.get("format") != FORMAT:
        raise bad("is not a kb backup's")
    version = found.get("format_version")
    if not _is_int(version):
        raise bad("has no format version")
    if version > FORMAT_VERSION:
        raise BackupError(
            "newer-format",
            f"{archive} was made by a newer kb (format {version}, this kb reads {FORMAT_VERSION}); update kb",
        )
    problem = shape_problem(found)
    if problem is not None:
        raise bad(problem)
    return found


def depth(value: object, stop: int) -> int:
    """How deeply lists and objects nest in a JSON value (a scalar is 0), counted no further than
    ``stop`` (pure, without recursion)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level >= stop:
            return deepest
        todo.extend((child, level + 1) for child in children)
    return deepest


def shape_problem(found: dict) -> str | None:
    """What is wrong with a manifest's fields, as the end of a sentence; None when each has kb's shape (pure)."""
    files = found.get("files")
    if not isinstance(files, dict):
        return "lists no files"
    for name, entry in files.items():
        ok = (
            isinstance(entry, dict)
            and _is_int(entry.get("size"))
            and entry["size"] >= 0
            and isinstance(entry.get("sha256"), str)
            and _SHA256.fullmatch(entry["sha256"]) is not None
        )
        if not ok or name_problem(name) is not None or name == MANIFEST_NAME:
            return f"has a bad entry for {name!r}"
    index = found.get("index")
    if not isinstance(index, dict) or not isinstance(index.get("path"), str):
        return "names no index copy"
    databases = found.get("databases", {})
    if not isinstance(databases, dict) or not all(
        isinstance(kind, str) and kind in DATABASE_KINDS for kind in databases.values()
    ):
        return "lists its databases wrongly"
    dropped = found.get("settings_dropped", {})
    if not isinstance(dropped, dict) or not all(
        isinstance(keys, list) and all(isinstance(k, str) for k in keys) for keys in dropped.values()
    ):
        return "lists the settings left out wrongly"
    for key in ("created_at", "finished_at", "kb_version"):
        if not isinstance(found.get(key, ""), str):
            return f"has a {key} that is not text"
    return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
