"""The archive itself: a ``.tar.gz`` or a folder of KB_HOME-relative files, its manifest written last.

Writing: every file goes in once, hashed (SHA-256) as it is written; the archive is built inside
``DEST.part`` (kb's own private folder, see part.py) and renamed to DEST only once the manifest is in
and everything is on disk, so nothing half-written is ever at DEST. Reading: every member is read
once, in order, and handed on; anything that is not a plain regular file under a plain relative name
(an absolute path, ``..``, a link, a device, a sparse file) is refused by name.
"""

from __future__ import annotations

import abc
import contextlib
import errno
import gzip
import hashlib
import io
import os
import stat
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from knowledge.backup.errors import BackupError, write_error
from knowledge.backup.part import Part, claim
from knowledge.ingest.safepath import open_beneath, walk_files

MANIFEST_NAME = "kb-backup.json"
FORMAT = "kb-backup"
FORMAT_VERSION = 1
MANIFEST_MAX_BYTES = 256 * 2**20
PIECE_BYTES = 1 << 20
TAR_SUFFIXES = (".tar.gz", ".tgz")
# What a file manager leaves in a folder it shows: never backed up, ignored in a folder archive.
JUNK_NAMES = frozenset({".ds_store", "thumbs.db", "desktop.ini"})


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
    """Where a backup's files go: a .tar.gz or a folder, written inside a claimed DEST.part."""

    def work_path(self, name: str) -> Path: ...

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
    """A sink writing inside DEST.part (claimed: see part.py), placed at DEST by finish(); BackupError
    when another backup writes it or something that is not kb's is there."""
    part = claim(dest)
    try:
        return TarSink(part, compresslevel=compresslevel) if is_tar_name(dest) else FolderSink(part)
    except BaseException:
        part.remove()
        raise


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


