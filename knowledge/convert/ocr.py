"""Text from pictures of text: OCR engines behind one small interface, and the pure steps around them.

An engine turns a Pillow image into recognised lines (text, confidence, pixel box). Two engines:

* Apple Vision on macOS (nothing to download): Chinese listed first, because with English first mixed
  Chinese lines come back garbled; a second pass in Thai when the first reads poorly and Thai is asked for;
* RapidOCR elsewhere (PP-OCRv6 models bundled in the ``rapidocr`` wheel: Traditional and Simplified
  Chinese, English). Its models are loaded from the wheel by path, so it never fetches anything; it has
  no bundled Thai model, and kb does not download one.

``KB_OCR`` chooses: ``auto`` (Vision on macOS, RapidOCR elsewhere), ``vision``, ``rapidocr`` or ``off``.
The loaded engine is kept per process (:func:`engine_for`), so the conversion worker loads it once.

The rest is pure: the reading order of lines (top to bottom, left to right, simple columns one after
the other), lines to Markdown (one line per recognised text line, so a citation points at a real
line), the mean confidence, the "nothing legible" rule, and keeping a page in the one Chinese script it
is written in (a recogniser sometimes reads 奧 as its Simplified twin 奥 in a Traditional text).
"""

from __future__ import annotations

import functools
import importlib.metadata
import io
import logging
import os
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from knowledge.errors import ConversionError

if TYPE_CHECKING:
    from PIL import Image

    from knowledge.config import Settings

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
_VISION_CODES = {"zh-Hant": "zh-Hant", "zh-Hans": "zh-Hans", "en": "en-US", "th": "th-TH"}

# A page is legible when at least one line carrying a letter or digit is read this confidently.
LEGIBLE_CONFIDENCE = 0.6
# Vision reads in Thai as well when its first pass averages below this (Thai read as Chinese is noise).
THAI_PASS_BELOW = 0.6
# Margins are cut off before OCR where no pixel differs from the background by more than this (0-255).
INK_CONTRAST = 40
TRIM_PAD_PX = 32
# A picture more than this many widths tall is read in strips 1.5 widths tall, overlapping by enough
# to hold two lines of any size a screenshot uses whole.
TALL_RATIO = 2.5
BAND_RATIO = 1.5
BAND_OVERLAP_PX = 200
# Pictures are brought down to this many pixels before OCR: a phone photo of a page keeps ~200 dpi,
# and the recogniser's working memory stays well inside the conversion worker's address-space cap.
MAX_OCR_PIXELS = 3_000_000

_RAPIDOCR_MODELS = {
    "Det.model_path": "PP-OCRv6_det_small.onnx",
    "Rec.model_path": "PP-OCRv6_rec_small.onnx",
    "Cls.model_path": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
}
_KANA = re.compile(r"[\u3040-\u30ff]")
_SPACES = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")


@dataclass(frozen=True)
class OcrLine:
    """One recognised line: its text, the engine's confidence (0-1) and its box (x0, y0, x1, y1) in pixels."""

    text: str
    confidence: float
    box: tuple[float, float, float, float]


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
    """

    kind: str = "auto"
    langs: tuple[str, ...] = ("zh-Hant", "zh-Hans", "en")
    dpi: int = 150
    engine: OcrEngine | None = None

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


def ocr_warnings(spec: OcrSpec, unknown: Sequence[str] = (), platform: str = sys.platform) -> list[str]:
    """What the owner asked for that this machine's OCR cannot do, one sentence each."""
    kind = resolve_kind(spec.kind, platform)
    notes = []
    if kind == "vision" and platform != "darwin":
        notes.append("KB_OCR=vision needs macOS (Apple Vision); set KB_OCR=auto to use RapidOCR here")
    if kind == "rapidocr" and "th" in spec.langs:
        notes.append(
            "Thai is not read here: RapidOCR has no bundled Thai model and kb does not download one; "
            "Thai OCR needs Apple Vision on macOS (or drop th from KB_OCR_LANGS)"
        )
    if unknown:
        notes.append(
            f"KB_OCR_LANGS has unknown languages {', '.join(unknown)} (ignored); known: {', '.join(LANGUAGES)}"
        )
    if kind != "off" and not spec.langs:
        notes.append(f"KB_OCR_LANGS names no language kb knows; known: {', '.join(LANGUAGES)}")
    return notes


