"""OCR settings and engines: languages, the engine for the platform, Vision's language lists, the real RapidOCR."""

import socket

import pytest
import structlog

from knowledge.config import Settings
from knowledge.convert.ocr import (
    OcrSpec,
    describe_ocr,
    make_engine,
    ocr_warnings,
    parse_langs,
    read_text,
    resolve_kind,
)
from knowledge.convert.ocr_engines import (
    RapidOcrEngine,
    better_pass,
    vision_box,
    vision_languages,
    wants_thai_pass,
)
from knowledge.errors import ConversionError
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.store.index import Index
from tests import ocr_images
from tests.conftest import make_settings
from tests.ocr_stand_ins import line, texts

# -- languages and engines --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "known", "unknown"),
    [
        ("zh-Hant,zh-Hans,en", ("zh-Hant", "zh-Hans", "en"), ()),
        (" zh-TW , zh_CN, en-US, th-TH ", ("zh-Hant", "zh-Hans", "en", "th"), ()),
        ("en,en,klingon,", ("en",), ("klingon",)),
        ("", (), ()),
    ],
)
def test_kb_ocr_langs_is_read_leniently(setting, known, unknown) -> None:
    assert parse_langs(setting) == (known, unknown)


def test_the_engine_is_chosen_by_platform() -> None:
    assert resolve_kind("auto", "darwin") == "vision"
    assert resolve_kind("auto", "linux") == "rapidocr"
    assert resolve_kind("rapidocr", "darwin") == "rapidocr"
    assert make_engine("off", ("en",), platform="linux") is None
    with pytest.raises(ConversionError) as caught:
        make_engine("vision", ("en",), platform="linux")
    assert caught.value.reason == "ocr-unavailable" and "needs macOS" in str(caught.value)


@pytest.mark.parametrize(
    ("langs", "supported", "first", "thai"),
    [
        (
            ("en", "zh-Hant", "zh-Hans"),
            ["en-US", "zh-Hans", "zh-Hant", "th-TH"],
            ["zh-Hant", "zh-Hans", "en-US"],
            [],
        ),
        (("zh-Hant", "en", "th"), ["en-US", "zh-Hant", "th-TH"], ["zh-Hant", "en-US"], ["th-TH", "en-US"]),
        (("zh-Hant", "th"), ["en-US", "zh-Hant"], ["zh-Hant"], []),  # an older macOS without Thai
        (("th",), ["th-TH", "en-US"], ["th-TH"], []),
        (("zh-Hans",), ["en-US"], ["en-US"], []),
    ],
)
def test_vision_asks_for_chinese_first_and_thai_in_a_pass_of_its_own(langs, supported, first, thai) -> None:
    assert vision_languages(langs, supported) == (first, thai)


def test_vision_boxes_are_turned_into_pixels_from_the_top_left() -> None:
    assert vision_box((0.1, 0.8, 0.5, 0.1), 1000, 2000) == pytest.approx((100, 200, 600, 400))


def test_a_thai_pass_is_made_when_the_first_reads_poorly_and_the_better_one_is_kept() -> None:
    garbled = [line("lnu n1u", 0, 0, 1, 1, 0.3)]
    thai = [line("ภาษาไทยอ่านได้", 0, 0, 1, 1, 0.9)]
    assert wants_thai_pass([]) and wants_thai_pass(garbled)
    assert not wants_thai_pass([line("臺灣", 0, 0, 1, 1, 0.95)])
    assert better_pass(garbled, thai) == thai
    assert better_pass(thai, garbled) == thai


def settings_with(tmp_path, **env: str) -> Settings:
    return make_settings(tmp_path / "kb", **env)


def test_doctor_says_thai_needs_apple_vision_off_the_mac(tmp_path) -> None:
    text = describe_ocr(settings_with(tmp_path, KB_OCR_LANGS="zh-Hant,en,th"), platform="linux")
    assert text.startswith("RapidOCR (PP-OCRv6, bundled models) reads zh-Hant, en")
    assert "not Thai (photos of Thai text are refused as ocr-unreadable: read them on a Mac)" in describe_ocr(
        make_settings(tmp_path / "kb2", KB_OCR="rapidocr", KB_OCR_LANGS="zh-Hant,en"), platform="linux"
    )
    assert "Thai is not read here" in text and "does not download" in text and "Apple Vision on macOS" in text
    on_mac = describe_ocr(settings_with(tmp_path, KB_OCR_LANGS="zh-Hant,en,th"), platform="darwin")
    assert on_mac.startswith("Apple Vision reads zh-Hant, en, th") and "Thai is not read" not in on_mac
    assert describe_ocr(settings_with(tmp_path, KB_OCR="off")).startswith("off (KB_OCR=off)")


