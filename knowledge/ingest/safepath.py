"""Reading files under a folder without ever following a symbolic link, at any depth.

``O_NOFOLLOW`` and ``lstat`` guard only the last part of a path: ``inbox/pkg/keys/id_rsa``
with ``keys -> ~/.ssh`` is a regular file to both. Here every folder between the root and
the file is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor, so
a link anywhere below the root stops the open with ``ELOOP``, and nothing is swapped in
between a check and the read. The root itself is the owner's choice and may be a link.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkRefused(OSError):
    """A path below the root goes through a symbolic link (or something that is not a folder)."""

    def __init__(self, path: Path, part: str) -> None:
        super().__init__(
            errno.ELOOP, f"{part} is a symbolic link or not a folder; kb does not follow it", str(path)
        )
        self.part = part


log = structlog.get_logger()


def parts_below(root: Path, path: Path) -> tuple[str, ...] | None:
    """The parts of path below root (compared as written, no links resolved), or None when outside."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return None
    return None if any(p in ("", ".", "..") for p in parts) else parts


def open_beneath(root: Path, path: Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor for path, opened through real folders only from root down; LinkRefused otherwise.

    The last part is opened with ``flags | O_NOFOLLOW``: a link there fails with ``ELOOP`` too.
    """
    parts = parts_below(root, path)
    if not parts:
        raise LinkRefused(path, str(path))
    fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise LinkRefused(path, part) from exc
                raise
            os.close(fd)
            fd = nxt
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise LinkRefused(path, parts[-1]) from exc
            raise
    finally:
        os.close(fd)


def link_below(root: Path, path: Path) -> str | None:
    """The first part of path below root that is a symbolic link (the last part included), or None."""
    parts = parts_below(root, path)
    here = root
    for part in parts or ():
        here = here / part
        try:
            if stat.S_ISLNK(os.lstat(here).st_mode):
                return part
        except (FileNotFoundError, NotADirectoryError):
            return None
    return None


MAX_DEPTH = 64  # folders deeper than this below the root are not entered (a legal 1,100-deep tree exists)


def warn_too_deep(folder: Path, depth: int) -> None:
    """The log line for a folder deeper than MAX_DEPTH, which is not entered."""
    log.warning("inbox.too_deep", folder=str(folder), depth=depth, limit=MAX_DEPTH)


def walk_files(
    root: Path,
    *,
    max_depth: int = MAX_DEPTH,
    too_deep: Callable[[Path, int], None] = warn_too_deep,
) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk`` (top down: the caller may prune ``dirs``) that never enters a linked folder, the
    root included when it is a link itself, nor one deeper than ``max_depth`` (``too_deep`` hears of
    each folder whose sub-folders are left out); iterative, so any depth is safe (Python 3.11's own
    walk recurses and fails past a thousand levels)."""
    if os.path.islink(root):
        return
    pending: list[tuple[Path, int]] = [(Path(root), 0)]
    while pending:
        here, depth = pending.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        dirs, files, linked = [], [], set()
        for entry in sorted(entries, key=lambda e: e.name):
            if _is_dir(entry):
                dirs.append(entry.name)
                if entry.is_symlink():
                    linked.add(entry.name)
            else:
                files.append(entry.name)
        yield here, dirs, files
        enter = [d for d in dirs if d not in linked]
        if depth >= max_depth:
            if enter:
                too_deep(here, depth)
            continue
        pending.extend((here / d, depth + 1) for d in reversed(enter))


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of what path names now, or None when nothing is there: tells a replaced file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino
