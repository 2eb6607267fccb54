"""The archive itself: a ``.tar.gz`` or a folder of KB_HOME-relative files, its manifest written last.

Writing: every file goes in once, hashed (SHA-256) as it is written; the archive is built at
``DEST.part`` (a file, or a folder) held with an ``flock``, and renamed to DEST only once the
manifest is in and everything is on disk, so nothing half-written is ever at DEST. Reading: every
member is read once, in order, hashed and handed on; anything that is not a regular file under a
plain relative name (an absolute path, ``..``, a link, a device) is refused by name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from knowledge.errors import NO_ROOM, Refused
from knowledge.ingest.safepath import open_beneath, walk_files

MANIFEST_NAME = "kb-backup.json"
FORMAT = "kb-backup"
FORMAT_VERSION = 1
MANIFEST_MAX_BYTES = 256 * 2**20
PIECE_BYTES = 1 << 20
TAR_SUFFIXES = (".tar.gz", ".tgz")
# What a file manager leaves in a folder it shows: never backed up, ignored in a folder archive.
JUNK_NAMES = frozenset({".ds_store", "thumbs.db", "desktop.ini"})


class BackupError(Refused):
    """A backup could not be written, or an archive is refused; ``reason`` is a stable code and
    ``member`` the archive file it is about, when there is one.

    Reasons: ``dest-exists``, ``dest-inside``, ``dest-busy``, ``no-index``, ``unreadable``,
    ``no-room``, ``index-damaged`` (the copy failed SQLite's checks), ``not-a-backup``,
    ``truncated``, ``changed`` (a file's size or hash is not the manifest's), ``missing``, ``extra``,
    ``unsafe`` (a member that is not a regular file under a plain relative name), ``bad-manifest``,
    ``newer-format``, ``home-not-empty``.
    """

    def __init__(self, reason: str, message: str, *, member: str | None = None) -> None:
        super().__init__(reason, message)
        self.member = member


@dataclass(frozen=True)
class Entry:
    """One file as the manifest lists it."""

    size: int
    sha256: str


def is_tar_name(path: Path) -> bool:
    """Does this destination name a .tar.gz archive (else: a folder)?"""
    return path.name.lower().endswith(TAR_SUFFIXES)


def name_problem(name: str) -> str | None:
    """Why an archive member's name cannot be put under a home (pure); None when it can."""
    if not name:
        return "an empty name"
    if name.startswith("/"):
        return "an absolute path"
    if "\x00" in name:
        return "a NUL character in its name"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "'..', '.' or an empty part in its path"
    return None


# -- writing ------------------------------------------------------------------------------------


class Sink(Protocol):
    """Where a backup's files go: a .tar.gz or a folder."""

    def add_bytes(self, name: str, data: bytes, *, mode: int, mtime: float) -> Entry: ...

    def add_stream(
        self, name: str, fh: BinaryIO, size: int, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry: ...

    def add_temporary(
        self, name: str, path: Path, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry: ...

    def finish(self, manifest: bytes) -> None: ...

    def abort(self) -> None: ...


def open_sink(dest: Path, *, compresslevel: int = 3) -> Sink:
    """A sink writing DEST.part, renamed to DEST by finish(); BackupError when another backup writes it."""
    return TarSink(dest, compresslevel=compresslevel) if is_tar_name(dest) else FolderSink(dest)


def part_path(dest: Path) -> Path:
    """Where the archive is written until it is complete."""
    return dest.with_name(dest.name + ".part")


def _busy(part: Path) -> BackupError:
    return BackupError(
        "dest-busy", f"another kb backup is writing {part}; wait for it, or name another destination"
    )


def _lock(fd: int, part: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise _busy(part) from None


def write_error(what: str, exc: OSError) -> BackupError:
    """The BackupError for a write that failed: a full disk (``no-room``) says so."""
    if exc.errno in NO_ROOM:
        return BackupError(
            "no-room", f"cannot write {what}: the disk is full ({exc.strerror}) — free some space"
        )
    return BackupError("unwritable", f"cannot write {what}: {exc.strerror or exc}")


class _Counted:
    """Reads exactly ``size`` bytes of a file, hashing them; a file that shrinks meanwhile is an error."""

    def __init__(self, fh: BinaryIO, size: int, name: str, seen: Callable[[bytes], None]) -> None:
        self.fh, self.left, self.name, self.seen = fh, size, name, seen
        self.digest = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        data = self.fh.read(self.left if n is None or n < 0 else min(n, self.left))
        if not data:
            raise BackupError(
                "unreadable", f"{self.name} became shorter while it was copied; run the backup again"
            )
        self.digest.update(data)
        self.seen(data)
        self.left -= len(data)
        return data


class TarSink:
    """A gzip-compressed tar (PAX), written to DEST.part, linked to DEST when complete."""

    def __init__(self, dest: Path, *, compresslevel: int) -> None:
        self.dest, self.part = dest, part_path(dest)
        try:
            fd = os.open(self.part, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise write_error(str(self.part), exc) from exc
        _lock(fd, self.part)  # free: a killed backup's leftover, written over
        os.ftruncate(fd, 0)
        self._file = os.fdopen(fd, "wb")
        self._tar = tarfile.open(  # noqa: SIM115 - held until finish() or abort()
            fileobj=self._file, mode="w:gz", compresslevel=compresslevel, format=tarfile.PAX_FORMAT
        )

    def _info(self, name: str, size: int, mode: int, mtime: float) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = size, mode & 0o777, int(mtime)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    def add_bytes(self, name: str, data: bytes, *, mode: int, mtime: float) -> Entry:
        try:
            self._tar.addfile(self._info(name, len(data), mode, mtime), io.BytesIO(data))
        except OSError as exc:
            raise write_error(str(self.part), exc) from exc
        return Entry(len(data), hashlib.sha256(data).hexdigest())

    def add_stream(
        self, name: str, fh: BinaryIO, size: int, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry:
        counted = _Counted(fh, size, name, seen)
        try:
            self._tar.addfile(self._info(name, size, mode, mtime), counted)  # type: ignore[arg-type]
        except OSError as exc:
            raise write_error(str(self.part), exc) from exc
        return Entry(size, counted.digest.hexdigest())

    def add_temporary(
        self, name: str, path: Path, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry:
        with open(path, "rb") as fh:
            entry = self.add_stream(
                name, fh, os.fstat(fh.fileno()).st_size, mode=mode, mtime=mtime, seen=seen
            )
        path.unlink()
        return entry

    def finish(self, manifest: bytes) -> None:
        self.add_bytes(MANIFEST_NAME, manifest, mode=0o600, mtime=os.path.getmtime(self.part))
        try:
            self._tar.close()
            self._file.flush()
            os.fsync(self._file.fileno())
            _place_file(self.part, self.dest)
            _sync_folder(self.dest.parent)
        except OSError as exc:
            raise write_error(str(self.dest), exc) from exc
        finally:
            self._file.close()  # releases the lock, now that DEST.part is gone

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.part.unlink()
        with contextlib.suppress(Exception):
            self._tar.close()
        with contextlib.suppress(OSError):
            self._file.close()


def _place_file(part: Path, dest: Path) -> None:
    """Rename part to dest, never over a file that appeared at dest meanwhile."""
    try:
        os.link(part, dest)  # fails when dest exists: no clobbering
    except FileExistsError:
        raise BackupError(
            "dest-exists", f"{dest} appeared while the backup was written; it is left as it was"
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
            raise
        if os.path.lexists(dest):  # a file system without hard links (exFAT, FAT)
            raise BackupError("dest-exists", f"{dest} appeared while the backup was written") from None
        os.rename(part, dest)
        return
    os.unlink(part)


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class FolderSink:
    """A folder of the same relative paths (and the manifest), written as DEST.part and renamed."""

    def __init__(self, dest: Path) -> None:
        self.dest, self.part = dest, part_path(dest)
        if os.path.lexists(self.part):
            if os.path.islink(self.part) or not self.part.is_dir():
                raise BackupError(
                    "dest-busy", f"{self.part} is in the way (not a folder kb writes); remove it"
                )
            fd = os.open(self.part, os.O_RDONLY | os.O_DIRECTORY)
            _lock(fd, self.part)
            os.close(fd)  # nobody holds it: a killed backup's leftover
            shutil.rmtree(self.part)
        try:
            self.part.mkdir(mode=0o700)
            self._fd = os.open(self.part, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileExistsError:
            raise _busy(self.part) from None
        except OSError as exc:
            raise write_error(str(self.part), exc) from exc
        _lock(self._fd, self.part)

    def _create(self, name: str, mode: int) -> BinaryIO:
        path = self.part / name
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.fdopen(os.open(path, flags, (mode & 0o777) | 0o600), "wb")

    def add_bytes(self, name: str, data: bytes, *, mode: int, mtime: float) -> Entry:
        try:
            with self._create(name, mode) as out:
                out.write(data)
            os.utime(self.part / name, (mtime, mtime))
        except OSError as exc:
            raise write_error(str(self.part / name), exc) from exc
        return Entry(len(data), hashlib.sha256(data).hexdigest())

    def add_stream(
        self, name: str, fh: BinaryIO, size: int, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry:
        counted = _Counted(fh, size, name, seen)
        try:
            with self._create(name, mode) as out:
                while piece := counted.read(PIECE_BYTES):
                    out.write(piece)
            os.utime(self.part / name, (mtime, mtime))
        except OSError as exc:
            raise write_error(str(self.part / name), exc) from exc
        return Entry(size, counted.digest.hexdigest())

    def add_temporary(
        self, name: str, path: Path, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry:
        digest, size = hashlib.sha256(), 0
        with open(path, "rb") as fh:
            while piece := fh.read(PIECE_BYTES):
                digest.update(piece)
                seen(piece)
                size += len(piece)
        target = self.part / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path, (mode & 0o777) | 0o600)
        os.replace(path, target)  # beside DEST: the same file system
        os.utime(target, (mtime, mtime))
        return Entry(size, digest.hexdigest())

    def finish(self, manifest: bytes) -> None:
        self.add_bytes(MANIFEST_NAME, manifest, mode=0o600, mtime=os.stat(self._fd).st_mtime)
        try:
            os.sync()  # every file of the folder on disk before it takes DEST's name (one call, not one per file)
            if os.path.lexists(self.dest):
                raise BackupError("dest-exists", f"{self.dest} appeared while the backup was written")
            os.rename(self.part, self.dest)
            _sync_folder(self.dest.parent)
        except OSError as exc:
            raise write_error(str(self.dest), exc) from exc
        finally:
            os.close(self._fd)

    def abort(self) -> None:
        shutil.rmtree(self.part, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self._fd)


# -- reading ------------------------------------------------------------------------------------


@dataclass
class Member:
    """One file of an archive, readable once, in order."""

    name: str
    size: int
    mode: int
    mtime: float
    fh: BinaryIO


def read_members(archive: Path, *, scratch: Path) -> Iterator[Member]:
    """Every member of a .tar.gz or a folder archive, in order; BackupError naming the member for
    anything unsafe, and for an archive that is cut short or damaged. ``scratch`` is an existing
    folder the tar data filter checks names against."""
    if archive.is_dir() and not archive.is_symlink():
        yield from _folder_members(archive)
    elif archive.is_file():
        yield from _tar_members(archive, scratch)
    else:
        raise BackupError("not-a-backup", f"no backup at {archive} (a .tar.gz file or a folder)")


_BROKEN = (tarfile.TarError, EOFError, zlib.error, OSError)


def _tar_members(archive: Path, scratch: Path) -> Iterator[Member]:
    last = None

    def broken(exc: BaseException, where: str) -> BackupError:
        return BackupError(
            "truncated",
            f"{archive} is cut short or damaged {where} ({exc}); it cannot be trusted",
            member=last,
        )

    # The gzip layer is Python's GzipFile, not tarfile's own stream: read to its end, it checks the
    # trailer's CRC and length, so even an archive cut in its last bytes is refused.
    with gzip.open(archive, "rb") as gz:
        try:
            tar = tarfile.open(fileobj=gz, mode="r|")  # noqa: SIM115 - closed with gz
        except _BROKEN as exc:
            raise BackupError("not-a-backup", f"{archive} is not a kb backup (not a .tar.gz: {exc})") from exc
        with tar:
            members = iter(tar)
            while True:
                try:
                    info = next(members)
                except StopIteration:
                    break
                except _BROKEN as exc:
                    raise broken(exc, f"after {last}" if last else "at its start") from exc
                problem = name_problem(info.name)
                if problem is None and not info.isreg():
                    problem = (
                        "a link or special file"
                        if (info.issym() or info.islnk() or info.isdev())
                        else "not a file"
                    )
                if problem is None:
                    try:
                        tarfile.data_filter(info, str(scratch))
                    except tarfile.FilterError as exc:
                        problem = str(exc)
                if problem is not None:
                    raise BackupError(
                        "unsafe", f"{archive}: member {info.name!r} is refused: {problem}", member=info.name
                    )
                fh = tar.extractfile(info)
                assert fh is not None  # a regular member
                last = info.name
                yield Member(
                    info.name, info.size, info.mode, float(info.mtime), _Guarded(fh, archive, info.name)
                )
        try:
            while gz.read(PIECE_BYTES):
                pass
        except _BROKEN as exc:
            raise broken(exc, f"after {last}" if last else "at its start") from exc


class _Guarded:
    """A member's reader whose read errors say the archive is cut short, naming the member."""

    def __init__(self, fh: BinaryIO, archive: Path, name: str) -> None:
        self.fh, self.archive, self.name = fh, archive, name

    def read(self, n: int = -1) -> bytes:
        try:
            return self.fh.read(n)
        except _BROKEN as exc:
            raise BackupError(
                "truncated",
                f"{self.archive} is cut short or damaged inside {self.name} ({exc})",
                member=self.name,
            ) from exc


def _folder_members(root: Path) -> Iterator[Member]:
    for here, dirs, files in walk_files(root):
        for d in dirs:
            if os.path.islink(here / d):
                name = (here / d).relative_to(root).as_posix()
                raise BackupError("unsafe", f"{root}: {name} is a symbolic link; refused", member=name)
        for file_name in files:
            if file_name.lower() in JUNK_NAMES:
                continue
            path = here / file_name
            name = path.relative_to(root).as_posix()
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                raise BackupError("unsafe", f"{root}: {name} is a link or special file; refused", member=name)
            fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                yield Member(name, os.fstat(fh.fileno()).st_size, st.st_mode, st.st_mtime, fh)


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
    if not isinstance(found, dict) or found.get("format") != FORMAT:
        raise bad("is not a kb backup's")
    version = found.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise bad("has no format version")
    if version > FORMAT_VERSION:
        raise BackupError(
            "newer-format",
            f"{archive} was made by a newer kb (format {version}, this kb reads {FORMAT_VERSION}); update kb",
        )
    files = found.get("files")
    if not isinstance(files, dict):
        raise bad("lists no files")
    for name, entry in files.items():
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("size"), int)
            and isinstance(entry.get("sha256"), str)
            and len(entry["sha256"]) == 64
        )
        if not ok or name_problem(name) is not None or name == MANIFEST_NAME:
            raise bad(f"has a bad entry for {name!r}")
    return found
