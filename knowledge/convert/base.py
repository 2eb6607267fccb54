"""What every converter returns, and the limits they share."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024
TITLE_MAX_CHARS = 120  # a title longer than this is cut at a word


@dataclass(frozen=True)
class OcrFacts:
    """How OCR contributed to a conversion: the engine, its mean line confidence, the pages it read.

    ``pages`` are the pages whose text came from OCR and ``illegible_pages`` those it found nothing
    legible on (both numbered from 1; empty for a single image). ``confidence`` is None when OCR
    read no line at all (every scanned page of a PDF with text pages was illegible).
    """

    engine: str
    confidence: float | None
    pages: tuple[int, ...] = ()
    illegible_pages: tuple[int, ...] = ()
    unread_pages: tuple[int, ...] = ()  # scanned pages not read: the file's OCR budget ran out


@dataclass(frozen=True)
class Converted:
    """A source turned into Markdown: the body (no front matter), its title and the converter's name;
    an article's author and publication date (YYYY-MM-DD) when its page names them; a note's aliases,
    description, tags and dates (``date``, ``created``, ``updated``: ISO 8601 text) from its front matter,
    and what of its front matter was ignored and why (problem codes, knowledge.convert.frontmatter)."""

    title: str
    markdown: str
    converter: str
    encoding: str | None = None
    ocr: OcrFacts | None = None
    author: str | None = None
    published: str | None = None
    aliases: tuple[str, ...] = ()
    description: str = ""
    tags: tuple[str, ...] = ()
    dates: tuple[tuple[str, str], ...] = ()
    front_matter_problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Limits:
    """Bounds that keep a hostile or huge source from hanging or exhausting kb."""

    max_source_bytes: int = 20 * MIB
    pdf_max_pages: int = 2000
    convert_timeout_s: float = 30.0
    ocr_page_timeout_s: float = 20.0
    ocr_budget_s: float = 3600.0  # OCR one file may have in all
    ocr_turn_s: float = 120.0  # OCR a file has before the files waiting behind it get the worker
