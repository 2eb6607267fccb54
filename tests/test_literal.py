"""Documents holding words literally, read from a real index: Chinese, Thai and English words found as
written, title hits and the most occurrences first, never a page without the word."""

import pytest

from knowledge.retrieval.documents import match_documents
from knowledge.retrieval.literal import literal_documents, occurrences, word_pieces
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings

NOTES = {
    "rent.md": "# 租屋筆記\n\n房東說押金要兩個月，下個月退還押金。\n",
    "deposit.md": "# 合約\n\n租約第三條：押金一個月。\n",
    "power.md": "# 停電\n\n台電通知明天上午停電。\n",
    "bill.md": "# 轉寄：電費\n\n台灣電力公司提醒：本期電費帳單已寄出。\n",
    "thai.md": "# บ้าน\n\nค่าเช่าบ้านเดือนนี้ห้าพันบาท จ่ายค่าเช่าแล้ว\n",
    "ssd.md": "# New SSD\n\nBought an SSD for the laptop; the old ssds go to the drawer.\n",
    "disk.md": "# Storage\n\nThe drive is a solid state disk, fast and quiet.\n",
    "cafe.md": "# Café notes\n\nThe café on the corner opens at eight.\n",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("literal") / "kb")
    ingest_texts(settings, NOTES)
    with Index(settings.index_path, readonly=True) as opened:
        yield opened


def titles(index, words: str) -> list[str]:
    return [index.document(hit.document_id).title for hit in literal_documents(index, words)]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("押金", ["租屋筆記", "合約"]),  # two occurrences before one
        ("台電", ["停電"]),  # 台灣電力 holds 台 and 電, not 台電
        ("押", ["租屋筆記", "合約"]),  # one character: found among the terms holding it
        ("電", ["轉寄：電費", "停電"]),  # as often in both: the newest first
        ("ค่าเช่า", ["บ้าน"]),
        ("ค่า", ["บ้าน"]),
        ("SSD", ["New SSD"]),
        ("ssd laptop", ["New SSD"]),
        ("cafe", ["Café notes"]),  # a word without accents matches one with
        ("zeppelin", []),
        ("押金 zeppelin", []),  # every word, not any
        ("   ", []),
    ],
)
def test_documents_holding_every_word_as_written(index, words, expected):
    assert titles(index, words) == expected


def test_the_passage_holding_the_word_is_given_with_how_often(index):
    [hit] = literal_documents(index, "退還")
    assert hit.chunk is not None and "退還押金" in hit.chunk.text and hit.occurrences == 1
    [titled] = literal_documents(index, "筆記")
    assert titled.in_title and titled.occurrences == 2  # the title, and the heading in its passage


def test_the_index_narrows_each_word_by_its_runs():
    assert word_pieces("押金") == [("押金",)]
    assert word_pieces("押金條") == [("押金", "金條")]
    assert word_pieces("押") == ["押"]
    assert word_pieces("台電2024") == [("台電",), ("2024",)]
    assert word_pieces("Running") == [("run",)]
    assert word_pieces("—") == []
    assert occurrences("SSD, ssd and SSDs", "ssd") == 3
    assert occurrences("ค่าเช่าบ้าน", "ค่าเช่า") == 1 and occurrences("押金", "抻金") == 0


def test_find_lists_literal_matches_first_and_marks_the_rest_related(index):
    found = match_documents(index, "押金")
    assert [(m.document.title, m.is_literal) for m in found][:2] == [("租屋筆記", True), ("合約", True)]
    assert found[0].line == "房東說押金要兩個月，下個月退還押金。"
    assert [m.document.title for m in match_documents(index, "SSD") if m.is_literal] == ["New SSD"]
