"""Photos and screenshots as sources: decoded safely, read by real RapidOCR, indexed and found by a search."""

import io
import json
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from knowledge.convert import Limits, convert_source
from knowledge.convert.image import load_image
from knowledge.convert.isolate import IsolatedRunner
from knowledge.convert.ocr import MAX_OCR_PIXELS, OcrSpec
from knowledge.convert.sniff import sniff
from knowledge.errors import ConversionError
from knowledge.ingest import raw as rawfile
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from tests import ocr_images
from tests.conftest import make_settings
from tests.ocr_stand_ins import ScriptedEngine

RAPIDOCR = OcrSpec(kind="rapidocr")
NOTE = ["Quillan harbour opens at nine.", "臺北的港口九點開放。"]


def convert(data: bytes, name: str = "photo.png", ocr: OcrSpec | None = RAPIDOCR, **limits):
    return convert_source(data, name=name, limits=Limits(**limits), ocr=ocr)


def refused(data: bytes, name: str = "photo.png", ocr: OcrSpec | None = RAPIDOCR) -> ConversionError:
    with pytest.raises(ConversionError) as caught:
        convert(data, name, ocr)
    return caught.value


# -- what is an image -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP", "HEIF", "AVIF", "BMP", "TIFF"])
def test_images_are_a_kind_of_their_own_whatever_their_name(fmt) -> None:
    data = ocr_images.encode(Image.new("RGB", (8, 8), "white"), fmt)
    assert sniff(data, "notes.txt") == "image"


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", "audio or video"),
        (b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00", "audio or video"),
        (b"\x00\x00\x00\x18ftypM4A \x00\x00\x02\x00", "audio or video"),
    ],
)
def test_sound_and_video_in_the_same_containers_are_still_refused(data, kind) -> None:
    with pytest.raises(ConversionError) as caught:
        sniff(data + bytes(64), "clip.bin")
    assert caught.value.reason == "binary" and kind in str(caught.value)


@pytest.mark.parametrize(
    ("fmt", "what"), [("WEBP", "a WebP image"), ("HEIF", "a HEIC/HEIF image"), ("PNG", "a PNG image")]
)
def test_a_web_import_still_takes_documents_only(fmt, what) -> None:
    data = ocr_images.encode(Image.new("RGB", (8, 8), "white"), fmt)
    with pytest.raises(ConversionError) as caught:
        sniff(data, "the content", images=False)
    assert caught.value.reason == "binary" and str(caught.value).startswith(f"the content is {what},")


def test_text_that_starts_like_a_bitmap_is_still_text() -> None:
    assert sniff(b"BMW and Audi sales rose in 2023.\n", "cars.txt") == "text"


# -- reading images ---------------------------------------------------------------------------


def test_a_png_screenshot_becomes_one_section_with_a_line_per_text_line() -> None:
    converted = convert(ocr_images.encode(ocr_images.text_image(NOTE), "PNG"))
    assert converted.markdown == "## Text\n\n" + "\n".join(NOTE) + "\n"
    assert converted.title == NOTE[0] and converted.converter == "image"
    assert converted.ocr.engine.startswith("rapidocr") and converted.ocr.confidence > 0.9
    assert converted.ocr.pages == () and converted.ocr.illegible_pages == ()


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_a_phone_photo_is_turned_upright_by_its_exif_orientation(orientation) -> None:
    data = ocr_images.phone_jpeg(ocr_images.text_image(NOTE), orientation)
    assert Image.open(io.BytesIO(data)).getexif()[0x0112] == orientation
    assert convert(data, "IMG_0042.JPG").markdown.splitlines()[2:] == NOTE


@pytest.mark.parametrize(
    ("fmt", "options"),
    [("WEBP", {"quality": 90}), ("HEIF", {"quality": 90}), ("GIF", {}), ("BMP", {}), ("TIFF", {})],
)
def test_webp_heic_gif_bmp_and_tiff_are_read(fmt, options) -> None:
    data = ocr_images.encode(ocr_images.text_image(NOTE), fmt, **options)
    assert convert(data, f"note.{fmt.lower()}").markdown.splitlines()[2:] == NOTE