def describe_ocr(settings: Settings, platform: str = sys.platform) -> str:
    """One or two sentences for ``kb doctor``: which engine reads photos and scans, in which languages."""
    langs, unknown = parse_langs(settings.ocr_langs)
    spec = OcrSpec(kind=settings.ocr, langs=langs, dpi=settings.ocr_dpi)
    kind = resolve_kind(spec.kind, platform)
    if kind == "off":
        return (
            "off (KB_OCR=off): photos are refused and PDF pages without a text layer are skipped; "
            "set KB_OCR=auto to read them"
        )
    if kind == "vision":
        readable = [lang for lang in langs if lang in _VISION_CODES]
        what = f"Apple Vision reads {', '.join(readable) or 'nothing'}"
    else:
        readable = [lang for lang in langs if lang in RAPIDOCR_LANGUAGES]
        what = f"RapidOCR (PP-OCRv6, bundled models) reads {', '.join(readable) or 'nothing'}"
    text = f"{what}; scanned pages rendered at {spec.dpi} dpi, {settings.ocr_page_timeout_s:g} s per page"
    notes = ocr_warnings(spec, unknown, platform)
    return text + "".join(f". {note}" for note in notes)


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
        return VisionEngine(langs)
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


class RapidOcrEngine:
    """RapidOCR 3 with onnxruntime and the PP-OCRv6 models bundled in its wheel, never downloaded."""

    def __init__(self) -> None:
        try:
            import rapidocr
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise ConversionError(
                "ocr-unavailable",
                f"RapidOCR cannot be loaded ({exc}); reinstall kb's dependencies, or set KB_OCR=off",
            ) from exc
        models = Path(rapidocr.__file__).parent / "models"
        params: dict[str, object] = {key: str(models / name) for key, name in _RAPIDOCR_MODELS.items()}
        missing = [name for name in _RAPIDOCR_MODELS.values() if not (models / name).is_file()]
        if missing:
            raise ConversionError(
                "ocr-unavailable",
                f"RapidOCR's bundled model {missing[0]} is missing from {models}; reinstall rapidocr "
                "(kb never downloads OCR models)",
            )
        params.update(
            {
                # The console belongs to kb: RapidOCR's own handler would print every model load.
                "Global.log_level": "critical",
                # The 180° line classifier turns a few upright lines upside down and garbles them; pages
                # and photos arrive upright (EXIF rotation is applied before OCR).
                "Global.use_cls": False,
                # kb brings pictures down to MAX_OCR_PIXELS itself and reads a long screenshot in strips.
                "Global.max_side_len": 4000,
                # Detection on at most 1280 pixels a side, never enlarged: a small snippet is read at
                # its own size (the default enlarges it to 736 pixels high, slowly, for nothing); an A4
                # page's 7-point text is still found, in a third of the time and memory of full size.
                "Det.limit_type": "max",
                "Det.limit_side_len": 1280,
                # One line at a time: a batch is padded to its longest line, which on two cores costs
                # more time than it saves, and 300 MB more memory on a dense page.
                "Rec.rec_batch_num": 1,
                # All cores but one: onnxruntime's threads spin while they wait, and on a machine whose
                # cores are all busy (the daemon embeds while it converts) a page then takes 1.5× longer.
                "EngineConfig.onnxruntime.intra_op_num_threads": max(1, (os.cpu_count() or 2) - 1),
            }
        )
        logging.getLogger("RapidOCR").setLevel(logging.CRITICAL)
        self._ocr = RapidOCR(params=params)
        self.name = f"rapidocr {_version('rapidocr')} PP-OCRv6"

    def read(self, image: Image.Image) -> list[OcrLine]:
        import numpy as np

        bgr = np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])  # OpenCV's channel order
        try:
            out = self._ocr(bgr)
        except MemoryError:
            raise
        except Exception as exc:  # onnxruntime and OpenCV errors, translated once here
            if "alloc" in str(exc).lower():  # onnxruntime out of memory under the worker's cap
                raise MemoryError(str(exc)) from exc
            raise ConversionError(
                "ocr-failed", f"RapidOCR failed on this image ({type(exc).__name__}: {_shorten(str(exc))})"
            ) from exc
        if out.boxes is None or out.txts is None or out.scores is None:
            return []
        return [
            OcrLine(str(text), float(score), _quad_box(points))
            for points, text, score in zip(out.boxes, out.txts, out.scores, strict=True)
        ]


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _shorten(message: str, limit: int = 200) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _quad_box(points: Sequence[Sequence[float]]) -> tuple[float, float, float, float]:
    """The upright box around a quadrilateral's corner points."""
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


