"""Raw Markdown files: names, document ids and front matter (pure functions).

A raw file is the truth the index is built from::

    ---
    title: "Super Bowl 50"
    source_name: "sb50.html"
    source_snapshot: "inbox/processed/sb50.html"
    source_url: "https://en.wikipedia.org/wiki/Super_Bowl_50"
    source_sha256: "4f1c…"
    converter: "html"
    ---

    # Super Bowl 50
    …

A source read by OCR (a photo, a scanned PDF) also records ``ocr_engine`` ("rapidocr 3.10.0
PP-OCRv6", "apple-vision"), ``ocr_confidence`` (the mean over its lines, "0.93"), ``ocr_pages`` (the
pages whose text came from OCR, "1-3,5") and, when there are any, ``ocr_illegible_pages`` (scanned
pages with nothing legible) and ``ocr_unread_pages`` (scanned pages not read: the file's OCR time,
``KB_OCR_BUDGET_S``, ran out). Something kept from the chat records where it came from
(``origin_type`` "channel", ``origin_name`` "Team News (@teamnews)", ``origin_date``) and the
``comment`` that came with it (a link's comment, a forwarded file's caption), from kb's sidecar. A
Markdown note keeps what its own front matter said of it (knowledge.convert.frontmatter): ``aliases``,
``description``, ``tags`` and its dates, ``date``, ``created`` and ``updated`` (its inline #tags and links
are read from the body again at every indexing).
Every key but the first four is optional.

Values are JSON strings, or JSON lists of strings (valid YAML too). The same source bytes give the same raw bytes:
nothing time-dependent is written. A raw file's document id depends only on its name, so
editing the file replaces its own chunks.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from knowledge.ingest.names import cut_bytes

FRONT_MATTER_KEYS = (
    "title",
    "aliases",
    "description",
    "tags",
    "date",
    "created",
    "updated",
    "source_name",
    "source_snapshot",
    "source_url",
    "author",
    "published",
    "source_sha256",
    "converter",
    "ocr_engine",
    "ocr_confidence",
    "ocr_pages",
    "ocr_illegible_pages",
    "ocr_unread_pages",
    "origin_type",
    "origin_name",
    "origin_date",
    "comment",
)
_SLUG_MAX = 60
_SLUG_MAX_BYTES = 120  # 40 Thai or Chinese characters: raw names stay far below 255 bytes


@dataclass(frozen=True)
class RawMeta:
    """The front matter of a raw file."""

    title: str
    source_name: str
    source_sha256: str
    converter: str
    source_snapshot: str | None = None
    source_url: str | None = None
    author: str | None = None  # an article's, as its page names it
    published: str | None = None  # an article's publication date, YYYY-MM-DD
    ocr_engine: str | None = None
    ocr_confidence: str | None = None
    ocr_pages: str | None = None
    ocr_illegible_pages: str | None = None
    ocr_unread_pages: str | None = None
    origin_type: str | None = None
    origin_name: str | None = None
    origin_date: str | None = None
    comment: str | None = None
    aliases: tuple[str, ...] = ()  # a note's, from its own front matter
    description: str | None = None
    tags: tuple[str, ...] = ()
    date: str | None = None  # a note's dates, from its own front matter (ISO 8601)
    created: str | None = None
    updated: str | None = None

    @property
    def dates(self) -> tuple[tuple[str, str], ...]:
        """The note's dates given, as (key, ISO 8601 text)."""
        return tuple((k, v) for k in ("date", "created", "updated") if (v := getattr(self, k)))


_LIST_KEYS = frozenset({"aliases", "tags"})


@dataclass(frozen=True)
class RawFile:
    """A parsed raw file: its front matter and its body lines, numbered as in the file."""

    meta: RawMeta
    body_lines: list[str]
    first_body_line: int


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def slugify(name: str) -> str:
    """A file-name-safe slug: letters, digits and marks of any script (a Thai vowel or tone mark, an
    accent), joined by '-', at most 60 chars."""
    text = unicodedata.normalize("NFKC", name).casefold()
    kept = "".join(
        ch if ch.isalnum() or ch == "_" or unicodedata.category(ch)[0] == "M" else " " for ch in text
    )
    slug = re.sub(r"\s+", "-", kept.strip()).strip("-_")
    slug = cut_bytes(re.sub(r"[-_]{2,}", "-", slug)[:_SLUG_MAX], _SLUG_MAX_BYTES).strip("-_")
    return slug or "document"


