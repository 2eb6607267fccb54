"""The pure steps around OCR: reading order, Markdown, legibility, one script per page, margins, strips."""

import pytest
from PIL import Image

from knowledge.convert.ocr_text import (
    OcrLine,
    bands,
    has_words,
    ink_box,
    is_legible,
    keep_script,
    legible_lines,
    lines_markdown,
    mean_confidence,
    reading_order,
)
from tests.ocr_stand_ins import line, texts

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
