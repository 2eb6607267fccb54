"""The registered sources, kept as ``[[sources]]`` tables in the home's ``kb.toml``::

    [[sources]]
    name = "vault"
    path = "/home/me/Vault"
    include = ["*.md", "*.pdf"]
    exclude = ["Templates/"]

Adding one is refused with the reason when its path does not exist, is a file, is inside kb's home,
holds the home, or overlaps another source. Writing the file keeps every other line of it as it was.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from knowledge.errors import ConfigError, IndexMissing, SourceRefused
from knowledge.ingest.files import write_atomic
from knowledge.retrieval.scope import Scope
from knowledge.store.index import Index
from knowledge.store.notes import NoteTable
from knowledge.text import tag_name
from knowledge.words.catalog import ENGLISH
from knowledge.words.sources import REFUSALS

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
_HEADER = re.compile(r"^\s*\[")
_SOURCES_HEADER = re.compile(r"^\s*\[\[\s*sources\s*\]\]\s*(#.*)?$")


@dataclass(frozen=True)
class Source:
    """One folder source: its name, the folder as the owner gave it, its include and exclude globs."""

    name: str
    path: Path
    include: tuple[str, ...] = field(default=())
    exclude: tuple[str, ...] = field(default=())

    @property
    def root(self) -> Path:
        """The folder itself: a linked source folder is followed once, here."""
        return self.path.resolve()

    @property
    def is_linked(self) -> bool:
        """Is the folder the owner named a symbolic link (followed once, to ``root``)?"""
        return self.root != self.path


def config_file(home: Path) -> Path:
    """The file the sources are kept in: the home's kb.toml."""
    return home / "kb.toml"


def refused(reason: str, **facts: str) -> SourceRefused:
    """A SourceRefused with its English sentence (front ends say it in the reader's language)."""
    return SourceRefused(reason, ENGLISH.tr(REFUSALS[reason], **facts), **facts)


def read_sources(path: Path) -> list[Source]:
    """The sources in a kb.toml (none when there is no file); a malformed entry is a ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    entries = data.get("sources", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: sources must be [[sources]] tables")
    out: list[Source] = []
    for n, entry in enumerate(entries, 1):
        name, folder = entry.get("name"), entry.get("path")
        include, exclude = entry.get("include", []), entry.get("exclude", [])
        if not (isinstance(name, str) and _NAME.fullmatch(name) and isinstance(folder, str) and folder):
            raise ConfigError(f"{path}: source {n} needs a name (letters, digits, - _ .) and a path")
        if not all(isinstance(g, str) for g in [*include, *exclude]):
            raise ConfigError(f"{path}: source {name}: include and exclude are lists of patterns")
        if any(s.name == name for s in out):
            raise ConfigError(f"{path}: two sources are named {name}")
        out.append(Source(name, Path(folder).expanduser(), tuple(include), tuple(exclude)))
    return out


def render(sources: Sequence[Source]) -> str:
    """The ``[[sources]]`` tables of these sources, as kb writes them."""
    blocks = []
    for s in sources:
        lines = ["[[sources]]", f"name = {_quote(s.name)}", f"path = {_quote(str(s.path))}"]
        if s.include:
            lines.append(f"include = [{', '.join(_quote(g) for g in s.include)}]")
        if s.exclude:
            lines.append(f"exclude = [{', '.join(_quote(g) for g in s.exclude)}]")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def replace_sources(text: str, sources: Sequence[Source]) -> str:
    """A kb.toml's text with its ``[[sources]]`` tables replaced by these (every other line kept)."""
    kept: list[str] = []
    inside = False
    for line in text.splitlines(keepends=True):
        if _SOURCES_HEADER.match(line):
            inside = True
        elif inside and _HEADER.match(line):
            inside = False
        if not inside:
            kept.append(line)
    head = "".join(kept).rstrip("\n")
    tables = render(sources)
    if not tables:
        return head + "\n" if head else ""
    return (head + "\n\n" if head else "") + tables


