"""What a degraded reply shows of a passage: the sentences nearest the question, as plain text (its
Markdown read), never cut inside a word or a cluster."""

import unicodedata

import pytest

from knowledge.answer.excerpt import cut, excerpt, is_cluster_boundary, readable
from tests.conftest import ingest_texts, make_settings
from tests.fake_llm import free_port
from tests.test_bot import DEPOSIT, DEPOSIT_SHOWN, MARKDOWN_MARKS

LAKE = (
    "Lake Quillan lies in the Varn valley. The bridge over it was built in 1907 by the county council, "
    "which also paid for the road along the northern shore and the small harbour at Brenn. "
    "Lake Quillan is 317 metres deep and never freezes. Anglers come in summer."
)


def test_the_sentence_that_answers_is_shown_whole_even_when_it_is_not_first():
    shown = excerpt(LAKE, "How deep is Lake Quillan?", limit=120)
    assert "Lake Quillan is 317 metres deep and never freezes." in shown
    assert "bridge" not in shown and shown.endswith("…")  # more follows in the passage


def test_a_sentence_too_long_for_the_room_is_cut_at_a_space():
    long = "The " + "very " * 100 + "end."
    shown = cut(long, 60)
    assert len(shown) <= 60 and shown.endswith("very…") and " ver…" not in shown


@pytest.mark.parametrize(
    "text",
    [
        "ต้มข่าไก่เป็นแกงน้ำกะทิของไทยรสเปรี้ยวเค็มหวานและหอมกลิ่นข่าเครื่องปรุงมีเนื้อไก่กะทิข่าตะไคร้ใบมะกรูดเห็ดฟางน้ำปลา",
        "高山烏龍茶生長在海拔一千公尺以上的茶園茶湯清香甘甜帶有花香沖泡時建議使用九十五度的熱水茶葉大約佔壺身的四分之一",
        "Cre\u0300me bru\u0302le\u0301e " * 12,
        "👩\u200d👩\u200d👧\u200d👦👍🏽" * 20,
    ],
)
def test_text_without_spaces_is_cut_between_clusters(text):
    for limit in range(8, 40):
        shown = cut(text, limit)
        body = shown.removesuffix("…")
        assert len(shown) <= limit and text.startswith(body)
        assert is_cluster_boundary(text, len(body))
        assert not unicodedata.combining(text[len(body)])  # no mark left without its letter
        assert (
            body[-1] not in "\u0e40\u0e41\u0e42\u0e43\u0e44\u200d"
        )  # nor a leading vowel or joiner at the end


def test_a_passage_in_another_language_shows_its_opening():
    thai = "ต้มข่าไก่เป็นแกงน้ำกะทิของไทย รสเปรี้ยว เค็ม หวาน และหอมกลิ่นข่า วิธีทำ ตั้งกะทิให้เดือดอ่อน ๆ"
    assert excerpt(thai, "How do I cook it?", limit=40).startswith("ต้มข่าไก่เป็นแกงน้ำกะทิของไทย")


def test_a_chinese_question_is_shown_the_sentences_holding_its_words_in_english():
    pets = ("hous", "pet")  # 寵物, as knowledge.retrieval.glossary gives it
    shown = excerpt(LAKE + " Pets are welcome on the ferry.", "可以帶寵物嗎？", limit=80, senses=[pets])
    assert shown == "… Pets are welcome on the ferry."
    assert excerpt(LAKE, "可以帶寵物嗎？", limit=80, senses=[pets]).startswith(
        "Lake Quillan lies"
    )  # none: the opening


def test_a_question_sharing_no_word_is_shown_the_sentences_nearest_in_meaning():
    asked = []

    def near(sentences):  # as the second embedder would find them: the depth sentence nearest
        asked.append(list(sentences))
        return [0.9 if "317 metres" in s else 0.1 for s in sentences]

    shown = excerpt(LAKE, "ทะเลสาบลึกเท่าไร", limit=60, near=near)
    assert shown == "… Lake Quillan is 317 metres deep and never freezes. …" and len(asked) == 1
    assert excerpt(LAKE, "ทะเลสาบลึกเท่าไร", limit=60, near=lambda s: None).startswith("Lake Quillan lies")
    assert (
        excerpt(LAKE, "How deep is Lake Quillan?", limit=60, near=near) and len(asked) == 1
    )  # words: not asked


def test_short_passages_are_shown_whole():
    assert excerpt("Lake Quillan is 317 metres deep.", "how deep") == "Lake Quillan is 317 metres deep."
    assert excerpt("", "anything") == "" and excerpt("   \n ", "anything") == ""


@pytest.mark.parametrize(
    ("markdown", "text"),
    [
        ("## Deposit\n\nThe **deposit** is *two* ~~three~~ months.", "Deposit\nThe deposit is two three months."),
        ("See [the lease](https://lease.example/terms) or <https://a.example/>.",
         "See the lease (https://lease.example/terms) or https://a.example/."),
        ("[a note](notes/rent.md) and ![the meter](meter.jpg)", "a note and the meter"),
        ("| Item | Amount |\n|---|---:|\n| Deposit | **40,000** |", "Item · Amount\nDeposit · 40,000"),
        ("| Rent | 20,000 |\n| Water | 300 |", "Rent · 20,000\nWater · 300"),  # a passage cut inside a table
        ("- one\n- two\n  1. first\n  2. second", "• one\n• two\n  1. first\n  2. second"),
        ("3. third\n4. fourth", "3. third\n4. fourth"),
        ("> quoted `code` here\n\n```\nx = a | b\n```", "quoted code here\nx = a | b"),
        ("押金是**兩個月**，見[合約](https://example.com/c)。", "押金是兩個月，見合約 (https://example.com/c)。"),
        ("ค่ามัดจำ **สองเดือน**\n\n<b>not html</b> 2 \\* 3", "ค่ามัดจำ สองเดือน\n<b>not html</b> 2 * 3"),
    ],
)  # fmt: skip
def test_markdown_is_read_as_plain_text(markdown, text):
    assert readable(markdown) == text


def test_kb_ask_without_a_model_shows_the_passages_as_plain_text(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"deposit.md": DEPOSIT})
    env = {"KB_LLM_URL": f"http://127.0.0.1:{free_port()}/v1", "KB_WEB_SEARCH": "off"}
    shown = run_kb("--home", str(home), "ask", "How much is the deposit?", env=env).stdout
    assert "The best matching passages:" in shown and all(line in shown for line in DEPOSIT_SHOWN), shown
    assert [mark for mark in MARKDOWN_MARKS if mark in shown] == [], shown
