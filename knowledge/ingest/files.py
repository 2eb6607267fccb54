"""Files kb writes and reads safely: atomic writes (never half a file, never a shared temporary), reads of
regular files through real folders only, unique names in a folder, a folder's candidate files, the failed/
quarantine, and an advisory lock on a path."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from knowledge.ingest.names import (
    ERROR_SUFFIX,
    SIDECAR_SUFFIX,
    is_candidate_name,
    readable_name,
    shorten_name,
    split_ext,
)
from knowledge.ingest.safepath import open_beneath, walk_files


def unique_name(folder: Path, name: str) -> str:
    """``name``, or ``stem-2.ext``, ``stem-3.ext``… whichever is free in folder (with its sidecar).

    An error record without its original does not hold a name: it is the trace of an attempt
    that was interrupted, and the next attempt writes over it.
    """
    name = shorten_name(name)  # room for "-N" and ".source.json" within the 255-byte limit
    stem, ext = split_ext(name)
    n = 1
    candidate = name
    while any(os.path.lexists(folder / (candidate + s)) for s in ("", SIDECAR_SUFFIX)):
        n += 1
        candidate = f"{stem}-{n}{ext}"
    return candidate


def write_atomic(path: Path, data: bytes, *, staging: Path | None = None) -> None:
    """Write through a temporary file and rename, so readers see the old or the new file.

    ``staging`` (same file system) keeps the temporary file out of a watched folder.
    """
    tmp = _write_temporary(path, data, staging)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_new(path: Path, data: bytes, *, staging: Path | None = None) -> bool:
    """Write a file that must not exist yet, atomically; False (nothing written) when the name is taken."""
    tmp = _write_temporary(path, data, staging)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _write_temporary(path: Path, data: bytes, staging: Path | None) -> Path:
    """data in a synced temporary file beside path (or in staging), ready to be renamed or linked.

    Its name is made by mkstemp (created with O_EXCL): two writers of the same name, threads of one
    process or two processes, never share a temporary file. Hidden and ``.tmp``: never taken as a source.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if staging is not None:
        staging.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(
        prefix=f".{shorten_name(path.name, 160)}.", suffix=".tmp", dir=staging or path.parent
    )
    tmp = Path(name)
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def iter_sources(paths: Iterable[Path], *, skip: Iterable[Path] = ()) -> Iterator[Path]:
    """Files named or found under folders, sorted, without sidecars, hidden or temporary names."""
    skipped = [p.resolve() for p in skip]
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            for here, dirs, files in walk_files(path):
                links = sorted(d for d in dirs if os.path.islink(here / d))
                yield from (here / d for d in links)  # reported as skipped, never entered
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if d not in links and not d.startswith(".") and (here / d).resolve() not in skipped
                )
                for name in sorted(files):
                    if is_candidate_name(name):
                        yield here / name
        else:
            yield path


def is_regular(path: Path) -> bool:
    """A regular file itself, not a link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def is_link(path: Path) -> bool:
    """Is ``path`` itself a symbolic link (False when it is gone)?"""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:  # gone, or a name too long to exist
        return False


def copy_no_follow(src: Path, dest: Path) -> None:
    """Copy a file with its times, never through a link."""
    shutil.copy2(src, dest, follow_symlinks=False)


def hash_regular(root: Path, path: Path) -> str | None:
    """SHA-256 of a file read in pieces through real folders only; None when it cannot be read."""
    try:
        fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            digest = hashlib.sha256()
            while piece := fh.read(1 << 20):
                digest.update(piece)
    except OSError:
        return None
    return digest.hexdigest()


def read_regular(root: Path, path: Path, limit: int) -> bytes:
    """Read a regular file through real folders only, without blocking on a FIFO swapped in."""
    fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(
            f"{path.name} is over the size limit ({limit:,} bytes; it may have grown while being read)"
        )
    return data


def is_within(path: Path, folder: Path) -> bool:
    """Is path inside folder (an already resolved path)?"""
    try:
        path.resolve().relative_to(folder)
    except ValueError:
        return False
    return True


def quarantine(
    path: Path,
    folder: Path,
    record: dict[str, object],
    *,
    keep: Callable[[Path, Path, str], Path],
    staging: Path | None = None,
) -> Path:
    """File ``path`` in ``folder`` (failed/) beside ``NAME.error.json`` holding ``record`` (why, when).

    The record is written first: a crash between the two leaves the original where it was, to be tried
    again, rather than an original in failed/ without its reason. ``keep(path, folder, name)`` moves or
    copies the original under the name chosen and returns where it went.
    """
    name = unique_name(folder, readable_name(path.name))
    write_atomic(folder / (name + ERROR_SUFFIX), json.dumps(record, indent=2).encode(), staging=staging)
    return keep(path, folder, name)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock (flock) on ``path`` (made if missing, never written) meanwhile."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        with holding(fd):
            yield
    finally:
        os.close(fd)


@contextmanager
def holding(fd: int) -> Iterator[None]:
    """Hold an exclusive advisory lock on an open file descriptor meanwhile."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
