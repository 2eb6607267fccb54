import sqlite3

import pytest

from knowledge.retrieval.search import search
from knowledge.store.analysis import index_body, match_expression, normalize, query_terms, terms
from knowledge.store.index import Index
from tests.conftest import ingest_texts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Engines ran", ["engin", "ran"]),
        ("déjà vu", ["deja", "vu"]),
        ("ＦＵＬＬＷＩＤＴＨ １２３", ["fullwidth", "123"]),
        ("面试通过", ["面试", "试通", "通过"]),
        ("臺北", ["臺北"]),
        ("我", ["我"]),
        ("ไทย", ["ไทย"]),
        ("ภาษาไทย", ["ภาษ", "าษา", "ษาไ", "าไท", "ไทย"]),
        ("308分", ["308", "分"]),
        ("e-mail c++ foo@bar.com", ["e", "mail", "c", "foo", "bar", "com"]),
    ],
)
def test_terms(text, expected):
    assert terms(text) == expected


def test_hidden_characters_do_not_split_or_hide_words():
    assert terms("pass\u200bword") == terms("password")
    assert terms("\ufeffpass\u00adword\U000e0041") == terms("password")
    assert "\x00" not in normalize("alpha\x00beta")


def test_query_terms_drop_question_words_and_repeats():
    assert query_terms("What is the name of the engine? THE ENGINE!") == ["engin"]
    assert query_terms("黑豹队的防守丢了多少分？")[:3] == ["黑豹", "豹队", "队的"]
    assert query_terms("the of and") == []


def test_index_body_marks_sentences_without_making_them_terms():
    body = index_body("First sentence here. Second one!\n第三句。第四句")
    assert body.split(" | ") == ["first sentenc here", "second on", "第三 三句", "第四 四句"]


# Thai writers differ on where (and whether) to put spaces between words: "ข้าวมันไก่" (chicken
# rice) is one dish to a dictionary, three words (rice, fat, chicken) to someone typing
# "ข้าว มัน ไก่" on a phone. Each of the three words alone leads to another document.
THAI_DISTRACTORS = {
    "rice.md": "# การปลูกข้าว\n\nชาวนาปลูกข้าวในฤดูฝนและเก็บเกี่ยวในเดือนพฤศจิกายน\n",
    "oil.md": "# น้ำมัน\n\nราคาน้ำมันเพิ่มขึ้นในเดือนนี้เพราะความต้องการสูง\n",
    "chicken.md": "# ไก่ทอด\n\nไก่ทอดหาดใหญ่ขายดีที่สุดในภาคใต้\n",
}


@pytest.mark.parametrize(
    ("passage", "question"),
    [
        ("ร้านข้าวมันไก่ของป้าแดงอยู่ในตลาดบางรัก", "ข้าว มัน ไก่"),
        ("ร้าน ข้าว มัน ไก่ ของ ป้าแดง อยู่ ใน ตลาดบางรัก", "ข้าวมันไก่"),
    ],
    ids=["question-spaced", "passage-spaced"],
)
def test_a_thai_question_finds_its_passage_however_the_words_are_spaced(settings, passage, question):
    ingest_texts(settings, {**THAI_DISTRACTORS, "aunt-daeng.md": f"# ร้านอาหาร\n\n{passage}\n"})
    with Index(settings.index_path) as index:
        results = search(index, question, k=3)
    assert results[0].source_name == "aunt-daeng.md"
    assert "ป้าแดง" in results[0].text


HOSTILE = [
    '"',
    '"unterminated',
    "AND",
    "a OR",
    "NOT x",
    "NEAR(a b)",
    "*foo",
    "-foo",
    "col:foo",
    "c++",
    "(foo",
    "it's",
    "^foo",
    "🙂",
    "'; DROP TABLE chunks; --",
    "x" * 10_000,
    "a AND" * 2000,
    "\x00",
    "ก" * 5000,
]


@pytest.mark.parametrize("query", HOSTILE)
def test_any_user_string_is_a_valid_fts5_expression(query):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5 (body, tokenize = 'ascii')")
    conn.execute("INSERT INTO t (body) VALUES (?)", (index_body("foo bar c and it s x ก 🙂"),))
    expression = match_expression(query_terms(query))
    if expression:
        conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
