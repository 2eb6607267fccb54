"""The OCR engines: RapidOCR (onnxruntime, models bundled in its wheel) and Apple Vision (macOS).

Both implement ``knowledge.convert.ocr.OcrEngine``: a Pillow image in, recognised lines out, boxes in
the image's pixels. RapidOCR's models are loaded from the wheel by path, so it never fetches anything;
it reads Traditional and Simplified Chinese and English, and has no bundled Thai model. Apple Vision
is asked for Chinese before English (with English first, mixed Chinese lines come back garbled), and
reads again in Thai when the first pass reads poorly and Thai is wanted; the languages this macOS
supports are asked at run time.
"""

from __future__ import annotations

import importlib.metadata
import io
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.convert.ocr_text import OcrLine, mean_confidence
from knowledge.errors import ConversionError
from knowledge.text import one_line

if TYPE_CHECKING:
    from PIL import Image

# Vision reads in Thai as well when its first pass averages below this (Thai read as Chinese is noise).
THAI_PASS_BELOW = 0.6
VISION_CODES = {"zh-Hant": "zh-Hant", "zh-Hans": "zh-Hans", "en": "en-US", "th": "th-TH"}
_RAPIDOCR_MODELS = {
    "Det.model_path": "PP-OCRv6_det_small.onnx",
    "Rec.model_path": "PP-OCRv6_rec_small.onnx",
    "Cls.model_path": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
}


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
                "ocr-failed", f"RapidOCR failed on this image ({type(exc).__name__}: {one_line(str(exc))})"
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
                candidates = result.topCandidates_(1)
                if not candidates:
                    continue
                candidate = candidates[0]
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
    try:
        languages, _ = request.supportedRecognitionLanguagesAndReturnError_(None)
    except AttributeError:  # before macOS 12: the languages of Vision's second revision
        return ["en-US", "zh-Hans", "zh-Hant"]
    return [str(code) for code in languages or ()]


def vision_languages(langs: Sequence[str], supported: Sequence[str]) -> tuple[list[str], list[str]]:
    """Vision's language lists: the first pass (Chinese first, then the rest) and the Thai pass (or []).

    Only languages this macOS supports are listed; Thai gets a pass of its own because Vision does not
    read it in the same request as Chinese.
    """
    codes = [VISION_CODES[lang] for lang in langs if lang in VISION_CODES]
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