def raw_name(source_name: str, source_sha256: str) -> str:
    """``<slug>-<hash8>.md`` for a source file name and its content hash (the first name tried)."""
    return next(raw_names(source_name, source_sha256))


def raw_names(source_name: str, source_sha256: str) -> Iterator[str]:
    """Names to try for a source's raw file, shortest first: 8, 16 and 64 hex digits, then numbered."""
    stem = source_name.rsplit(".", 1)[0] if "." in source_name.lstrip(".") else source_name
    slug = slugify(stem)
    for digits in (8, 16, 64):
        yield f"{slug}-{source_sha256[:digits]}.md"
    for n in range(2, 100):
        yield f"{slug}-{source_sha256}-{n}.md"


def document_id(raw_relpath: str) -> str:
    """``doc-<16 hex>``, stable for a raw file (its path under knowledge/, e.g. ``raw/x.md``)."""
    return "doc-" + hashlib.sha256(raw_relpath.encode("utf-8")).hexdigest()[:16]


def chunk_id(doc_id: str, seq: int) -> str:
    """``doc-<16 hex>-chunk-0001``."""
    return f"{doc_id}-chunk-{seq:04d}"


def chunk_seq(chunk_id_: str) -> int:
    """The sequence number in a chunk id (the inverse of :func:`chunk_id`)."""
    return int(chunk_id_.rsplit("-chunk-", 1)[1])


def chunk_document(chunk_id_: str) -> str:
    """The document id in a chunk id."""
    return chunk_id_.rsplit("-chunk-", 1)[0]


def render(meta: RawMeta, body: str) -> str:
    """The raw file's text: front matter, a blank line, the body ending with one newline."""
    lines = ["---"]
    for key in FRONT_MATTER_KEYS:
        value = getattr(meta, key)
        if isinstance(value, tuple):
            value = list(value) or None
        if value is not None:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    lines += ["---", "", body.strip("\n"), ""]
    return "\n".join(lines)


def parse(text: str, *, fallback_name: str, sha256: str) -> RawFile:
    """Front matter and numbered body of a raw file; a hand-written file without one still parses."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    values: dict[str, str | tuple[str, ...]] = {}
    first_body = 1
    if lines and lines[0].strip() == "---":
        for n, line in enumerate(lines[1:], start=2):
            if line.strip() in ("---", "..."):
                first_body = n + 1
                break
            key, sep, value = line.partition(":")
            if sep and key.strip() in _LIST_KEYS:
                values[key.strip()] = _texts(value.strip())
            elif sep and key.strip() in FRONT_MATTER_KEYS:
                values[key.strip()] = _value(value.strip())
        else:  # an opening '---' that never closes is body text, not front matter
            values, first_body = {}, 1
    body = lines[first_body - 1 :]
    meta = RawMeta(
        **{
            **values,  # the other keys as the file gives them; the missing ones are None
            "title": values.get("title") or _first_heading(body) or fallback_name,
            "source_name": values.get("source_name") or fallback_name,
            "source_sha256": values.get("source_sha256") or sha256,
            "converter": values.get("converter") or "markdown",
        }
    )
    return RawFile(meta=meta, body_lines=body, first_body_line=first_body)


def page_ranges(pages: Iterable[int]) -> str:
    """Page numbers as ranges: [1, 2, 3, 5] → "1-3,5"."""
    numbers = sorted(set(pages))
    parts: list[str] = []
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        parts.append(str(numbers[i]) if i == j else f"{numbers[i]}-{numbers[j]}")
        i = j + 1
    return ",".join(parts)


def pages_of(ranges: str) -> list[int]:
    """The page numbers of "1-3,5" → [1, 2, 3, 5]; parts that are not numbers or ranges are skipped."""
    pages: set[int] = set()
    for part in ranges.split(","):
        first, sep, last = part.strip().partition("-")
        if first.isdigit() and (not sep or last.isdigit()):
            low, high = int(first), int(last) if sep else int(first)
            pages.update(range(low, min(high, low + 100_000) + 1))
    return sorted(pages)


def _value(raw: str) -> str:
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
            return value if isinstance(value, str) else raw
        except json.JSONDecodeError:
            return raw.strip('"')
    return raw.strip("'")


def _texts(raw: str) -> tuple[str, ...]:
    """A JSON list of strings as a tuple; anything else (a hand-written value): empty."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return ()
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _first_heading(lines: list[str]) -> str | None:
    for line in lines:
        if line.startswith("#"):
            title = line.lstrip("#").strip()
            if title:
                return title
    return None
