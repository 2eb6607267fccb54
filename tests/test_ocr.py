"""OCR engines and the pure steps around them: reading order, Markdown, legibility, one script per page."""

import socket
import subprocess
import sys

import pytest
import structlog
from PIL import Image

from knowledge.config import Settings
from knowledge.convert.ocr import (
    OcrLine,
    OcrSpec,
    RapidOcrEngine,
    bands,
    better_pass,
    describe_ocr,
    has_words,
    ink_box,
    is_legible,
    keep_script,
    legible_lines,
    lines_markdown,
    make_engine,
    mean_confidence,
    ocr_warnings,
    parse_langs,
    read_text,
    reading_order,
    resolve_kind,
    vision_box,
    vision_languages,
    wants_thai_pass,
)
from knowledge.errors import ConversionError
from knowledge.ingest.pipeline import Ingestor
from knowledge.retrieval.index import Index
from knowledge.tokenizer import ApproxCounter
from tests import ocr_images
from tests.conftest import make_settings, subprocess_env


def line(text: str, x0: float, y0: float, x1: float, y1: float, confidence: float = 0.95) -> OcrLine:
    return OcrLine(text, confidence, (x0, y0, x1, y1))


def texts(blocks: list[list[OcrLine]]) -> list[list[str]]:
    return [[item.text for item in block] for block in blocks]


# -- reading order ----------------------------------------------------------------------------


def test_lines_are_read_top_to_bottom_and_pieces_of_one_line_are_joined() -> None:
    lines = [
        line("Total", 20, 200, 90, 230),
        line("12.50 EUR", 400, 202, 520, 231),  # same row, found as a separate piece
        line("Receipt", 20, 20, 200, 60),
        line("Bread", 20, 120, 100, 150),
        line("3.00 EUR", 400, 121, 510, 149),
    ]
    assert texts(reading_order(lines)) == [["Receipt", "Bread 3.00 EUR", "Total 12.50 EUR"]]


def test_a_tilted_photo_does_not_merge_neighbouring_lines() -> None:
    # Boxes of a slightly tilted page overlap in height, but the lines lie one above the other.
    lines = [
        line("second line of the page", 22, 48, 700, 100),
        line("first line of the page", 20, 10, 700, 62),
    ]
    assert texts(reading_order(lines)) == [["first line of the page", "second line of the page"]]


def two_column_page() -> list[OcrLine]:
    title = [line("A Title Across Both Columns", 40, 20, 960, 60)]
    left = [line(f"left column line {i} with words", 40, 100 + 40 * i, 470, 130 + 40 * i) for i in range(5)]
    right = [line(f"right column line {i} text here", 530, 100 + 40 * i, 960, 130 + 40 * i) for i in range(5)]
    footer = [line("A footer across the page at the bottom", 40, 400, 960, 430)]
    return right + footer + left + title  # any order in, reading order out


def test_two_columns_are_read_one_after_the_other_between_lines_that_cross_them() -> None:
    blocks = texts(reading_order(two_column_page()))
    assert blocks == [
        ["A Title Across Both Columns"],
        [f"left column line {i} with words" for i in range(5)],
        [f"right column line {i} text here" for i in range(5)],
        ["A footer across the page at the bottom"],
    ]


def test_a_form_of_short_labels_beside_values_is_read_row_by_row() -> None:
    labels = ["Name", "Date", "City", "Phone", "Email", "Code"]
    values = ["Mei-Ling Chen", "2024-05-01", "Taipei", "0912 345 678", "mei@example.org", "A-17"]
    lines = [line(text, 40, 40 * i, 40 + 12 * len(text), 40 * i + 28) for i, text in enumerate(labels)]
    lines += [line(text, 500, 40 * i, 500 + 15 * len(text), 40 * i + 28) for i, text in enumerate(values)]
    rows = texts(reading_order(lines))
    assert rows == [[f"{label} {value}" for label, value in zip(labels, values, strict=True)]]


def test_markdown_has_one_line_per_text_line_and_no_headings_from_the_picture() -> None:
    blocks = [
        [line("# Not a heading", 0, 0, 1, 1), line("  two   spaces\tand a tab ", 0, 2, 1, 3)],
        [line("next", 0, 0, 1, 1)],
    ]
    assert lines_markdown(blocks) == "\\# Not a heading\ntwo spaces and a tab\n\nnext"


# -- legibility -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "legible"),
    [
        ([], False),
        ([line("●", 0, 0, 9, 9, 0.99)], False),  # a dot or a bullet in a photo is no text
        ([line("·—|", 0, 0, 9, 9, 0.99), line("blurred", 0, 10, 9, 19, 0.45)], False),
        ([line("blurred", 0, 0, 9, 9, 0.45), line("Sharp", 0, 10, 9, 19, 0.8)], True),
        ([line("臺灣", 0, 0, 9, 9, 0.9)], True),
        ([line("๒๕๖๗", 0, 0, 9, 9, 0.9)], True),  # Thai digits are words too
    ],
)
def test_nothing_legible_means_no_confident_line_with_letters_or_digits(lines, legible) -> None:
    assert is_legible(lines) is legible


