"""Photos, screenshots and scanned images → Markdown, through OCR.

PNG, JPEG, WebP, HEIC/HEIF and AVIF (pillow-heif and Pillow decode them), GIF, BMP and TIFF (the
first frame). Decoding is guarded: only the format the bytes announce is tried (never Pillow's whole
list, which includes formats that call out to other programs), a picture of more than
``IMAGE_MAX_PIXELS`` is refused before it is decoded (a decompression bomb is a small file with huge
dimensions), a truncated or corrupt file is refused, a phone photo is turned upright by its EXIF
orientation, transparency is laid on white, and a large photo is brought down to what OCR needs.

The Markdown is one section, ``## Text``, with one line per recognised text line in reading order.
"""

from __future__ import annotations

import functools
import io
import math
import re
import warnings
from collections.abc import Callable

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from knowledge.convert.base import TITLE_MAX_CHARS, Converted, OcrFacts
from knowledge.convert.ocr import MAX_OCR_PIXELS, OcrSpec, engine_for, read_text
from knowledge.convert.ocr_text import is_readable, lines_markdown, mean_confidence
from knowledge.convert.sniff import image_format
from knowledge.errors import ConversionError
from knowledge.text import one_line, shorten

# Larger pictures are refused undecoded: a 50-megapixel phone photo passes, a bomb does not.
IMAGE_MAX_PIXELS = 80_000_000
SECTION = "## Text"


def image_to_markdown(
    data: bytes,
    *,
    name: str = "image",
    ocr: OcrSpec | None,
    progress: Callable[[int, int], None] | None = None,
) -> Converted:
    """Read the text of an image; ConversionError ``no-text`` when nothing is legible, ``ocr-off`` when off."""
    engine = engine_for(ocr) if ocr is not None else None  # loaded once per process
    if engine is None:
        raise ConversionError(
            "ocr-off",
            f"{name} is an image and OCR is off (KB_OCR=off), so kb cannot read it; "
            "set KB_OCR=auto to read text from photos and scans",
        )
    image = load_image(data, name=name)
    if progress:
        progress(0, 1)
    blocks = read_text(engine, image)
    if progress:
        progress(1, 1)
    if not blocks:
        raise ConversionError(
            "no-text",
            f"nothing legible in {name}: OCR found no readable text (a photo without text, or too "
            "blurred, dark or small); take the picture again closer and sharper",
        )
    lines = [line for block in blocks for line in block]
    if not is_readable(lines):
        raise ConversionError("ocr-unreadable", unreadable_message(name, engine.name, lines))
    return Converted(
        title=shorten(lines[0].text, TITLE_MAX_CHARS),
        markdown=f"{SECTION}\n\n{lines_markdown(blocks)}\n",
        converter="image",
        ocr=OcrFacts(engine=engine.name, confidence=mean_confidence(lines)),
    )


def unreadable_message(name: str, engine: str, lines: list) -> str:
    """Why a photo whose text OCR could not read is refused, naming what the engine here reads."""
    sample = " ".join(line.text for line in lines)[:60]
    what = "Chinese and English" if "rapidocr" in engine.lower() else "the languages of KB_OCR_LANGS"
    return (
        f"the text in {name} is not legible to the OCR engine here ({engine} reads {what}; it read "
        f"only {sample!r}): a photo of Thai text is read on a Mac (Apple Vision, KB_OCR_LANGS with th); "
        "otherwise take the picture again closer and sharper"
    )


def load_image(data: bytes, *, name: str = "image", max_pixels: int = MAX_OCR_PIXELS) -> Image.Image:
    """Decode an image safely: upright, RGB on white, at most ``max_pixels``; ConversionError otherwise."""
    fmt = image_format(data[:64])
    if fmt is None:
        raise ConversionError("image-unsupported", f"{name} is not an image format kb reads")
    _register_heif()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=[fmt])
            width, height = image.size
            if width * height > IMAGE_MAX_PIXELS:
                raise _too_large(name, width * height, f" ({width}×{height})")
            if width * height > max_pixels and fmt == "JPEG":
                scale = math.sqrt(max_pixels / (width * height))
                image.draft("RGB", (math.ceil(width * scale), math.ceil(height * scale)))  # decode smaller
            image.load()
            image = ImageOps.exif_transpose(image)
    except ConversionError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:  # Pillow's own limit
        pixels = re.search(r"\((\d+) pixels\)", str(exc))
        raise _too_large(name, int(pixels.group(1)) if pixels else 0, "") from exc
    except MemoryError:
        raise
    except (
        UnidentifiedImageError,
        OSError,
        ValueError,
        SyntaxError,
        EOFError,
        IndexError,
        KeyError,
        RuntimeError,
    ) as exc:
        raise ConversionError(
            "image-corrupt",
            f"{name} is a damaged or truncated {fmt} image ({type(exc).__name__}: {one_line(str(exc), 160)}); "
            "save or export it again",
        ) from exc
    try:
        return _downscale(_to_rgb(image), max_pixels)
    except (ValueError, OSError, TypeError) as exc:  # a mode Pillow cannot turn into RGB
        raise ConversionError(
            "image-unsupported",
            f"{name} is a {fmt} image in a form kb cannot read (mode {image.mode}); export it as PNG or JPEG",
        ) from exc


def _too_large(name: str, pixels: int, size: str) -> ConversionError:
    megapixels = f"{pixels / 1e6:.0f} megapixels" if pixels else "more pixels than that"
    return ConversionError(
        "image-too-large",
        f"{name} is {megapixels}{size}, more than kb decodes ({IMAGE_MAX_PIXELS // 1_000_000} megapixels); "
        "it was refused undecoded (a decompression bomb, or a huge picture: resize it and drop it in again)",
    )


def _to_rgb(image: Image.Image) -> Image.Image:
    """RGB, transparency laid on white (a transparent screenshot's text stays dark on light)."""
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (
        image.mode == "P" and "transparency" in image.info
    ):
        rgba = image.convert("RGBA")
        page = Image.new("RGB", rgba.size, "white")
        page.paste(rgba, mask=rgba.getchannel("A"))
        return page
    if image.mode in ("I", "F") or image.mode.startswith("I;16"):  # 16-bit and float scans: stretch to 8 bits
        values = np.asarray(image, dtype=np.float64)  # any byte order (I;16B is common scanner output)
        low, high = float(values.min()), float(values.max())
        scaled = (values - low) * (255.0 / ((high - low) or 1.0))
        image = Image.fromarray(np.clip(scaled, 0, 255).astype(np.uint8), "L")
    return image.convert("RGB")


def _downscale(image: Image.Image, max_pixels: int) -> Image.Image:
    """The image, brought down to ``max_pixels`` when larger (aspect kept)."""
    width, height = image.size
    if width * height <= max_pixels:
        return image
    scale = math.sqrt(max_pixels / (width * height))
    size = (max(1, int(width * scale)), max(1, int(height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


@functools.cache
def _register_heif() -> None:
    """Let Pillow open HEIC/HEIF (pillow-heif), once per process."""
    import pillow_heif

    pillow_heif.register_heif_opener()