class VisionEngine:
    """Apple Vision's accurate text recogniser (macOS only), Chinese first, Thai as a second pass."""

    name = "apple-vision"

    def __init__(self, langs: Sequence[str]) -> None:
        import Vision  # pyobjc, installed with ocrmac on macOS only

        self._vision = Vision
        self._first, self._thai = vision_languages(langs, _vision_supported(Vision))

    def read(self, image: Image.Image) -> list[OcrLine]:
        lines = self._recognize(image, self._first)
        if self._thai and wants_thai_pass(lines):
            lines = better_pass(lines, self._recognize(image, self._thai))
        return lines

    def _recognize(self, image: Image.Image, languages: list[str]) -> list[OcrLine]:
        import objc

        png = io.BytesIO()
        image.save(png, format="PNG")
        with objc.autorelease_pool():
            request = self._vision.VNRecognizeTextRequest.alloc().init()
            request.setRecognitionLevel_(0)  # accurate
            request.setUsesLanguageCorrection_(True)
            request.setRecognitionLanguages_(languages)
            handler = self._vision.VNImageRequestHandler.alloc().initWithData_options_(png.getvalue(), None)
            is_done, error = handler.performRequests_error_([request], None)
            if not is_done:
                raise ConversionError("ocr-failed", f"Apple Vision could not read the image ({error})")
            lines = []
            for result in request.results() or ():
                candidate = result.topCandidates_(1)[0]
                box = result.boundingBox()
                bbox = (box.origin.x, box.origin.y, box.size.width, box.size.height)
                lines.append(
                    OcrLine(
                        str(candidate.string()), float(candidate.confidence()), vision_box(bbox, *image.size)
                    )
                )
        return lines


def _vision_supported(vision: object) -> list[str]:
    """The recognition languages this macOS offers for the accurate level (asked at run time)."""
    request = vision.VNRecognizeTextRequest.alloc().init()  # type: ignore[attr-defined]
    request.setRecognitionLevel_(0)
    languages, _ = request.supportedRecognitionLanguagesAndReturnError_(None)
    return [str(code) for code in languages or ()]


def vision_languages(langs: Sequence[str], supported: Sequence[str]) -> tuple[list[str], list[str]]:
    """Vision's language lists: the first pass (Chinese first, then the rest) and the Thai pass (or []).

    Only languages this macOS supports are listed; Thai gets a pass of its own because Vision does not
    read it in the same request as Chinese.
    """
    codes = [_VISION_CODES[lang] for lang in langs if lang in _VISION_CODES]
    chinese = [code for code in codes if code.startswith("zh")]
    others = [code for code in codes if not code.startswith("zh") and code != "th-TH"]
    first = [code for code in chinese + others if code in supported]
    thai: list[str] = []
    if "th-TH" in codes and "th-TH" in supported:
        thai = ["th-TH"] + [code for code in others if code in supported]
    if not first:  # Thai alone, or nothing this macOS supports: one pass, Vision's default at worst
        return thai or ["en-US"], []
    return first, thai


def vision_box(
    bbox: tuple[float, float, float, float], width: int, height: int
) -> tuple[float, float, float, float]:
    """Vision's normalised box (x, y, w, h from the bottom left) in pixels from the top left."""
    x, y, w, h = bbox
    return (x * width, (1 - y - h) * height, (x + w) * width, (1 - y) * height)


