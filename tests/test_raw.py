"""Raw files' front matter: OCR facts written and read back; files written before them parse as before."""

import pytest

from knowledge.ingest import raw


def test_ocr_facts_are_written_as_json_strings_and_read_back() -> None:
    meta = raw.RawMeta(
        title="Board minutes",
        source_name="minutes.pdf",
        source_sha256="ab" * 32,
        converter="pdf",
        source_snapshot="inbox/processed/minutes.pdf",
        ocr_engine="rapidocr 3.10.0 PP-OCRv6",
        ocr_confidence="0.93",
        ocr_pages="1-3,5",
        ocr_illegible_pages="4",
    )
    text = raw.render(meta, "## Page 1\n\nThe harbour opens at nine.\n")
    assert 'ocr_engine: "rapidocr 3.10.0 PP-OCRv6"\nocr_confidence: "0.93"\nocr_pages: "1-3,5"\n' in text
    assert 'ocr_illegible_pages: "4"\n---\n' in text
    assert raw.parse(text, fallback_name="x", sha256="").meta == meta


def test_a_raw_file_written_before_ocr_parses_unchanged() -> None:
    text = (
        '---\ntitle: "Super Bowl 50"\nsource_name: "sb50.html"\nsource_snapshot: "inbox/processed/sb50.html"\n'
        'source_sha256: "4f1c"\nconverter: "html"\n---\n\n# Super Bowl 50\n'
    )
    parsed = raw.parse(text, fallback_name="x", sha256="")
    assert parsed.meta == raw.RawMeta(
        "Super Bowl 50", "sb50.html", "4f1c", "html", "inbox/processed/sb50.html"
    )
    assert raw.render(parsed.meta, "# Super Bowl 50\n") == text
    assert parsed.first_body_line == 8 and parsed.body_lines == ["", "# Super Bowl 50", ""]


@pytest.mark.parametrize(
    ("pages", "ranges"),
    [([], ""), ([4], "4"), ([1, 2, 3, 5], "1-3,5"), ([7, 1, 2, 2, 9, 10], "1-2,7,9-10")],
)
def test_page_ranges_both_ways(pages, ranges) -> None:
    assert raw.page_ranges(pages) == ranges
    assert raw.pages_of(ranges) == sorted(set(pages))


def test_page_ranges_from_a_hand_edited_file_skip_what_is_not_a_page() -> None:
    assert raw.pages_of(" 1-2, x, 5 ,-3, 8-") == [1, 2, 5]


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("ต้มข่าไก่", "ต้มข่าไก่"),  # the vowel and tone marks stay with their consonants
        ("ข้าวหอมมะลิ notes", "ข้าวหอมมะลิ-notes"),
        ("Crème brûlée (v2)", "crème-brûlée-v2"),
        ("高山烏龍茶 筆記", "高山烏龍茶-筆記"),
        ("a/b\\c:d", "a-b-c-d"),
        ("🙂", "document"),
    ],
)
def test_raw_names_keep_every_letter_and_mark_of_any_script(name, slug) -> None:
    from knowledge.ingest.raw import raw_name, slugify

    assert slugify(name) == slug
    assert raw_name(name + ".txt", "ab" * 32) == f"{slug}-abababab.md"
