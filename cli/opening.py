"""The terminal chat's ``/open N``: the passage the last answer cites as [N], then where its document is
opened, as the bot's Open gives them: a folder source's file by its Obsidian link (a vault's note) and its
path with the cited lines, a web page by its address, an inbox file by its original in processed/ (or its
text in the knowledge base when no original is kept)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from knowledge.answer.reply import Citation
from knowledge.config import Settings
from knowledge.errors import ConfigError, IndexMissing
from knowledge.ingest import raw as rawfile
from knowledge.sources.opening import opening
from knowledge.sources.registry import config_file, read_sources
from knowledge.store.index import Index
from knowledge.store.records import DocumentRecord
from knowledge.text import gap
from knowledge.words.catalog import N_, Words
from knowledge.words.sources import OPENING

PASSAGE_CHARS = 3000
USAGE = N_("usage: /open N (N: a source of the last answer, as it cites it: [N])")
NOTHING_TO_OPEN = N_("There is no answer to open a source of yet: ask a question first, then /open N.")
NO_SOURCES = N_("The last answer cites no source.")
NOT_CITED = N_("The last answer has no source [{n}]; its sources are {numbers}.")
GONE = N_("That document is no longer in your knowledge base.")
ORIGINAL = N_("Original:")
KEPT_ORIGINAL = N_("The original file:")
NOT_KEPT = N_("The original file is not kept (only its converted text).")
ITS_TEXT = N_("Its text in the knowledge base:")


def pick(citations: Sequence[Citation] | None, argument: str, words: Words) -> Citation | str:
    """The citation ``/open N`` names, or what to say instead."""
    if not argument.isdecimal():
        return words.tr(USAGE)
    if citations is None:
        return words.tr(NOTHING_TO_OPEN)
    if not citations:
        return words.tr(NO_SOURCES)
    n = int(argument)
    for c in citations:
        if c.number == n:
            return c
    numbers = ", ".join(f"[{c.number}]" for c in citations)
    return words.tr(NOT_CITED, n=words.number(n), numbers=numbers)


def opened(settings: Settings, open_index: Callable[[], Index], cited: Citation, words: Words) -> str:
    """The passage cited, under its title and lines, then where its document is opened (blocking: it
    reads the index, kb.toml and a raw file)."""
    doc_id = rawfile.chunk_document(cited.chunk_id)
    try:
        with open_index() as index:
            doc = index.document(doc_id)
            chunks = index.chunks_of(doc_id, [rawfile.chunk_seq(cited.chunk_id)]) if doc else []
    except IndexMissing:
        doc = None
    if doc is None:
        return words.tr(GONE)
    lines = (cited.start_line, cited.end_line)
    text = _raw_lines(settings.raw.parent / doc.raw_path, lines) if doc.raw_path.startswith("raw/") else None
    if text is None:
        text = chunks[0].text if chunks else ""
    if len(text) > PASSAGE_CHARS:
        text = text[:PASSAGE_CHARS].rstrip() + "…"
    head = f"[{cited.number}] {doc.title} — {doc.raw_path}:{cited.start_line}-{cited.end_line}"
    return "\n\n".join([head, text.strip(), *_where(settings, doc.raw_path, doc, lines, words)])


def _where(
    settings: Settings, raw_path: str, doc: DocumentRecord, lines: tuple[int, int], words: Words
) -> list[str]:
    """Where the document is opened, a line per way."""
    if doc.source_url:
        return [said(words.tr(ORIGINAL), doc.source_url)]
    if not raw_path.startswith("raw/"):  # a folder source's file: the owner's, where it is
        try:
            sources = read_sources(config_file(settings.home))
        except ConfigError:
            sources = []
        where = opening(sources, raw_path)
        if where is None:
            return []
        link = [said(words.tr(OPENING["obsidian"]), where.obsidian_url)] if where.obsidian_url else []
        return [*link, said(words.tr(OPENING["file"]), f"{where.file}:{lines[0]}-{lines[1]}")]
    snapshot = doc.source_snapshot or ""
    if snapshot.startswith("inbox/processed/"):
        original = settings.processed / Path(snapshot).name  # one name: never outside processed/
        if original.is_file() and not original.is_symlink():
            return [said(words.tr(KEPT_ORIGINAL), str(original))]
    raw = settings.raw.parent / raw_path
    return [words.tr(NOT_KEPT), said(words.tr(ITS_TEXT), f"{raw}:{lines[0]}-{lines[1]}")]


def said(label: str, value: str) -> str:
    """``Label: value``, spaced as the label's language writes it (none after a full-width colon)."""
    return label + gap(label, value) + value


def _raw_lines(raw: Path, lines: tuple[int, int]) -> str | None:
    """Lines ``start``–``end`` (1-based, inclusive) of a raw file, or None when it has none there."""
    try:
        text = raw.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    picked = text.splitlines()[lines[0] - 1 : lines[1]]
    return "\n".join(picked) if picked else None