def wants_thai_pass(lines: Sequence[OcrLine]) -> bool:
    """Does the first pass look like Thai read as something else (nothing, or mostly unsure lines)?"""
    mean = mean_confidence(lines)
    return mean is None or mean < THAI_PASS_BELOW


def better_pass(first: list[OcrLine], second: list[OcrLine]) -> list[OcrLine]:
    """The pass that read more text more surely (confidence times characters, summed)."""

    def weight(lines: list[OcrLine]) -> float:
        return sum(line.confidence * len(line.text.strip()) for line in lines)

    return second if weight(second) > weight(first) else first


# -- pure steps -------------------------------------------------------------------------------


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


def ink_box(image: Image.Image) -> tuple[int, int, int, int] | None:
    """The box around everything that stands out from the background, with a margin; None if nothing does."""
    from PIL import Image as PILImage
    from PIL import ImageChops

    grey = image.convert("L")
    histogram = grey.histogram()
    half, seen, background = grey.width * grey.height / 2, 0, 255
    for level, count in enumerate(histogram):  # the median grey: the page (or a dark screen)
        seen += count
        if seen >= half:
            background = level
            break
    difference = ImageChops.difference(grey, PILImage.new("L", grey.size, background))
    box = difference.point(lambda v: 255 if v > INK_CONTRAST else 0).getbbox()
    if box is None:
        return None
    left, top, right, bottom = box
    return (
        max(0, left - TRIM_PAD_PX),
        max(0, top - TRIM_PAD_PX),
        min(grey.width, right + TRIM_PAD_PX),
        min(grey.height, bottom + TRIM_PAD_PX),
    )


@dataclass(frozen=True)
class Band:
    """A horizontal strip of a tall picture (top, bottom) and the part of it whose lines it reports."""

    top: int
    bottom: int
    own_top: float
    own_bottom: float

    def owns(self, y: float) -> bool:
        """Is a line centred at ``y`` (picture pixels) this band's to report?"""
        return self.own_top <= y < self.own_bottom


def bands(width: int, height: int) -> list[Band]:
    """Strips to read a picture in: itself, or overlapping strips when it is more than TALL_RATIO widths tall.

    Neighbouring strips overlap by BAND_OVERLAP_PX and split the overlap between them at its middle; a
    line cut at the edge of one strip is whole in the next and is reported by the one that owns its centre.
    """
    band = max(int(BAND_RATIO * width), 2 * BAND_OVERLAP_PX)
    if height <= TALL_RATIO * width or height <= band:
        return [Band(0, height, float("-inf"), float("inf"))]
    step = band - BAND_OVERLAP_PX
    tops = list(range(0, height - band, step)) + [height - band]
    out = []
    for i, top in enumerate(tops):
        own_top = float("-inf") if i == 0 else (top + tops[i - 1] + band) / 2
        own_bottom = float("inf") if i == len(tops) - 1 else (tops[i + 1] + top + band) / 2
        out.append(Band(top, top + band, own_top, own_bottom))
    return out


def clean_line(text: str) -> str:
    """One line of plain text: no control or invisible characters, single spaces."""
    return _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip()


def has_words(text: str) -> bool:
    """Does the text hold a letter or a digit (of any script), not only punctuation and symbols?"""
    return any(ch.isalnum() for ch in text)


