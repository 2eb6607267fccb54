"""``DEST.part``: the private folder a backup works in, claimed exclusively and proven kb's own by a marker.

A backup writes nothing beside DEST but ``DEST.part/``, a folder made with mode 0700 that holds, first,
the marker ``kb-backup.part`` (what kb wrote, for which DEST, when), then the archive being written
(``DEST.part/<DEST's name>``, a file or a folder) and ``work/``, where the SQLite copies are made
before they go in. The folder is held with an ``flock`` while the backup runs. A ``DEST.part`` that
exists is taken over only when it is a real folder holding kb's marker for this DEST and nobody
holds it (a killed backup's leftover); anything else there (a download in progress, somebody's
files, a link) is left exactly as it is and the backup is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from knowledge.backup.errors import BackupError, write_error

MARKER_NAME = "kb-backup.part"
MARKER_FORMAT = "kb-backup-part"
MARKER_MAX_BYTES = 4096
WORK_NAME = "work"


def part_path(dest: Path) -> Path:
    """Where the archive is written until it is complete."""
    return dest.with_name(dest.name + ".part")


def marker_bytes(dest: Path, *, pid: int, now: datetime) -> bytes:
    """The marker kb writes into its own DEST.part (pure)."""
    found = {"format": MARKER_FORMAT, "dest": dest.name, "pid": pid, "started_at": now.isoformat()}
    return json.dumps(found).encode("utf-8")


def is_marker_of(data: bytes, dest: Path) -> bool:
    """Is this a marker kb wrote for DEST (pure)?"""
    try:
        found = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(found, dict) and found.get("format") == MARKER_FORMAT and found.get("dest") == dest.name


@dataclass
class Part:
    """A claimed DEST.part: the folder, its lock (an open descriptor) and where the archive goes in it."""

    dest: Path
    folder: Path
    fd: int

    @property
    def inner(self) -> Path:
        """The archive being written (a file or a folder), renamed or linked to DEST at the end."""
        return self.folder / self.dest.name

    @property
    def work(self) -> Path:
        """A private folder (0700) for the SQLite copies made before they go in."""
        return self.folder / WORK_NAME

    def remove(self) -> None:
        """Remove the folder and everything in it, then let go of it."""
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def claim(dest: Path) -> Part:
    """Make DEST.part (0700, with kb's marker) and hold it; take over a killed backup's leftover;
    BackupError ``dest-busy`` when another backup holds it, ``part-not-ours`` when something that is
    not kb's (no marker kb wrote for this DEST) is there."""
    folder = part_path(dest)
    for _ in range(2):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            _take_over(dest, folder)
            continue
        except OSError as exc:
            raise write_error(str(folder), exc) from exc
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        _lock(fd, folder)
        try:
            os.chmod(fd, 0o700)  # whatever the umask
            _write_new(folder / MARKER_NAME, marker_bytes(dest, pid=os.getpid(), now=datetime.now(UTC)))
            os.mkdir(folder / WORK_NAME, 0o700)
            os.chmod(folder / WORK_NAME, 0o700)
        except OSError as exc:
            Part(dest, folder, fd).remove()
            raise write_error(str(folder), exc) from exc
        return Part(dest, folder, fd)
    raise _busy(folder)  # taken over, then made again by someone else meanwhile


def _take_over(dest: Path, folder: Path) -> None:
    """Remove a DEST.part that kb's marker proves is a killed backup's leftover; refuse anything else."""
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or not _has_marker(dest, folder):
        raise BackupError(
            "part-not-ours",
            f"{folder} exists and is not an unfinished kb backup (kb's marker {MARKER_NAME} is not in it); "
            "kb leaves it as it is — move it away, or name another destination",
        )
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    _lock(fd, folder)
    try:
        shutil.rmtree(folder)  # nobody holds it: a killed backup's leftover
    finally:
        os.close(fd)


def _has_marker(dest: Path, folder: Path) -> bool:
    try:
        fd = os.open(folder / MARKER_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return False
        return is_marker_of(fh.read(MARKER_MAX_BYTES + 1), dest)


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _busy(folder: Path) -> BackupError:
    return BackupError(
        "dest-busy", f"another kb backup is writing {folder}; wait for it, or name another destination"
    )


def _lock(fd: int, folder: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise _busy(folder) from None
