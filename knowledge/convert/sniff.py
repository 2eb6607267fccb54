"""Decide what a source is from its bytes, not only its name."""

from __future__ import annotations

import re
from pathlib import PurePath

from knowledge.errors import ConversionError

HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".shtml"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mkdn"})
# Obsidian's own files: a JSON Canvas board and a Bases view (YAML), told by their names.
OBSIDIAN_SUFFIXES = {".canvas": "canvas", ".base": "base"}

# Magic numbers of formats kb cannot read, with a hint for the owner.
_BINARY_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a ZIP archive or an Office document (.docx/.xlsx/.odt): export it to PDF first"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Office document (.doc/.xls): export it to PDF first"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"%!PS", "a PostScript file"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
)

# Brands of the ISO media ("ftyp") files that are still images: HEIC/HEIF from phones, and AVIF.
_IMAGE_BRANDS = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"hevm", b"hevs", b"mif1",
                           b"msf1", b"mif2", b"avif", b"avis"})  # fmt: skip
_BMP_HEADER_SIZES = frozenset({12, 40, 52, 56, 64, 108, 124})

_HTML_START = re.compile(
    rb"^\s*(?:<!--.*?-->\s*|<\?xml[^>]*>\s*)*<(?:!doctype\s+html|html|head|body)\b", re.IGNORECASE | re.DOTALL
)
# An SVG drawing: its root element is <svg>, or its doctype names svg (an internal subset may follow).
_SVG_START = re.compile(
    rb"^\s*(?:<!--.*?-->\s*|<\?xml[^>]*>\s*)*(?:<svg[\s>/]|<!doctype\s+svg\b)", re.IGNORECASE | re.DOTALL
)
_XML_START = re.compile(rb"^\s*<[?!a-z]", re.IGNORECASE)


def sniff(data: bytes, name: str, *, images: bool = True) -> str:
    """'pdf', 'image', 'svg', 'html', 'canvas', 'base', 'markdown' or 'text'; raises
    ConversionError('binary') for known binary formats.

    With ``images=False`` (a web import, which takes documents only) an image is refused as binary too.
    """
    head = data[:2048]
    if b"%PDF-" in data[:1024]:
        return "pdf"
    if (fmt := image_format(head)) is not None:
        if images:
            return "image"
        what = {"WEBP": "a WebP", "AVIF": "an AVIF", "HEIF": "a HEIC/HEIF"}.get(fmt, f"a {fmt}")
        raise ConversionError("binary", f"{name} is {what} image, not a document kb can read")
    for magic, what in _BINARY_MAGIC:
        if head.startswith(magic):
            raise ConversionError("binary", f"{name} is {what}, not a document kb can read")
    # Two- and three-byte magics also begin ordinary words ("MZ is…"): confirm them.
    if head.startswith(b"MZ") and b"\x00" in head[:64]:
        raise ConversionError("binary", f"{name} is a Windows executable, not a document kb can read")
    if head.startswith(b"BZh") and head[4:10] == b"1AY&SY":
        raise ConversionError("binary", f"{name} is bzip2-compressed data, not a document kb can read")
    if head[4:8] == b"ftyp" or head.startswith((b"RIFF", b"OggS", b"ID3", b"fLaC")):
        raise ConversionError("binary", f"{name} is audio or video, not a document kb can read")
    # UTF-16 and BOMs: look at the ASCII skeleton of the start.
    skeleton = head.lstrip(b"\xef\xbb\xbf\xff\xfe").replace(b"\x00", b"")
    suffix = PurePath(name).suffix.lower()
    if _HTML_START.match(skeleton):
        return "html"
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    # after the suffixes: a note or a page may open with an inline icon
    if _SVG_START.match(skeleton) or (suffix == ".svg" and _XML_START.match(skeleton)):
        return "svg"
    if suffix in OBSIDIAN_SUFFIXES:
        return OBSIDIAN_SUFFIXES[suffix]
    return "text"


def image_format(head: bytes) -> str | None:
    """Pillow's name for the image format the first bytes announce ('PNG', 'JPEG', 'HEIF'…), or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "GIF"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "WEBP"
    if head[4:8] == b"ftyp" and head[8:12] in _IMAGE_BRANDS:
        return "AVIF" if head[8:12] in (b"avif", b"avis") else "HEIF"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "TIFF"
    # "BM" also begins ordinary words: confirm it by the size of the header that follows.
    if (
        head.startswith(b"BM")
        and len(head) >= 18
        and int.from_bytes(head[14:18], "little") in _BMP_HEADER_SIZES
    ):
        return "BMP"
    return None
