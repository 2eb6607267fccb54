"""Walking a source: every file it takes with its size and mtime, and every file or folder left out
with the reason. Only ``lstat`` and ``scandir``: nothing is opened, nothing written, no link followed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from knowledge.sources.rules import Rules, Verdict

MAX_DEPTH = 64  # deeper folders are left out, and said so


@dataclass(frozen=True)
class Seen:
    """A file a source takes, as ``lstat`` saw it."""

    size: int
    mtime_ns: int


@dataclass(frozen=True)
class LeftOut:
    """A file or folder (its path ends in '/') not taken, and why."""

    path: str
    reason: str
    rule: str = ""


@dataclass
class Scan:
    """What one walk of a source found."""

    seen: dict[str, Seen] = field(default_factory=dict)
    left_out: list[LeftOut] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)  # folder ('/'-ended) → the error

    def unseen(self, path: str) -> bool:
        """Whether a path lies under a folder this walk could not list (the source's own folder, "/",
        holds every path): what it held is not known to be gone."""
        return any(folder == "/" or path.startswith(folder) for folder in self.unreadable)


def scan(root: Path, rules: Rules) -> Scan:
    """Walk a source's folder (``root``: already resolved), top down, iteratively."""
    found = Scan()
    pending: list[tuple[str, int]] = [("", 0)]
    while pending:
        rel_dir, depth = pending.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            found.unreadable[rel_dir + "/"] = exc.strerror or str(exc)
            continue
        folders = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            verdict, what = look(root, rel, rules, entry=entry)
            if verdict is not None:
                shown = rel + "/" if what == "folder" else rel
                found.left_out.append(LeftOut(shown, verdict.reason, verdict.rule))
            elif what == "folder":
                folders.append(rel)
            elif isinstance(what, Seen):
                found.seen[rel] = what
        if folders and depth >= MAX_DEPTH:
            found.left_out.extend(LeftOut(f + "/", "too-deep") for f in folders)
            continue
        pending.extend((f, depth + 1) for f in reversed(folders))
    return found


def look(
    root: Path, rel: str, rules: Rules, *, entry: os.DirEntry | None = None
) -> tuple[Verdict | None, Seen | str | None]:
    """One path of a source: (why it is left out, or None; its Seen, 'folder', or None when gone)."""
    try:
        st = entry.stat(follow_symlinks=False) if entry is not None else os.lstat(root / rel)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return Verdict("unreadable", exc.strerror or str(exc)), "file"
    if stat.S_ISDIR(st.st_mode):
        return rules.folder(rel), "folder"
    if stat.S_ISLNK(st.st_mode):
        verdict = rules.file(rel)
        return verdict or Verdict("link" if _leads_inside(root, rel) else "link-out"), "file"
    verdict = rules.file(rel)
    if verdict is None and not stat.S_ISREG(st.st_mode):
        verdict = Verdict("not-regular")
    return verdict, Seen(st.st_size, st.st_mtime_ns)


def _leads_inside(root: Path, rel: str) -> bool:
    """Does the link at ``rel`` lead to something inside the source (never followed either way)?"""
    try:
        target = (root / rel).resolve()
    except OSError:
        return False
    return target.is_relative_to(root) and target.exists()


def has_link_parent(root: Path, rel: str) -> bool:
    """Does any folder between the source and this path turn out to be a link (an event's path)?"""
    here = root
    for part in rel.split("/")[:-1]:
        here = here / part
        if os.path.islink(here):
            return True
    return False