def test_punctuation_only_lines_are_dropped_and_text_is_cleaned() -> None:
    kept = legible_lines(
        [line("  ——  ", 0, 0, 1, 1), line("a\x00b\u200b c", 0, 0, 1, 1), line("7", 0, 0, 1, 1)]
    )
    assert [item.text for item in kept] == ["a b c", "7"]
    assert has_words("。、") is False and has_words("ก") is True


def test_mean_confidence() -> None:
    assert mean_confidence([]) is None
    assert mean_confidence([line("a", 0, 0, 1, 1, 0.9), line("b", 0, 0, 1, 1, 0.7)]) == pytest.approx(0.8)


# -- one script per page ----------------------------------------------------------------------

TRADITIONAL = "特斯拉於1943年1月7日去世。在他死後，他的作品陷入了相對默默無聞的狀態。"


def page_text(*texts: str) -> list[str]:
    return [
        item.text
        for item in keep_script([line(text, 0, 40 * i, 900, 40 * i + 30) for i, text in enumerate(texts)])
    ]


def test_a_stray_simplified_character_in_a_traditional_page_is_put_back() -> None:
    assert page_text(TRADITIONAL, "美國最高法院的一項判決恢復了特斯拉、奥利佛的專利") == [
        TRADITIONAL,
        "美國最高法院的一項判決恢復了特斯拉、奧利佛的專利",
    ]


def test_characters_a_traditional_text_writes_that_way_are_kept() -> None:
    kept = ["皇后走了三公里路到台北", TRADITIONAL, "裡面的資料庫"]
    assert page_text(*kept) == kept


def test_a_stray_traditional_character_in_a_simplified_page_is_put_back() -> None:
    simplified = "特斯拉于1943年1月7日去世。在他死后，他的作品陷入了相对默默无闻的状态。"
    assert page_text(simplified, "他們的资料") == [simplified, "他们的资料"]


@pytest.mark.parametrize(
    "texts",
    [
        ("臺灣的資料庫", "台湾的资料库"),  # as much of each script: a page that quotes the other, left alone
        ("東京の國語と資料", "奥の細道"),  # Japanese (kana), left alone
        ("English only, 42 lines",),
    ],
)
def test_mixed_japanese_and_latin_pages_are_left_alone(texts) -> None:
    assert page_text(*texts) == list(texts)


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


# -- margins and strips -----------------------------------------------------------------------


def test_margins_are_found_around_the_ink() -> None:
    page = Image.new("RGB", (1000, 1400), "white")
    page.paste((0, 0, 0), (300, 500, 400, 520))
    assert ink_box(page) == (268, 468, 432, 552)
    assert ink_box(Image.new("RGB", (100, 100), (240, 240, 240))) is None
    dark = Image.new("RGB", (800, 600), (20, 20, 20))  # a dark-mode screenshot: light text on dark
    dark.paste((230, 230, 230), (100, 100, 300, 120))
    assert ink_box(dark) == (68, 68, 332, 152)


def test_a_tall_picture_is_cut_into_overlapping_strips_that_share_out_the_overlap() -> None:
    assert len(bands(600, 1400)) == 1
    strips = bands(600, 3000)
    assert strips[0].top == 0 and strips[-1].bottom == 3000
    assert all(b.bottom - b.top == 900 for b in strips)
    for upper, lower in zip(strips, strips[1:], strict=False):
        assert upper.bottom - lower.top == 200  # the overlap
        assert upper.own_bottom == lower.own_top == (lower.top + upper.bottom) / 2
    assert sum(1 for b in strips if b.owns(1234.5)) == 1


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


def test_thai_asked_for_off_the_mac_is_said_at_start_and_by_kb_doctor(tmp_path) -> None:
    settings = settings_with(tmp_path, KB_OCR="rapidocr", KB_OCR_LANGS="zh-Hant,en,th")
    with structlog.testing.capture_logs() as logs, Index(settings.index_path) as index:
        Ingestor(settings, index, ApproxCounter())
    [warning] = [entry for entry in logs if entry["event"] == "ocr.limited"]
    assert warning["log_level"] == "warning" and "no bundled Thai model" in warning["reason"]
    doctor = subprocess.run(
        [sys.executable, "-m", "knowledge.cli", "--home", str(settings.home), "doctor"],
        capture_output=True,
        text=True,
        env=subprocess_env(
            KB_OCR="rapidocr", KB_OCR_LANGS="zh-Hant,en,th", KB_LLM_URL="http://127.0.0.1:9/v1"
        ),
        timeout=120,
    )
    [line] = [text for text in doctor.stdout.splitlines() if "OCR " in text[:12]]
    assert line.startswith("warn  OCR") and "Thai is not read here" in line