def legible_lines(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Lines with their text cleaned, without the empty and the punctuation-only ones."""
    out = []
    for line in lines:
        text = clean_line(line.text)
        if has_words(text):
            out.append(replace(line, text=text))
    return out


def is_legible(lines: Sequence[OcrLine], *, floor: float = LEGIBLE_CONFIDENCE) -> bool:
    """True when at least one line carries a letter or digit and is read at ``floor`` or better."""
    return any(line.confidence >= floor and has_words(line.text) for line in lines)


def mean_confidence(lines: Sequence[OcrLine]) -> float | None:
    """The mean of the lines' confidences; None without lines."""
    return statistics.fmean(line.confidence for line in lines) if lines else None


def reading_order(lines: Sequence[OcrLine]) -> list[list[OcrLine]]:
    """Lines as a reader takes them, in blocks: top to bottom, left to right, columns one after another.

    Pieces of one visual line (RapidOCR cuts a line at a wide gap) become one line. A page with clear
    columns (a gutter no line crosses, with full lines on both sides) is read a column at a time,
    band by band between lines that span the columns (a title, a caption).
    """
    lines = [line for line in lines if line.text.strip()]
    if not lines:
        return []
    bounds = _columns(lines)
    if len(bounds) < 2:
        return [_rows(lines)]
    columns = _widened(bounds)
    blocks: list[list[OcrLine]] = []
    band: list[OcrLine] = []

    def flush() -> None:
        for left, right in columns:
            column = [line for line in band if left <= line.box[0] and line.box[2] <= right]
            if column:
                blocks.append(_rows(column))
        band.clear()

    for line in sorted(lines, key=lambda item: (item.box[1], item.box[0])):
        if any(left <= line.box[0] and line.box[2] <= right for left, right in columns):
            band.append(line)
        else:  # crosses a gutter
            flush()
            blocks.append([line])
    flush()
    return [block for block in blocks if block]


def _height(line: OcrLine) -> float:
    return max(1.0, line.box[3] - line.box[1])


def _rows(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Lines top to bottom; pieces side by side at the same height joined into one line."""
    rows: list[list[OcrLine]] = []
    for line in sorted(lines, key=lambda item: ((item.box[1] + item.box[3]) / 2, item.box[0])):
        row = rows[-1] if rows else None
        if row is not None and all(_same_row(line, other) for other in row):
            row.append(line)
        else:
            rows.append([line])
    return [_join(row) for row in rows]


def _same_row(a: OcrLine, b: OcrLine) -> bool:
    """Side by side (no horizontal overlap) with centres within half a line height."""
    centre_gap = abs((a.box[1] + a.box[3]) / 2 - (b.box[1] + b.box[3]) / 2)
    overlaps = a.box[0] < b.box[2] and b.box[0] < a.box[2]
    return not overlaps and centre_gap <= 0.5 * min(_height(a), _height(b))


def _join(row: list[OcrLine]) -> OcrLine:
    """One line of the pieces of a row, left to right; confidence weighted by length."""
    if len(row) == 1:
        return row[0]
    row = sorted(row, key=lambda item: item.box[0])
    text = " ".join(piece.text.strip() for piece in row)
    weights = [max(1, len(piece.text.strip())) for piece in row]
    confidence = sum(p.confidence * w for p, w in zip(row, weights, strict=True)) / sum(weights)
    box = (
        min(p.box[0] for p in row),
        min(p.box[1] for p in row),
        max(p.box[2] for p in row),
        max(p.box[3] for p in row),
    )
    return OcrLine(text, confidence, box)


def _columns(lines: Sequence[OcrLine]) -> list[tuple[float, float]]:
    """The x ranges of the page's text columns: one range unless clear gutters split it.

    A gutter is a vertical strip in the middle of the page, a line height wide or more, that no line
    narrower than the page touches (titles and captions across the columns may).
    """
    left = min(line.box[0] for line in lines)
    right = max(line.box[2] for line in lines)
    width = right - left
    height = statistics.median(_height(line) for line in lines)
    narrow = [line for line in lines if line.box[2] - line.box[0] < 0.6 * width]
    if len(narrow) < 6 or width <= 4 * height:
        return [(left, right)]
    bins = 400
    step = width / bins
    touched = [0] * bins
    for line in narrow:
        for i in range(int((line.box[0] - left) / step), min(bins, int((line.box[2] - left) / step) + 1)):
            touched[i] += 1
    allowed = int(0.02 * len(narrow))  # a stray line poking into the gutter
    gutters: list[tuple[float, float]] = []
    start = None
    for i in range(int(bins * 0.15), int(bins * 0.85) + 1):
        is_empty = i < bins and touched[i] <= allowed
        if is_empty and start is None:
            start = i
        elif not is_empty and start is not None:
            if (i - start) * step >= height:
                gutters.append((left + start * step, left + i * step))
            start = None
    edges = [left] + [x for gutter in gutters for x in gutter] + [right]
    bounds = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]
    return bounds if len(bounds) > 1 and _are_text_columns(lines, bounds, width) else [(left, right)]


def _are_text_columns(lines: Sequence[OcrLine], bounds: list[tuple[float, float]], width: float) -> bool:
    """Columns of running text: each a quarter of the page wide or more, with three lines or more,
    most of them filling it. A form or a table (short labels beside values) fails this and is read
    row by row instead."""
    for left, right in bounds:
        inside = [line for line in lines if left <= line.box[0] and line.box[2] <= right]
        if right - left < 0.25 * width or len(inside) < 3:
            return False
        widths = sorted(line.box[2] - line.box[0] for line in inside)
        if statistics.median(widths) < 0.6 * (right - left):
            return False
    return True


def _widened(bounds: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Column ranges reaching half-way into the gutters beside them (a line may poke into a gutter)."""
    out = []
    for i, (left, right) in enumerate(bounds):
        lo = (bounds[i - 1][1] + left) / 2 if i else float("-inf")
        hi = (right + bounds[i + 1][0]) / 2 if i + 1 < len(bounds) else float("inf")
        out.append((lo, hi))
    return out


def lines_markdown(blocks: Sequence[Sequence[OcrLine]]) -> str:
    """Markdown of blocks of lines: one line per text line, a blank line between blocks.

    A line that would read as a Markdown heading ("# …") keeps its text but not the heading role.
    """
    out = []
    for block in blocks:
        texts = [clean_line(line.text) for line in block]
        texts = ["\\" + text if text.startswith("#") else text for text in texts if text]
        if texts:
            out.append("\n".join(texts))
    return "\n\n".join(out)


def keep_script(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Lines of a page written in one Chinese script, with stray characters of the other script put back.

    A Traditional page (Traditional forms outnumber Simplified-only ones four to one, three at least)
    gets its few Simplified-only characters converted (phrase-aware, so 皇后 and 公里 stay); a Simplified
    page likewise. Mixed pages, pages with few Chinese characters and Japanese (kana) are left alone.
    """
    text = "".join(line.text for line in lines)
    if _KANA.search(text):
        return list(lines)
    traditional = sum(1 for ch in text if _is_traditional_form(ch))
    simplified = sum(1 for ch in text if _is_simplified_only(ch))
    if traditional >= 3 and simplified and simplified * 4 <= traditional:
        convert, is_stray = _opencc("s2t"), _is_simplified_only
    elif simplified >= 3 and traditional and traditional * 4 <= simplified:
        convert, is_stray = _opencc("t2s"), _is_traditional_form
    else:
        return list(lines)
    out = []
    for line in lines:
        if any(is_stray(ch) for ch in line.text):
            converted = convert.convert(line.text)
            if len(converted) == len(line.text):
                fixed = "".join(
                    new if is_stray(old) else old for old, new in zip(line.text, converted, strict=True)
                )
                line = replace(line, text=fixed)
        out.append(line)
    return out


@functools.lru_cache(maxsize=8)
def _opencc(config: str):  # opencc has no type hints
    """An OpenCC converter, built once per process (loading its dictionaries takes a few ms)."""
    import opencc

    return opencc.OpenCC(config)


@functools.lru_cache(maxsize=65536)
def _is_traditional_form(ch: str) -> bool:
    """A Chinese character that has a different Simplified form (資, 奧, 們)."""
    return "\u3400" <= ch <= "\U0002ffff" and _opencc("t2s").convert(ch) != ch


@functools.lru_cache(maxsize=65536)
def _is_simplified_only(ch: str) -> bool:
    """A character used in Simplified text only (资, 奥, 们): not Traditional, nor a Taiwan/HK variant."""
    return (
        "\u3400" <= ch <= "\U0002ffff"
        and _opencc("t2s").convert(ch) == ch
        and _opencc("s2t").convert(ch) != ch
        and _opencc("tw2t").convert(ch) == ch
        and _opencc("hk2t").convert(ch) == ch
    )
