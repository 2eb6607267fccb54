"""Plain text and Markdown: decoded, newlines normalised, passed through."""

from __future__ import annotations

import re

from knowledge.convert.base import TITLE_MAX_CHARS, Converted
from knowledge.convert.charset import decode_bytes
from knowledge.convert.frontmatter import split_front_matter
from knowledge.errors import ConversionError
from knowledge.text import shorten

# One line, no two repeats that can trade characters: linear in the text however it is written.
_HEADING = re.compile(r"^#{1,6}[ \t]++([^\n]*\S)", re.MULTILINE)


def normalize_newlines(text: str) -> str:
    """\\r\\n and \\r become \\n; trailing spaces go; the text ends with one newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    return "\n".join(lines).strip("\n") + "\n"


def heading_text(line: str) -> str:
    """An ATX heading's text without its optional closing run of '#' (which follows a space)."""
    text = line.strip()
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        text = bare.rstrip()
    return text or line.strip()


def text_to_markdown(data: bytes, *, markdown: bool, declared: str | None = None) -> Converted:
    """Decode a text or Markdown file; a note's leading front matter block is cut from its text and gives
    its title, aliases, description, tags and dates (knowledge.convert.frontmatter)."""
    text, encoding = decode_bytes(data, declared=declared)
    text = normalize_newlines(text)
    front = None
    if markdown:
        # Provenance comes from kb's own sidecar, never from a document's claims about itself.
        front, text = split_front_matter(text)
        text = text.lstrip("\n")
    title = front.title if front else ""
    if not text.strip():
        raise ConversionError("no-content", "the file contains no text")
    if not title and markdown:  # a note without a heading is named by its file, as Obsidian shows it
        heading = _HEADING.search(text)
        title = heading_text(heading.group(1)) if heading else ""
    elif not title:
        title = next(line for line in text.split("\n") if line.strip())
    return Converted(
        title=shorten(title, TITLE_MAX_CHARS),
        markdown=text,
        converter="markdown" if markdown else "text",
        encoding=encoding,
        aliases=front.aliases if front else (),
        description=front.description if front else "",
        tags=front.tags if front else (),
        dates=front.dates if front else (),
        front_matter_problems=front.problems if front else (),
    )