def test_warnings_name_what_cannot_be_done() -> None:
    assert ocr_warnings(OcrSpec(kind="auto", langs=("zh-Hant", "en")), platform="linux") == []
    assert ocr_warnings(OcrSpec(kind="auto", langs=("th",)), platform="darwin") == []
    [thai] = ocr_warnings(OcrSpec(kind="rapidocr", langs=("en", "th")), platform="linux")
    assert "no bundled Thai model" in thai
    [unknown] = ocr_warnings(OcrSpec(kind="auto", langs=("en",)), ("klingon",), platform="linux")
    assert "klingon" in unknown


# -- the real RapidOCR ------------------------------------------------------------------------

MIXED = [
    "臺灣的資料庫全文檢索：體驗與學習",
    "The quick brown fox jumps over the lazy dog.",
    "Mixed 中文 and English 繁體字",
]


@pytest.fixture(scope="module")
def engine() -> RapidOcrEngine:
    return RapidOcrEngine()


def test_rapidocr_reads_english_and_traditional_chinese_and_keeps_traditional(engine) -> None:
    blocks = read_text(engine, ocr_images.text_image(MIXED))
    assert texts(blocks) == [MIXED]
    assert all(item.confidence > 0.9 for block in blocks for item in block)
    assert engine.name.startswith("rapidocr 3.") and engine.name.endswith("PP-OCRv6")


def test_a_short_line_alone_on_a_large_page_is_found(engine) -> None:
    page, _ = ocr_images.a4_page(["臺北的港口九點開放。"], size_pt=9)
    assert texts(read_text(engine, page)) == [["臺北的港口九點開放。"]]


def test_rapidocr_loads_and_reads_without_the_network_or_console_noise(monkeypatch, capfd) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("OCR tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    fresh = RapidOcrEngine()
    assert texts(read_text(fresh, ocr_images.text_image(["No network needed."]))) == [["No network needed."]]
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_a_two_column_page_is_read_a_column_at_a_time(engine) -> None:
    left = [
        "Lake Quillan lies in the Varn valley, which",
        "is a long glacial trough; the lake is 317",
        "metres deep and it never freezes in winter",
        "because warm springs feed it from below.",
    ]
    right = [
        "The harbour of Quillan opens at nine every",
        "morning, and the ferry leaves for the two",
        "islands on the hour until the evening bell",
        "rings at the old customs house by the pier.",
    ]
    page = ocr_images.two_column_page("Notes from the Varn Valley", left, right)
    blocks = texts(read_text(engine, page))
    assert [text for block in blocks for text in block] == ["Notes from the Varn Valley", *left, *right]
    assert blocks[-1] == right  # the second column starts a block of its own


def test_thai_asked_for_off_the_mac_is_said_at_start_and_by_kb_doctor(tmp_path, run_kb) -> None:
    settings = settings_with(tmp_path, KB_OCR="rapidocr", KB_OCR_LANGS="zh-Hant,en,th")
    with structlog.testing.capture_logs() as logs, Index(settings.index_path) as index:
        Ingestor(settings, index, ApproxCounter())
    [warning] = [entry for entry in logs if entry["event"] == "ocr.limited"]
    assert warning["log_level"] == "warning" and "no bundled Thai model" in warning["reason"]
    doctor = run_kb(
        "--home", str(settings.home), "doctor",
        env={"KB_OCR": "rapidocr", "KB_OCR_LANGS": "zh-Hant,en,th", "KB_LLM_URL": "http://127.0.0.1:9/v1"},
    )  # fmt: skip
    [line] = [text for text in doctor.stdout.splitlines() if "OCR " in text[:12]]
    assert line.startswith("warn  OCR") and "Thai is not read here" in line
