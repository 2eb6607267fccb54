"""What every converter returns, and the limits they share."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class Converted:
    """A source turned into Markdown: the body (no front matter), its title and the converter's name."""

    title: str
    markdown: str
    converter: str
    encoding: str | None = None


@dataclass(frozen=True)
class Limits:
    """Bounds that keep a hostile or huge source from hanging or exhausting kb."""

    max_source_bytes: int = 20 * MIB
    pdf_max_pages: int = 2000
    convert_timeout_s: float = 30.0
