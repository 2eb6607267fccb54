"""The first of two passes over an archive from elsewhere: everything checked before anything is written.

It reads every member's header (a tar is decompressed, its data skipped; a folder is listed) and the
manifest, nothing else: each member must be a plain regular file under a plain relative name (no
link, device or sparse file), there may be no more than ``Limits.members`` of them, what would be
written may not exceed ``Limits.total_bytes`` nor the free space where it goes (both checked header
by header, as they arrive), and the manifest must be there, sound, and list exactly these members at
these sizes. Only then does the second pass (restore.py) write, and it refuses any member that is
not what this pass saw.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from knowledge.backup.archive import MANIFEST_MAX_BYTES, MANIFEST_NAME, read_members
from knowledge.backup.errors import BackupError
from knowledge.backup.manifest import parse_manifest

MAX_MEMBERS = 1_000_000  # a knowledge base of 10,000 documents is ~20,000 files
MAX_TOTAL_BYTES = 2**40  # 1 TiB: far beyond a personal knowledge base
ROOM_MARGIN_BYTES = 256 * 2**20  # left free after the archive's files are written
SHOWN = 5  # files named in a refusal; the rest are counted


@dataclass(frozen=True)
class Limits:
    """What kb accepts of an archive before it writes anything."""

    members: int = MAX_MEMBERS
    total_bytes: int = MAX_TOTAL_BYTES
    margin_bytes: int = ROOM_MARGIN_BYTES


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Survey:
    """An archive's members (name → size in its header) and its manifest, checked against each other."""

    sizes: dict[str, int]
    manifest: dict
    manifest_data: bytes


def survey(archive: Path, *, room: Path, is_written: Callable[[str], bool], limits: Limits) -> Survey:
    """Read an archive's headers and manifest, writing nothing; BackupError naming the member for
    anything that would not be restored as it is listed. ``room`` is the existing folder whose file
    system takes the members ``is_written`` keeps."""
    free = shutil.disk_usage(room).free
    sizes: dict[str, int] = {}
    manifest_data: bytes | None = None
    total = 0
    for member in read_members(archive, scratch=None):
        if member.name in sizes or (member.name == MANIFEST_NAME and manifest_data is not None):
            raise BackupError("unsafe", f"{archive}: {member.name} is in it twice", member=member.name)
        if len(sizes) + 1 > limits.members:
            raise BackupError(
                "too-many",
                f"{archive} holds more than {limits.members:,} files (at {member.name}); kb reads no more "
                "— it is not a kb backup of a knowledge base",
                member=member.name,
            )
        if member.name == MANIFEST_NAME:
            manifest_data = member.fh.read(MANIFEST_MAX_BYTES + 1)
            if len(manifest_data) > MANIFEST_MAX_BYTES:
                raise BackupError(
                    "bad-manifest", f"{archive}: its manifest is too large", member=MANIFEST_NAME
                )
            continue
        sizes[member.name] = member.size
        if is_written(member.name):
            total += member.size
            _check_room(archive, member.name, total, free, limits, room)
    if manifest_data is None:
        raise BackupError(
            "truncated" if sizes else "not-a-backup",
            f"{archive} has no manifest ({MANIFEST_NAME}, its last file): it is cut short, or not a kb backup",
            member=MANIFEST_NAME,
        )
    manifest = parse_manifest(manifest_data, archive)
    compare_sizes(archive, manifest["files"], sizes)
    return Survey(sizes, manifest, manifest_data)


def _check_room(archive: Path, name: str, total: int, free: int, limits: Limits, room: Path) -> None:
    if total > limits.total_bytes:
        raise BackupError(
            "too-large",
            f"{archive}: its files come to more than {limits.total_bytes / 2**30:,.0f} GiB (at {name}); "
            "kb writes no more — it is not a kb backup of a knowledge base",
            member=name,
        )
    if total + limits.margin_bytes > free:
        raise BackupError(
            "no-room",
            f"{archive}: its files need {total / 2**30:,.1f} GiB or more (at {name}) and {room} has "
            f"{free / 2**30:,.1f} GiB free — free some space, or restore elsewhere",
            member=name,
        )


def compare_sizes(archive: Path, listed: dict, sizes: dict[str, int]) -> None:
    """Refuse, naming them, members whose size is not the manifest's, missing from the archive, or not
    in its manifest (pure but for the refusal)."""
    changed = [
        f"{name} (size {size:,} bytes, the manifest says {listed[name]['size']:,})"
        for name, size in sizes.items()
        if name in listed and listed[name]["size"] != size
    ]
    missing = [name for name in listed if name not in sizes]
    extra = [name for name in sizes if name not in listed]
    refuse_named(archive, "changed", changed, "is not the file that was backed up")
    refuse_named(archive, "missing", missing, "is listed in the manifest but not in the archive")
    refuse_named(archive, "extra", extra, "is in the archive but not in its manifest")


def refuse_named(archive: Path, reason: str, names: list[str], what: str) -> None:
    """BackupError ``reason`` naming the first few of ``names`` (and counting the rest); nothing when empty."""
    if names:
        more = f" (and {len(names) - SHOWN:,} more)" if len(names) > SHOWN else ""
        first = names[0].split(" (")[0]
        raise BackupError(reason, f"{archive}: {', '.join(names[:SHOWN])}{more} {what}", member=first)


def existing_folder(path: Path) -> Path:
    """The nearest folder that exists at or above ``path``: where a new folder's bytes would go."""
    while not os.path.isdir(path) and path != path.parent:
        path = path.parent
    return path
