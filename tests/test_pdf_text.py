"""PDF page text as reading text: tables of layout lines in, paragraphs out; real layouts end to end."""

import re

import pytest

from knowledge.convert.pdf import pdf_to_markdown
from knowledge.convert.pdf_text import drop_running_lines, reading_order, reading_text, reflow
from tests.pdf_layouts import LAYOUTS, TABLE


@pytest.mark.parametrize(
    ("lines", "text"),
    [
        (["Lorem ipsum dolor sit, consectetur adip-", "iscing elit."], "Lorem ipsum dolor sit, consectetur adipiscing elit."),
        (["the ﬁrst ﬂoor and the ﬃce"], "the first floor and the ffice"),
        (["a well-", "Known name"], "a well- Known name"),
        (["soft\u00ad", "hyphen"], "softhyphen"),
        (["One paragraph ends here.", "", "Another starts."], "One paragraph ends here.\n\nAnother starts."),
        (["   First line of a paragraph that runs", "on to the next line and ends.", "   Second paragraph here, indented."],
         "First line of a paragraph that runs on to the next line and ends.\n\nSecond paragraph here, indented."),
        (["Heading", "A paragraph that is long enough to fill the line", "and a second line of it."],
         "Heading\n\nA paragraph that is long enough to fill the line and a second line of it."),
        (["• first point", "• second point"], "• first point\n\n• second point"),
        (["Name      Size     Colour", "Apple     small    red", "Melon     large    green"],
         "| Name | Size | Colour |\n|---|---|---|\n| Apple | small | red |\n| Melon | large | green |"),
    ],
    ids=["hyphen", "ligatures", "capital-after-hyphen-kept", "soft-hyphen", "blank-line", "indent",
         "short-line-ends-paragraph", "bullets", "table"],
)  # fmt: skip
def test_reflow(lines, text):
    assert reflow(lines) == text


def test_running_headers_footers_and_page_numbers_are_dropped():
    body = {n: [f"Line {chr(96 + i)} of page {chr(96 + n)}." for i in range(1, 9)] for n in (1, 2, 3)}
    pages = [
        ["Annual Report 2024        Chapter 2", "", *body[n], "", "Confidential", f"  {n}  "] for n in body
    ]
    assert drop_running_lines(pages) == [["", *body[n], ""] for n in body]


def test_a_line_repeated_in_the_body_is_not_a_running_line():
    pages = [[f"Total {n + i}" for i in range(10)] for n in (1, 20)]
    assert drop_running_lines(pages) == pages


def test_two_columns_are_read_left_then_right():
    left = [f"left line {n} of the first column" for n in range(30)]
    right = [f"right line {n} of the second one" for n in range(30)]
    page = ["A title that spans both columns of the page, wider than either", ""]
    page += [f"{a:<40}{'':8}{b}" for a, b in zip(left, right, strict=True)]
    order = [line.strip() for line in reading_order(page) if line.strip()]
    assert order == [page[0], *left, *right]


def test_a_word_hyphenated_across_a_page_break_is_completed_on_its_page():
    assert reading_text(["The end of the page has a hyph-", "enated word on the next page."]) == [
        "The end of the page has a hyphenated",
        "word on the next page.",
    ]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_real_layouts_read_like_text(layout):
    data, expected = LAYOUTS[layout]()
    markdown = pdf_to_markdown(data).markdown
    lines = {line.replace(" | ", " ").strip("| ") for line in markdown.split("\n")}
    missing = [p for p in expected if p not in lines]
    assert not missing  # every paragraph whole, on one line, words joined, ligatures spelled out
    assert not re.search(r"[a-z]-\s+[a-z]", markdown)  # no word left split at a line end
    assert "\ufb01" not in markdown and "\ufb02" not in markdown
    if layout != "table":  # one page: nothing repeats, so its header stays
        for running in (
            "Annual Report 2024",
            "Confidential draft",
            "Journal of Document Engineering",
            "Chapter 2",
        ):
            assert running not in markdown
        assert not re.search(r"^\d+$", markdown, re.M)


def test_a_table_is_a_markdown_table():
    markdown = pdf_to_markdown(LAYOUTS["table"]()[0]).markdown
    rows = ["| " + " | ".join(row) + " |" for row in TABLE]
    assert "\n".join([rows[0], "|---|---|---|", *rows[1:]]) in markdown
