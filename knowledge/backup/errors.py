"""The one error of backups (``BackupError``, with a stable reason code) and how a failed write is said."""

from __future__ import annotations

from knowledge.errors import NO_ROOM, Refused


class BackupError(Refused):
    """A backup could not be written, or an archive is refused; ``reason`` is a stable code and
    ``member`` the archive file it is about, when there is one.

    Reasons: ``dest-exists``, ``dest-inside``, ``dest-busy``, ``part-not-ours`` (something that is
    not kb's is at ``DEST.part``), ``no-index``, ``unreadable``, ``no-room``, ``unwritable``,
    ``index-damaged`` (the copy failed SQLite's checks), ``not-a-backup``, ``truncated``, ``changed``
    (a file's size or hash is not the manifest's), ``missing``, ``extra``, ``unsafe`` (a member that
    is not a plain regular file under a plain relative name: a link, a device, a sparse file),
    ``too-many`` (more members than kb reads), ``too-large`` (more bytes than kb writes),
    ``bad-manifest``, ``newer-format``, ``home-not-empty``.
    """

    def __init__(self, reason: str, message: str, *, member: str | None = None) -> None:
        super().__init__(reason, message)
        self.member = member


def write_error(what: str, exc: OSError) -> BackupError:
    """The BackupError for a write that failed: a full disk (``no-room``) says so."""
    if exc.errno in NO_ROOM:
        return BackupError(
            "no-room", f"cannot write {what}: the disk is full ({exc.strerror}) — free some space"
        )
    return BackupError("unwritable", f"cannot write {what}: {exc.strerror or exc}")