def write_sources(path: Path, sources: Sequence[Source]) -> None:
    """Write the sources into a kb.toml, atomically, keeping its other settings and its mode."""
    try:
        text = path.read_text(encoding="utf-8")
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        text, mode = "", 0o644
    new = replace_sources(text, sources)
    write_atomic(path, new.encode("utf-8"))
    os.chmod(path, mode)


def check_new(source: Source, existing: Sequence[Source], home: Path) -> None:
    """Refuse a source that cannot be added, with the reason (SourceRefused)."""
    if not _NAME.fullmatch(source.name):
        raise refused("bad-name", name=source.name)
    for other in existing:
        if other.name == source.name:
            raise refused("name-taken", name=source.name, path=str(other.path))
    shown = str(source.path)
    if not os.path.lexists(source.path) or not source.path.exists():
        raise refused("missing", path=shown)
    if not source.root.is_dir():
        raise refused("not-folder", path=shown)
    if not os.access(source.root, os.R_OK | os.X_OK):
        raise refused("unreadable", path=shown)
    root, home = source.root, home.resolve()
    if root == home or root.is_relative_to(home):
        raise refused("inside-home", path=shown, home=str(home))
    if home.is_relative_to(root):
        raise refused("contains-home", path=shown, home=str(home))
    for other in existing:
        there = other.root
        if root == there or root.is_relative_to(there) or there.is_relative_to(root):
            raise refused("overlaps", path=shown, other=other.name, other_path=str(other.path))


def find(sources: Sequence[Source], name: str) -> Source:
    """The source with this name (SourceRefused naming the sources there are)."""
    for s in sources:
        if s.name == name:
            return s
    raise refused("unknown", name=name, names=", ".join(s.name for s in sources) or "-")


def scope_of(sources: Sequence[Source], name: str | None) -> Scope | None:
    """The search scope a name asks for (``kb search --in NAME``): None (everything) for no name, the
    documents of the source of that name, else SourceRefused ``unknown`` naming the sources there are."""
    return None if name is None else Scope(find(sources, name).name)


def scope_in(home: Path, name: str | None) -> Scope | None:
    """:func:`scope_of` among the sources in this home's kb.toml (read only for a name)."""
    return None if name is None else scope_of(read_sources(config_file(home)), name)


TAGS_SHOWN = 10  # the tags used most, named when a tag is refused


def with_tag(scope: Scope | None, tag: str | None, index: NoteTable | None) -> Scope | None:
    """The scope kept to the documents carrying ``tag`` too (``#`` or not, any case; the tags nested in
    it too), None (everything) for no scope and no tag; SourceRefused ``unknown-tag`` naming the tags used
    most when no document in the ``index`` (None: there is none yet) carries it."""
    if tag is None:
        return scope
    name = tag_name(tag) or tag.strip().removeprefix("#")
    if index is None or not index.has_tag(name):
        used = index.tag_counts(limit=TAGS_SHOWN) if index is not None else []
        raise refused("unknown-tag", tag=name, tags=", ".join(f"#{t} ({n})" for t, n in used) or "-")
    return Scope(scope.source if scope else None, name)


def scope_asked(
    home: Path, source: str | None, tag: str | None, open_index: Callable[[], Index]
) -> Scope | None:
    """The scope a source's name and a tag ask for (None: everything), the tag checked against the index
    ``open_index`` opens (none yet: every tag is refused); SourceRefused naming what there is."""
    scope = scope_in(home, source)
    if tag is None:
        return scope
    try:
        index = open_index()
    except IndexMissing:
        return with_tag(scope, tag, None)
    with index:
        return with_tag(scope, tag, index)


def source_of(sources: Sequence[Source], path: Path) -> tuple[Source, str] | None:
    """The source a path lies in and its path relative to it ('/'-separated), or None."""
    try:
        real = path.resolve()
    except OSError:
        return None
    for s in sources:
        for root in (s.path.absolute(), s.root):
            if path.absolute().is_relative_to(root) or real.is_relative_to(root):
                inside = path.absolute() if path.absolute().is_relative_to(root) else real
                return s, inside.relative_to(root).as_posix()
    return None


def _quote(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML refuses a bare DEL
