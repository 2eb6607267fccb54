"""Pictures of text the OCR tests and the benchmark draw themselves: lines in Noto Sans CJK, pages, PDFs.

Noto Sans CJK SC (bundled by mplfonts) has the Traditional Chinese glyphs too. Images are encoded as
PNG, JPEG (with an EXIF orientation, as phones write it), WebP or HEIC; scans become image-only PDFs
(Pillow) or PDFs that mix a text page with a scanned one (reportlab).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import mplfonts
from PIL import Image, ImageDraw, ImageFont

# A Chinese character or full-width sign alone; a run of other characters with its trailing spaces.
_UNITS = re.compile(
    r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+\s*|\s+"
)
FONT = Path(mplfonts.__file__).parent / "fonts" / "NotoSansCJKsc-Regular.otf"
A4_INCHES = (8.27, 11.69)


def font(size_px: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT), size_px)


def text_image(
    lines: list[str], *, size_px: int = 28, margin_px: int = 24, spacing: float = 1.6
) -> Image.Image:
    """Black lines of text on white, each on its own line, the picture just large enough."""
    face = font(size_px)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    width = max(int(probe.textlength(line, font=face)) for line in lines) + 2 * margin_px
    step = int(size_px * spacing)
    image = Image.new("RGB", (width, 2 * margin_px + step * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((margin_px, margin_px + i * step), line, font=face, fill="black")
    return image


def wrap(text: str, face: ImageFont.FreeTypeFont, width_px: float) -> list[str]:
    """Lines of at most ``width_px``, broken between words, or between any two Chinese characters."""
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    lines: list[str] = []
    line = ""
    for unit in _UNITS.findall(" ".join(text.split())):
        trial = line + unit
        if line.strip() and probe.textlength(trial.rstrip(), font=face) > width_px:
            lines.append(line.rstrip())
            line = unit.lstrip()
        else:
            line = trial
    if line.strip():
        lines.append(line.rstrip())
    return lines


def a4_page(paragraphs: list[str], *, dpi: int = 150, size_pt: float = 11) -> tuple[Image.Image, list[str]]:
    """An A4 page at ``dpi`` filled with the paragraphs (2 cm margins); the picture and its lines."""
    width, height = int(A4_INCHES[0] * dpi), int(A4_INCHES[1] * dpi)
    size_px = round(size_pt / 72 * dpi)
    margin = round(2 / 2.54 * dpi)
    face = font(size_px)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    y = margin
    written: list[str] = []
    for paragraph in paragraphs:
        for line in wrap(paragraph, face, width - 2 * margin):
            if y + size_px > height - margin:
                return image, written
            draw.text((margin, y), line, font=face, fill="black")
            written.append(line)
            y += round(size_px * 1.5)
        y += round(size_px * 0.8)
    return image, written


def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    """The image's bytes in ``fmt`` (PNG, JPEG, WEBP, HEIF, GIF, BMP, TIFF)."""
    if fmt == "HEIF":
        import pillow_heif

        pillow_heif.register_heif_opener()
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def phone_jpeg(image: Image.Image, orientation: int) -> bytes:
    """A JPEG stored the way a phone held sideways stores it: pixels turned, EXIF saying how to undo it."""
    stored = {
        3: image.transpose(Image.Transpose.ROTATE_180),
        6: image.transpose(Image.Transpose.ROTATE_90),  # shown after turning 90° clockwise
        8: image.transpose(Image.Transpose.ROTATE_270),
    }[orientation]
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(stored, "JPEG", quality=92, exif=exif.tobytes())


def scanned_pdf(pages: list[Image.Image], *, dpi: int = 150) -> bytes:
    """An image-only PDF, one picture per page (what a scanner without OCR produces)."""
    buffer = io.BytesIO()
    first, *rest = [page.convert("RGB") for page in pages]
    first.save(buffer, format="PDF", save_all=True, append_images=rest, resolution=dpi)
    return buffer.getvalue()


def mixed_pdf(text_lines: list[str], scan: Image.Image, *, stamp: str | None = None) -> bytes:
    """Page 1 typed text (a text layer); page 2 a full-page scan, with a small text ``stamp`` if given."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4)
    y = A4[1] - 72
    for line in text_lines:
        pdf.drawString(72, y, line)
        y -= 16
    pdf.showPage()
    pdf.drawImage(ImageReader(scan), 0, 0, width=A4[0], height=A4[1])
    if stamp:
        pdf.setFont("Helvetica", 6)
        pdf.drawString(20, 10, stamp)
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def blank_page(dpi: int = 150) -> Image.Image:
    """A white A4 page with a faint smudge: nothing legible on it."""
    width, height = int(A4_INCHES[0] * dpi), int(A4_INCHES[1] * dpi)
    image = Image.new("RGB", (width, height), "white")
    ImageDraw.Draw(image).ellipse((300, 400, 340, 430), fill=(225, 225, 225))
    return image


def two_column_page(title: str, left: list[str], right: list[str], *, size_px: int = 22) -> Image.Image:
    """A page set in two columns under a title that spans both (a journal page, a newsletter)."""
    face = font(size_px)
    margin, gutter, column = 40, 48, 520
    step = int(size_px * 1.6)
    rows = max(len(left), len(right))
    image = Image.new("RGB", (2 * margin + 2 * column + gutter, 2 * margin + step * (rows + 2)), "white")
    draw = ImageDraw.Draw(image)
    draw.text((margin, margin), title, font=font(int(size_px * 1.4)), fill="black")
    for x, lines in ((margin, left), (margin + column + gutter, right)):
        for i, text in enumerate(lines):
            draw.text((x, margin + step * (i + 2)), text, font=face, fill="black")
    return image