def test_text_on_a_transparent_background_is_read_on_white() -> None:
    # Transparent pixels are stored black: dropped alpha would leave black text on black.
    image = Image.new("RGBA", (760, 90), (0, 0, 0, 0))
    ImageDraw.Draw(image).text((24, 24), NOTE[0], font=ocr_images.font(28), fill=(0, 0, 0, 255))
    assert convert(ocr_images.encode(image, "PNG")).markdown.splitlines()[2:] == [NOTE[0]]


def test_a_large_photo_is_brought_down_and_still_read() -> None:
    photo = Image.new("RGB", (6000, 4000), (236, 232, 224))  # 24 megapixels of paper
    ImageDraw.Draw(photo).text((600, 1800), NOTE[0], font=ocr_images.font(160), fill=(30, 30, 30))
    data = ocr_images.encode(photo, "JPEG", quality=90)
    converted = convert(data, "IMG_0001.JPG")
    assert converted.markdown.splitlines()[2:] == [NOTE[0]]
    width, height = load_image(data).size  # what OCR is given
    assert width * height <= MAX_OCR_PIXELS < 6000 * 4000 and round(width / height, 2) == 1.5


def test_a_long_screenshot_is_read_whole_in_strips() -> None:
    lines = [f"Message {i:02d}: the ferry to the islands leaves at {8 + i % 10}:15" for i in range(40)]
    screenshot = ocr_images.text_image(lines, size_px=30, spacing=2.4)  # about 800 × 2900 pixels
    assert screenshot.height > 3 * screenshot.width
    assert convert(ocr_images.encode(screenshot, "PNG")).markdown.splitlines()[2:] == lines


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("width", "height"), [(30_000, 30_000), (12_000, 9_000)])
def test_a_decompression_bomb_is_refused_without_being_decoded(width, height) -> None:
    bomb = ocr_images.encode(Image.new("1", (width, height)), "PNG")  # up to 900 megapixels in ~100 KB
    assert len(bomb) < 200_000
    error = refused(bomb)
    assert (
        error.reason == "image-too-large"
        and f"photo.png is {width * height // 1_000_000} megapixels" in str(error)
    )
    assert "decompression bomb" in str(error) and "resize it" in str(error)
    # judged by its header alone: with its pixels cut off it is refused the same, not found truncated
    assert refused(bomb[: bomb.index(b"IDAT") + 20]).reason == "image-too-large"


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_a_truncated_image_is_refused(fmt) -> None:
    data = ocr_images.encode(ocr_images.text_image(NOTE), fmt)
    error = refused(data[: len(data) // 2])
    assert error.reason == "image-corrupt" and f"damaged or truncated {fmt} image" in str(error)


def test_a_corrupt_image_is_refused() -> None:
    data = ocr_images.encode(ocr_images.text_image(NOTE), "PNG")
    error = refused(data[:60] + bytes(len(data) - 60))  # the picture data overwritten: its checksum fails
    assert error.reason == "image-corrupt" and "save or export it again" in str(error)


def test_a_photo_without_text_is_no_text() -> None:
    photo = Image.new("RGB", (900, 600), (110, 150, 190))
    draw = ImageDraw.Draw(photo)
    for i in range(12):
        draw.ellipse((60 * i, 40 * i, 60 * i + 90, 40 * i + 70), fill=(200, 180 - 10 * i, 90))
    error = refused(ocr_images.encode(photo, "JPEG"), "sunset.jpg")
    assert error.reason == "no-text" and "nothing legible in sunset.jpg" in str(error)


def test_with_ocr_off_an_image_is_refused_with_a_sentence_saying_so() -> None:
    data = ocr_images.encode(ocr_images.text_image(NOTE), "PNG")
    for off in (OcrSpec(kind="off"), None):
        error = refused(data, "receipt.png", off)
        assert error.reason == "ocr-off"
        assert str(error).startswith("receipt.png is an image and OCR is off (KB_OCR=off)")


# -- through the pipeline ---------------------------------------------------------------------


def front_matter(path: Path) -> rawfile.RawMeta:
    return rawfile.parse(path.read_text(encoding="utf-8"), fallback_name=path.stem, sha256="").meta


def test_a_photo_dropped_in_the_inbox_is_indexed_and_found_with_its_line(tmp_path, run_kb) -> None:
    home = tmp_path / "kb"
    inbox = home / "knowledge" / "inbox"
    inbox.mkdir(parents=True)
    lines = ["Lake Quillan Notice", "The zebrafish of Lake Quillan sleep at noon.", "臺北的港口九點開放。"]
    (inbox / "IMG_2041.JPG").write_bytes(ocr_images.phone_jpeg(ocr_images.text_image(lines), 6))
    ingested = run_kb("--home", str(home), "ingest", str(inbox), env={"KB_OCR": "rapidocr"})
    assert ingested.returncode == 0, ingested.stderr
    assert "1 indexed" in ingested.stdout
    [raw] = (home / "knowledge" / "raw").glob("*.md")
    meta = front_matter(raw)
    assert meta.converter == "image" and meta.title == lines[0]
    assert meta.ocr_engine.startswith("rapidocr 3.") and float(meta.ocr_confidence) > 0.9
    raw_lines = raw.read_text(encoding="utf-8").split("\n")
    found = run_kb("--home", str(home), "search", "--json", "zebrafish", "sleep")
    assert found.returncode == 0, found.stderr
    top = json.loads(found.stdout)[0]
    assert top["source_name"] == "IMG_2041.JPG"
    cited = raw_lines[top["start_line"] - 1 : top["end_line"]]
    assert lines[1] in cited  # the citation's lines are the photo's lines in the raw file
    assert raw_lines.index(lines[1]) + 1 in range(top["start_line"], top["end_line"] + 1)


def test_thai_read_by_an_engine_that_knows_it_reaches_the_raw_file_and_is_searchable(settings) -> None:
    thai = ["ประกาศท่าเรือควิลแลน", "เรือข้ามฟากออกเดินทางทุกชั่วโมงจนถึงเวลาหกโมงเย็น"]
    photo = settings.inbox / "thai-notice.png"
    settings.inbox.mkdir(parents=True)
    photo.write_bytes(ocr_images.encode(ocr_images.text_image(["(a Thai notice)"]), "PNG"))
    spec = OcrSpec(kind="vision", langs=("th",), engine=ScriptedEngine(thai))
    with Index(settings.index_path) as index, IsolatedRunner() as runner:
        outcome = Ingestor(settings, index, ApproxCounter(), runner=runner, ocr=spec).ingest(photo)
        assert outcome.status == "indexed", outcome.message
        text = (settings.raw / outcome.raw_path.removeprefix("raw/")).read_text(encoding="utf-8")
        assert text.endswith("## Text\n\n" + "\n".join(thai) + "\n")
        assert front_matter(settings.raw / outcome.raw_path.removeprefix("raw/")).ocr_engine == "scripted"
        [hit] = search(index, "เรือข้ามฟาก", k=1)
    assert hit.source_name == "thai-notice.png" and thai[1] in hit.text


def test_with_ocr_off_a_dropped_photo_goes_to_failed_with_the_reason(tmp_path) -> None:
    settings = make_settings(tmp_path / "kb", KB_OCR="off")
    settings.inbox.mkdir(parents=True)
    photo = settings.inbox / "receipt.png"
    photo.write_bytes(ocr_images.encode(ocr_images.text_image(NOTE), "PNG"))
    with Index(settings.index_path) as index:
        outcome = Ingestor(settings, index, ApproxCounter()).ingest(photo)
    assert outcome.status == "failed" and outcome.reason == "ocr-off"
    record = json.loads((settings.failed / "receipt.png.error.json").read_text())
    assert record["reason"] == "ocr-off" and "KB_OCR=off" in record["message"]


# What RapidOCR made of a photo of a Thai menu on Linux (it reads Chinese and English only).
THAI_AS_LATIN = ["Usennmanniaymnaanmnsgn", "nnaunniawuuavmsnsnnuw 25 unn", "ManuuRWEnsngnnnn"]


def test_a_photo_in_a_script_the_engine_cannot_read_is_refused_not_indexed_as_gibberish(settings) -> None:
    settings.inbox.mkdir(parents=True)
    photo = settings.inbox / "menu.jpg"
    photo.write_bytes(ocr_images.encode(ocr_images.text_image(["(a Thai menu)"]), "JPEG"))
    spec = OcrSpec(
        kind="rapidocr",
        langs=("zh-Hant", "zh-Hans", "en"),
        engine=ScriptedEngine(THAI_AS_LATIN, confidence=0.61),
    )
    with Index(settings.index_path) as index, IsolatedRunner() as runner:
        outcome = Ingestor(settings, index, ApproxCounter(), runner=runner, ocr=spec).ingest(photo)
        assert index.document_count() == 0  # nothing went in
    assert outcome.status == "failed" and outcome.reason == "ocr-unreadable"
    assert "not legible to the OCR engine here" in outcome.message and "Thai" in outcome.message
    assert json.loads((settings.failed / "menu.jpg.error.json").read_text())["reason"] == "ocr-unreadable"


@pytest.mark.parametrize(
    ("lines", "confidence", "readable"),
    [
        (THAI_AS_LATIN, 0.61, False),
        (THAI_AS_LATIN, 0.93, True),  # read confidently: taken as it is
        (
            ["Lake Quillan ferry timetable", "Departures every hour until 6 pm"],
            0.62,
            True,
        ),  # a poor photo, real words
        (
            ["INV-20231104", "Total 1,280.00", "QTY 3 x 426.67"],
            0.6,
            True,
        ),  # codes and numbers: nothing to judge by
        (["高山烏龍茶沖泡筆記", "九十五度的熱水"], 0.62, True),
        (["strengths and rhythms of twelfths"], 0.62, True),  # real words with consonant runs
    ],
)
def test_readable_means_words_or_confidence(lines, confidence, readable) -> None:
    from knowledge.convert.ocr_text import OcrLine, is_readable

    assert is_readable([OcrLine(t, confidence, (0, 0, 1, 1)) for t in lines]) is readable


def test_a_16_bit_big_endian_grayscale_scan_is_read_not_called_a_bug() -> None:
    import numpy as np

    from knowledge.convert.image import load_image

    ramp = (np.arange(120 * 160).reshape(120, 160) * 3).astype(">u2")
    scan = Image.frombytes("I;16B", (160, 120), ramp.tobytes())  # the mode scanners write
    out = io.BytesIO()
    scan.save(out, "TIFF")
    image = load_image(out.getvalue(), name="scan.tif")
    pixels = np.asarray(image)
    assert image.mode == "RGB" and image.size == (160, 120) and pixels.min() == 0 and pixels.max() == 255


def test_damaged_avif_files_are_named_failures_never_a_bug() -> None:
    import random

    from knowledge.convert.image import load_image

    out = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(out, "AVIF")
    good = out.getvalue()
    rng = random.Random(3)
    for n in range(200):
        bad = bytearray(good)
        for _ in range(8):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        if n % 3 == 0:
            bad = bad[: rng.randrange(20, len(bad))]
        try:
            load_image(bytes(bad), name="x.avif")
        except ConversionError as exc:
            assert exc.reason in ("image-corrupt", "image-unsupported", "image-too-large"), exc.reason
