"""Where the owner opens a folder source's document, for every front end: a note of an Obsidian vault
(a source folder holding ``.obsidian/``) by an ``obsidian://open?vault=NAME&file=PATH`` link, the vault
named by its folder as Obsidian names it; a file of any other source by its path on this computer."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from knowledge.ingest.safepath import open_beneath
from knowledge.sources.registry import Source
from knowledge.sources.state import split_raw_path


@dataclass(frozen=True)
class Opening:
    """A source's file: its source, its path in it, the file on this computer, and the Obsidian link
    that opens it when the source is an Obsidian vault."""

    source: str
    path: str  # relative to the source, '/'-separated
    file: Path  # as the owner named the source's folder
    root: Path  # the folder itself (a linked source folder followed once)
    obsidian_url: str | None = None

    @property
    def target(self) -> str:
        """What opens it: the Obsidian link, else the file's path."""
        return self.obsidian_url or str(self.file)


def obsidian_url(vault: str, path: str) -> str:
    """``obsidian://open?vault=NAME&file=PATH``, both URL-encoded ('/' and spaces too, as Obsidian asks)."""
    return f"obsidian://open?vault={quote(vault, safe='')}&file={quote(path, safe='')}"


def is_obsidian_vault(root: Path) -> bool:
    """Does the folder hold Obsidian's settings folder (a vault)?"""
    return (root / ".obsidian").is_dir()


def opening(
    sources: Sequence[Source], raw_path: str, *, is_vault: Callable[[Path], bool] = is_obsidian_vault
) -> Opening | None:
    """Where a document's file is opened, by the document's ``raw_path`` (``vault:Projects/x.md``); None
    for a document of raw/ (an inbox file, a web page) or of a source no longer registered."""
    split = split_raw_path(raw_path)
    if split is None:
        return None
    name, rel = split
    source = next((s for s in sources if s.name == name), None)
    if source is None:
        return None
    root = source.root
    file = source.path.joinpath(*rel.split("/"))
    return Opening(name, rel, file, root, obsidian_url(root.name, rel) if is_vault(root) else None)


def read_only(where: Opening) -> BinaryIO:
    """The file opened for reading, through real folders only (never a link, never a FIFO); OSError when
    it is gone, a link or not a regular file."""
    fd = open_beneath(where.root, where.root.joinpath(*where.path.split("/")), os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{where.path} is not a regular file")
    return os.fdopen(fd, "rb")