class _PartSink(abc.ABC):
    """What both sinks share: the claimed DEST.part, its work folder, and bytes written as a stream."""

    def __init__(self, part: Part) -> None:
        self.dest, self.part = part.dest, part

    def work_path(self, name: str) -> Path:
        """A path in DEST.part's private work folder (nothing there yet)."""
        return self.part.work / name

    def add_bytes(self, name: str, data: bytes, *, mode: int, mtime: float) -> Entry:
        """Write ``data`` as the file ``name``, as a stream of one piece."""
        return self.add_stream(name, io.BytesIO(data), len(data), mode=mode, mtime=mtime, seen=_unseen)

    @abc.abstractmethod
    def add_stream(
        self, name: str, fh: BinaryIO, size: int, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry:
        """Write ``size`` bytes read from ``fh`` as the file ``name`` (each sink its own way), telling
        ``seen`` each piece."""


def _unseen(data: bytes) -> None:
    """What a file written whole from bytes reports of its pieces: nothing."""


class TarSink(_PartSink):
    """A gzip-compressed tar (PAX), written inside DEST.part, linked to DEST when complete."""

    def __init__(self, part: Part, *, compresslevel: int) -> None:
        super().__init__(part)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            self._file = os.fdopen(os.open(part.inner, flags, 0o600), "wb")
        except OSError as exc:
            raise write_error(str(part.inner), exc) from exc
        self._tar = tarfile.open(  # noqa: SIM115 - held until finish() or abort()
            fileobj=self._file, mode="w:gz", compresslevel=compresslevel, format=tarfile.PAX_FORMAT
        )

    def _info(self, name: str, size: int, mode: int, mtime: float) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = size, mode & 0o777, int(mtime)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    def add_stream(
        self, name: str, fh: BinaryIO, size: int, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry:
        counted = _Counted(fh, size, name, seen)
        try:
            self._tar.addfile(self._info(name, size, mode, mtime), counted)  # type: ignore[arg-type]
        except OSError as exc:
            raise write_error(str(self.part.inner), exc) from exc
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
        self.add_bytes(MANIFEST_NAME, manifest, mode=0o600, mtime=os.fstat(self._file.fileno()).st_mtime)
        try:
            self._tar.close()
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            _place_file(self.part.inner, self.dest)
            _sync_folder(self.dest.parent)
        except OSError as exc:
            raise write_error(str(self.dest), exc) from exc
        self.part.remove()

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._tar.close()
        with contextlib.suppress(OSError):
            self._file.close()
        self.part.remove()


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


class FolderSink(_PartSink):
    """A folder of the same relative paths (and the manifest), written inside DEST.part and renamed."""

    def __init__(self, part: Part) -> None:
        super().__init__(part)
        try:
            os.mkdir(part.inner, 0o700)
        except OSError as exc:
            raise write_error(str(part.inner), exc) from exc

    def _create(self, name: str, mode: int) -> BinaryIO:
        path = self.part.inner / name
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.fdopen(os.open(path, flags, (mode & 0o777) | 0o600), "wb")

    def add_stream(
        self, name: str, fh: BinaryIO, size: int, *, mode: int, mtime: float, seen: Callable[[bytes], None]
    ) -> Entry:
        counted = _Counted(fh, size, name, seen)
        try:
            with self._create(name, mode) as out:
                while piece := counted.read(PIECE_BYTES):
                    out.write(piece)
            os.utime(self.part.inner / name, (mtime, mtime))
        except OSError as exc:
            raise write_error(str(self.part.inner / name), exc) from exc
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
        target = self.part.inner / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path, (mode & 0o777) | 0o600)
        os.replace(path, target)  # from DEST.part's work folder: the same file system
        os.utime(target, (mtime, mtime))
        return Entry(size, digest.hexdigest())

    def finish(self, manifest: bytes) -> None:
        self.add_bytes(MANIFEST_NAME, manifest, mode=0o600, mtime=os.stat(self.part.inner).st_mtime)
        try:
            os.sync()  # every file of the folder on disk before it takes DEST's name (one call, not one per file)
            if os.path.lexists(self.dest):
                raise BackupError("dest-exists", f"{self.dest} appeared while the backup was written")
            os.rename(self.part.inner, self.dest)
            _sync_folder(self.dest.parent)
        except OSError as exc:
            raise write_error(str(self.dest), exc) from exc
        self.part.remove()

    def abort(self) -> None:
        self.part.remove()


# -- reading ------------------------------------------------------------------------------------


@dataclass
class Member:
    """One file of an archive, readable once, in order."""

    name: str
    size: int
    mode: int
    mtime: float
    fh: BinaryIO


def read_members(archive: Path, *, scratch: Path | None) -> Iterator[Member]:
    """Every member of a .tar.gz or a folder archive, in order; BackupError naming the member for
    anything unsafe, and for an archive that is cut short or damaged. ``scratch``: the existing folder
    the members are written into, which tar's data filter checks each name against too (None when
    nothing is written: the name and kind checks above are the filter's, without its cost of a
    ``realpath`` per member)."""
    if archive.is_dir() and not archive.is_symlink():
        yield from _folder_members(archive)
    elif archive.is_file():
        yield from _tar_members(archive, scratch)
    else:
        raise BackupError("not-a-backup", f"no backup at {archive} (a .tar.gz file or a folder)")


_BROKEN = (tarfile.TarError, EOFError, zlib.error, OSError)


def _tar_members(archive: Path, scratch: Path | None) -> Iterator[Member]:
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
                problem = name_problem(info.name) or member_problem(info)
                if problem is None and scratch is not None:
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


def member_problem(info: tarfile.TarInfo) -> str | None:
    """Why a tar member's kind cannot be restored (pure); None for a plain regular file. A sparse
    member is refused: its few stored bytes would expand to the size it declares (a 148-byte archive
    declaring a tebibyte)."""
    if info.issym() or info.islnk() or info.isdev():
        return "a link or special file"
    if info.issparse() or info.type == tarfile.GNUTYPE_SPARSE:
        return "a sparse file"
    if info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
        return "not a plain file"
    return None


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
