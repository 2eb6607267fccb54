"""Text from pictures of text: OCR engines behind one small interface, chosen at run time.

An engine turns a Pillow image into recognised lines (text, confidence, pixel box). ``KB_OCR``
chooses it: ``auto`` is Apple Vision on macOS (nothing to download) and RapidOCR elsewhere (PP-OCRv6
models bundled in its wheel: Traditional and Simplified Chinese, English; no Thai, and kb downloads no
model), or ``vision``, ``rapidocr``, ``off``. The loaded engine is kept per process
(:func:`engine_for`), so the conversion worker loads it once.

:func:`read_text` is what the converters call: blank margins cut off, a tall picture read in strips,
then the pure steps of ocr_text.py (legible lines, one script per page, reading order). The engines
themselves are in ocr_engines.py.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from knowledge.convert.ocr_text import (
    OcrLine,
    bands,
    ink_box,
    is_legible,
    keep_script,
    legible_lines,
    reading_order,
)
from knowledge.errors import ConversionError

if TYPE_CHECKING:
    from PIL import Image

    from knowledge.config import Settings

__all__ = ["OcrEngine", "OcrLine", "OcrSpec", "describe_ocr", "engine_for", "make_engine", "read_text"]

KINDS = ("auto", "vision", "rapidocr", "off")
# The languages kb knows how to ask for, and what else they may be called in KB_OCR_LANGS.
LANGUAGES = ("zh-Hant", "zh-Hans", "en", "th")
_ALIASES = {
    "zh-hant": "zh-Hant", "zh-tw": "zh-Hant", "zh-hk": "zh-Hant", "zh_tw": "zh-Hant", "cht": "zh-Hant",
    "zh-hans": "zh-Hans", "zh-cn": "zh-Hans", "zh_cn": "zh-Hans", "chs": "zh-Hans",
    "en": "en", "en-us": "en", "en-gb": "en", "eng": "en",
    "th": "th", "th-th": "th", "tha": "th",
}  # fmt: skip
RAPIDOCR_LANGUAGES = frozenset({"zh-Hant", "zh-Hans", "en"})
# Pictures are brought down to this many pixels before OCR: a phone photo of a page keeps ~200 dpi,
# and the recogniser's working memory stays well inside the conversion worker's address-space cap.
MAX_OCR_PIXELS = 3_000_000


class OcrEngine(Protocol):
    """Something that reads the text lines of an image."""

    name: str

    def read(self, image: Image.Image) -> list[OcrLine]:
        """The lines recognised in ``image``, in any order."""
        ...


@dataclass(frozen=True)
class OcrSpec:
    """Which engine to use, for which languages, and the resolution scanned pages are rendered at.

    Small and picklable: it travels to the conversion worker, which loads the engine itself. ``engine``
    hands over an engine object instead (a stand-in that must itself pickle to reach the worker).
    ``clock`` times the pages read (their timeout, a turn, a file's budget); it travels with the engine.
    """

    kind: str = "auto"
    langs: tuple[str, ...] = ("zh-Hant", "zh-Hans", "en")
    dpi: int = 150
    engine: OcrEngine | None = None
    clock: Callable[[], float] = time.monotonic

    @property
    def is_on(self) -> bool:
        return self.kind != "off"


# -- settings ---------------------------------------------------------------------------------


def parse_langs(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """KB_OCR_LANGS as (known languages in kb's spelling, unknown entries), each once, in order."""
    known: list[str] = []
    unknown: list[str] = []
    for part in text.split(","):
        entry = part.strip()
        if not entry:
            continue
        lang = _ALIASES.get(entry.lower().replace("_", "-"), _ALIASES.get(entry.lower()))
        bucket, value = (known, lang) if lang else (unknown, entry)
        if value not in bucket:
            bucket.append(value)
    return tuple(known), tuple(unknown)


def ocr_spec(settings: Settings) -> OcrSpec:
    """The OCR settings (KB_OCR, KB_OCR_LANGS, KB_OCR_DPI) as a spec for the converters."""
    langs, _ = parse_langs(settings.ocr_langs)
    return OcrSpec(kind=settings.ocr, langs=langs, dpi=settings.ocr_dpi)


def resolve_kind(kind: str, platform: str = sys.platform) -> str:
    """'vision', 'rapidocr' or 'off': ``auto`` is Apple Vision on macOS and RapidOCR elsewhere."""
    if kind not in KINDS:
        raise ValueError(f"unknown OCR engine {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "auto":
        return "vision" if platform == "darwin" else "rapidocr"
    return kind


def as_written(message: str, /, **facts: object) -> str:
    """A message as written (English), its ``{placeholders}`` filled."""
    return message.format(**facts) if facts else message


def ocr_warnings(
    spec: OcrSpec,
    unknown: Sequence[str] = (),
    platform: str = sys.platform,
    tr: Callable[..., str] = as_written,
) -> list[str]:
    """What the owner asked for that this machine's OCR cannot do, one sentence each (``tr``: a message
    in the reader's words, the catalog's ``Words.tr``; by default as written, in English)."""
    kind = resolve_kind(spec.kind, platform)
    notes = []
    if kind == "vision" and platform != "darwin":
        notes.append(tr("KB_OCR=vision needs macOS (Apple Vision); set KB_OCR=auto to use RapidOCR here"))
    if kind == "rapidocr" and "th" in spec.langs:
        notes.append(
            tr(
                "Thai is not read here: RapidOCR has no bundled Thai model and kb does not download one; "
                "Thai OCR needs Apple Vision on macOS (or drop th from KB_OCR_LANGS)"
            )
        )
    known = ", ".join(LANGUAGES)
    if unknown:
        notes.append(
            tr(
                "KB_OCR_LANGS has unknown languages {unknown} (ignored); known: {known}",
                unknown=", ".join(unknown),
                known=known,
            )
        )
    if kind != "off" and not spec.langs:
        notes.append(tr("KB_OCR_LANGS names no language kb knows; known: {known}", known=known))
    return notes


def describe_ocr(
    settings: Settings, platform: str = sys.platform, tr: Callable[..., str] = as_written
) -> str:
    """One or two sentences for ``kb doctor``: which engine reads photos and scans, in which languages."""
    langs, unknown = parse_langs(settings.ocr_langs)
    spec = OcrSpec(kind=settings.ocr, langs=langs, dpi=settings.ocr_dpi)
    kind = resolve_kind(spec.kind, platform)
    if kind == "off":
        return tr(
            "off (KB_OCR=off): photos are refused and PDF pages without a text layer are skipped; "
            "set KB_OCR=auto to read them"
        )
    if kind == "vision":
        readable = list(langs)
        what = tr("Apple Vision reads {langs}", langs=", ".join(readable) or tr("nothing"))
    else:
        readable = [lang for lang in langs if lang in RAPIDOCR_LANGUAGES]
        what = tr(
            "RapidOCR (PP-OCRv6, bundled models) reads {langs}",
            langs=", ".join(readable) or tr("nothing"),
        )
        if "th" not in langs:  # said anyway: the owner keeps Thai documents
            what += tr("; not Thai (photos of Thai text are refused as ocr-unreadable: read them on a Mac)")
    text = tr(
        "{what}; scanned pages rendered at {dpi} dpi, {seconds} s per page",
        what=what,
        dpi=spec.dpi,
        seconds=f"{settings.ocr_page_timeout_s:g}",
    )
    notes = ocr_warnings(spec, unknown, platform, tr)
    for note in notes:
        text = tr("{text}. {note}", text=text, note=note)
    return text


# -- engines ----------------------------------------------------------------------------------


def make_engine(kind: str, langs: Sequence[str], *, platform: str = sys.platform) -> OcrEngine | None:
    """The engine KB_OCR asks for on this platform, loaded; None when OCR is off."""
    resolved = resolve_kind(kind, platform)
    if resolved == "off":
        return None
    if resolved == "vision":
        if platform != "darwin":
            raise ConversionError(
                "ocr-unavailable",
                "KB_OCR=vision needs macOS (Apple Vision); set KB_OCR=auto or KB_OCR=rapidocr on this machine",
            )
        from knowledge.convert.ocr_engines import VisionEngine

        return VisionEngine(langs)
    from knowledge.convert.ocr_engines import RapidOcrEngine

    return RapidOcrEngine()


# One loaded engine per (kind, languages) and per process: the conversion worker loads a model once
# and reuses it for every page and file it converts; a replaced worker loads it again.
_ENGINES: dict[tuple[str, tuple[str, ...]], OcrEngine | None] = {}


def engine_for(spec: OcrSpec) -> OcrEngine | None:
    """This process's engine for ``spec`` (or the engine it carries), loaded on first use; None when off."""
    if spec.engine is not None:
        return spec.engine if spec.is_on else None
    key = (spec.kind, spec.langs)
    if key not in _ENGINES:
        _ENGINES[key] = make_engine(spec.kind, spec.langs)
    return _ENGINES[key]


def read_text(engine: OcrEngine, image: Image.Image) -> list[list[OcrLine]]:
    """The legible text of an image in reading order, in blocks of lines; [] when nothing is legible."""
    lines = legible_lines(read_lines(engine, image))
    if not is_legible(lines):
        return []
    return reading_order(keep_script(lines))


def read_lines(engine: OcrEngine, image: Image.Image) -> list[OcrLine]:
    """Every line the engine reads in an image, with boxes in the image's pixels.

    The blank margins are cut off first: RapidOCR's detector misses a short line alone on a large
    white page, and finds it in the cropped picture. A picture much taller than wide (a long phone
    screenshot) is read in overlapping bands, so its text is not shrunk to nothing.
    """
    left, top, right, bottom = ink_box(image) or (0, 0, *image.size)
    image = image.crop((left, top, right, bottom))
    width, height = image.size
    lines: list[OcrLine] = []
    for band in bands(width, height):
        part = (
            image if (band.top, band.bottom) == (0, height) else image.crop((0, band.top, width, band.bottom))
        )
        for line in engine.read(part):
            x0, y0, x1, y1 = line.box
            box = (x0 + left, y0 + top + band.top, x1 + left, y1 + top + band.top)
            if band.owns((y0 + y1) / 2 + band.top):
                lines.append(replace(line, box=box))
    return lines
