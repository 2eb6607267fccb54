"""The message catalog and the reader's language: every message in every language with the same
placeholders and tags, short enough for a phone; language tags and locales mapped; the model's
Simplified Chinese made Traditional for a Taiwanese reader."""

import re
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from bot.language import COMMANDS
from knowledge.answer.variants import answer_language, for_reader, traditional
from knowledge.report.status import columns
from knowledge.text import sentences
from knowledge.words.catalog import LOCALE_DIR, Words
from knowledge.words.language import for_telegram, for_terminal, normalise
from knowledge.words.reasons import REFUSED
from knowledge.words.replies import BODIES, DETAILED, LEADS, NOTES, SCOPES, UNAVAILABLE

ROOT = Path(__file__).resolve().parents[1]
KEYWORDS = {"tr": None, "ntr": (1, 2), "N_": None}
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
TAG = re.compile(r"</?[a-z]+[^>]*>")
BUTTONS = ["Ask about it", "Undo", "Sources", "Save as note", "Delete", "Keep it", "‹ Previous", "Next ›",
           "Open {n}", "Delete {n}", "Open [{n}]", "Search the web"]  # fmt: skip
CALLBACK_ANSWERS = ["this button has expired", "this button has expired — /find again", "it was undone",
                    "not indexed yet — tap again once it is", "nothing to undo", "undoing…", "opening…", "kept",
                    "deleting…", "restoring…", "already saved", "this note has expired", "saving…",
                    "{id} is already being imported", "importing {id}…", *REFUSED.values(), "Thanks — noted.",
                    "Changed — noted.", "Already noted.", "searching the web…", "this button belongs to another chat",
                    "the vote could not be saved (is the disk full?)"]  # fmt: skip


def extracted() -> set[str | tuple[str, str]]:
    """Every message the code marks for translation (what make catalog extracts)."""
    found: set = set()
    for folder in ("knowledge", "bot", "cli", "mcpserver"):
        for _, _, message, *_ in extract_from_dir(ROOT / folder, keywords=KEYWORDS, comment_tags=()):
            found.add(message if isinstance(message, str) else tuple(message))
    return found


def catalog(folder: str) -> dict:
    """A language's translations by message (a fuzzy one, which gettext does not use, counts as none)."""
    with (LOCALE_DIR / folder / "LC_MESSAGES" / "kb.po").open("rb") as fh:
        po = read_po(fh, locale=folder)
    return {(m.id if isinstance(m.id, str) else tuple(m.id)): "" if m.fuzzy else m.string for m in po if m.id}


@pytest.mark.parametrize("folder", ["zh_Hant", "th"])
def test_every_message_is_translated_with_the_same_placeholders_and_tags(folder):
    messages, translated = extracted(), catalog(folder)
    assert len(messages) > 200
    missing = [m for m in messages if not translated.get(m)]
    assert missing == []
    for msgid, text in translated.items():
        source = msgid if isinstance(msgid, str) else msgid[1]
        texts = text if isinstance(text, tuple | list) else [text]
        for t in texts:
            assert sorted(PLACEHOLDER.findall(t)) == sorted(PLACEHOLDER.findall(source)), (msgid, t)
            assert TAG.findall(t) == TAG.findall(source), (msgid, t)
            assert not re.search(
                r"[A-Za-z]{3,} [a-z]{3,} [a-z]{3,}", PLACEHOLDER.sub("", t).replace("KB_", "")
            ) or ("kb " in t or "--" in t), (msgid, t)  # no English sentence left untranslated


# An ASCII colon beside Chinese or a placeholder ("{id}: 下載中"), not in a URL (https://) or a time (21:40)
ASCII_COLON = re.compile(
    r"(?:[\u3400-\u9fff\u3000-\u303f\uff00-\uffef}]\s*(?:<[^>]+>\s*)*):(?!//)(?!\d)"
    r"|(?<![\d/a-z]):(?!//)\s*(?:<[^>]+>\s*)*[\u3400-\u9fff\u3000-\u303f\uff00-\uffef{]"
)


def test_chinese_writes_its_colons_full_width():
    for msgid, text in catalog("zh_Hant").items():
        for t in text if isinstance(text, tuple | list) else [text]:
            assert not ASCII_COLON.search(t), (msgid, t)
    assert ASCII_COLON.search("{id}: {state}") and ASCII_COLON.search("已拒絕: 原因")
    assert not ASCII_COLON.search(
        "請開啟 https://harbor.example/ 或在 21:40 之前"
    ) and not ASCII_COLON.search("{id}：{state}")


def test_every_said_kind_has_words_and_the_engine_says_nothing_unknown():
    kinds = (
        set(LEADS)
        | set(NOTES)
        | set(BODIES)
        | set(DETAILED)
        | set(SCOPES)
        | {"model-unavailable", "model-empty", "index-unreadable"}
    )
    sources = ("answer/assistant.py", "answer/reply.py", "conversation/session.py")
    source = "".join((ROOT / "knowledge" / name).read_text() for name in sources)
    said = set(re.findall(r'Said\("([a-z-]+)"', source))
    assert "best-passages" in said and said <= kinds, said - kinds
    assert set(UNAVAILABLE) == {"not-running", "no-answer", "bad-answer", "empty"}


@pytest.mark.parametrize("language", ["en", "zh-Hant", "zh-Hans", "th"])
def test_buttons_callback_answers_and_command_menus_fit_a_phone(language):
    words = Words(language)
    for label in BUTTONS:
        assert columns(words.tr(label, n=12)) <= 24, (language, label)
    for text in CALLBACK_ANSWERS:
        assert len(words.tr(text, id="web-5")) <= 200
    for name, text in COMMANDS:
        assert 3 <= len(words.tr(text)) <= 256 and re.fullmatch(r"[a-z]{1,32}", name)


def test_status_labels_line_up_in_every_script():
    from knowledge.report.status import aligned

    assert [columns(t) for t in ("inbox", "收件匣", "คลังความรู้", "เซิร์ฟเวอร์")] == [5, 6, 8, 8]
    lines = aligned([("คลังความรู้", "a"), ("收件匣", "b"), ("inbox", "c")])
    assert {columns(line.rstrip("abc")) for line in lines} == {16}


def test_simplified_is_derived_plurals_dates_and_numbers_follow_the_locale():
    on_a_mac = "The model server is not running on {computer}."
    assert Words("zh-Hant", computer="the Mac").tr(on_a_mac) == "Mac 上的模型伺服器沒有在執行。"
    assert Words("zh-Hans", computer="the Mac").tr(on_a_mac) == "Mac 上的模型服务器没有在运行。"
    assert [Words(x).ntr("{n} chunk", "{n} chunks", n) for x in ("en", "th") for n in (1, 1480)] == [
        "1 chunk", "1,480 chunks", "1 ส่วน", "1,480 ส่วน"]  # fmt: skip
    from datetime import date

    day = date(2026, 12, 2)
    assert [Words(x).date(day) for x in ("en", "zh-Hant", "th")] == [
        "Dec 2, 2026",
        "2026年12月2日",
        "2 ธ.ค. 2026",
    ]


@pytest.mark.parametrize(
    ("tag", "language"),
    [
        ("zh-hant", "zh-Hant"), ("zh-TW", "zh-Hant"), ("zh-HK", "zh-Hant"), ("zh-mo", "zh-Hant"),
        ("zh-hant-raw", "zh-Hant"), ("zh-hant-beta", "zh-Hant"), ("zh-hant-tw", "zh-Hant"), ("taiwan", "zh-Hant"),
        ("zh-hans", "zh-Hans"), ("zh-CN", "zh-Hans"), ("zh-sg", "zh-Hans"), ("zh-hans-raw", "zh-Hans"),
        ("zh", "zh-Hant"), ("zh-yue", "zh-Hant"), ("th", "th"), ("th-TH", "th"), ("en", "en"), ("en-GB", "en"),
        ("de", None), ("", None), (None, None),
    ],
)  # fmt: skip
def test_language_codes_are_normalised(tag, language):
    assert normalise(tag) == language


def test_the_chat_and_terminal_choose_their_language():
    assert for_telegram("th", "zh-hant", "") == "th"  # /lang wins
    assert for_telegram(None, "zh-hant", "en") == "zh-Hant"
    assert for_telegram(None, "zh", "zh-Hans") == "zh-Hans"  # a bare zh: KB_LANGUAGE's Chinese
    assert for_telegram(None, "de", "th") == "th" and for_telegram(None, None, "") == "en"
    assert for_terminal("th", "zh_TW.UTF-8") == "th"
    assert for_terminal("", "zh_TW.UTF-8") == "zh-Hant" and for_terminal("", "th_TH.UTF-8") == "th"
    assert (
        for_terminal("", "C") == "en"
        and for_terminal("", "") == "en"
        and for_terminal("", "fr_FR.UTF-8") == "en"
    )


@pytest.mark.parametrize(
    ("question", "chat", "language"),
    [
        ("港口放行檢查表要求什麼？", "zh-Hant", "zh-Hant"), ("港口放行检查表要求什么？", "zh-Hans", "zh-Hans"),
        ("港口放行檢查表要求什麼？", "en", "zh-Hant"), ("รายการตรวจสอบต้องทำอะไร", "zh-Hant", "th"),
        ("What does the checklist require?", "zh-Hant", "en"), ("FTS5 的 limit 是 what", "th", "th"),
    ],
)  # fmt: skip
def test_the_answer_is_written_in_the_questions_language_its_chinese_the_chats(question, chat, language):
    assert answer_language(question, chat) == language


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("这个文件说明了网络设置 [1]。", "這個檔案說明了網路設定 [1]。"),
        ("服务器的数据需要下载。", "伺服器的資料需要下載。"),
        ("软件会删除信息并恢复。", "軟體會刪除資訊並恢復。"),
        ("這個檔案說明了網路設定 [1]。", "這個檔案說明了網路設定 [1]。"),  # already Traditional: untouched
        ("資料庫的伺服器在台北。", "資料庫的伺服器在台北。"),
        ("用 `git pull` 下载代码，见 https://example.org/下载 与 Linus Torvalds。",
         "用 `git pull` 下載程式碼，見 https://example.org/下载 與 Linus Torvalds。"),  # code and URL kept
        ("```python\nprint('数据')\n```\n数据在这里", "```python\nprint('数据')\n```\n資料在這裡"),
        ("The checklist needs a manifest [1].", "The checklist needs a manifest [1]."),
        ("รายการตรวจสอบ [1]", "รายการตรวจสอบ [1]"),
    ],
)  # fmt: skip
def test_simplified_answers_are_made_traditional_for_a_taiwanese_reader(answer, shown):
    assert traditional(answer) == shown
    assert for_reader(answer, "zh-Hans") == answer and for_reader(answer, "en") == answer


@pytest.mark.parametrize(
    ("parts", "joined"),
    [
        (["你的文件沒有回答這個問題。", "已上網搜尋："], "你的文件沒有回答這個問題。已上網搜尋："),
        (["Your documents do not answer this.", "Searched the web:"], "Your documents do not answer this. Searched the web:"),
        (["3 已建立索引", "（目前不在）"], "3 已建立索引（目前不在）"),
        (["原始來源：", "https://harbor.example/"], "原始來源：https://harbor.example/"),
        (["模型已停止。", "kb doctor 會說明原因。"], "模型已停止。kb doctor 會說明原因。"),
        (["ไม่มีผลลัพธ์", "ค้นเว็บแล้ว"], "ไม่มีผลลัพธ์ ค้นเว็บแล้ว"),  # Thai keeps its space between sentences
        (["", "Searched the web:", " "], "Searched the web:"),
    ],
)  # fmt: skip
def test_sentences_are_joined_as_each_script_writes_them(parts, joined):
    assert sentences(parts) == joined


@pytest.mark.parametrize("language", ["zh-Hant", "th"])
def test_a_failed_web_search_is_said_in_the_readers_words_on_a_terminal_too(language):
    from knowledge.answer.reply import Reply, Said
    from knowledge.words.replies import plain

    detail = "DuckDuckGo did not answer: Cannot connect to host lite.duckduckgo.com:443 — check the network"
    said = (
        Said("nothing-local"),
        Said("web-failed", {"detail": detail}),
        Said("web-note", {"detail": detail}),
    )
    shown = plain(Reply("", "no-evidence", said=said), Words(language))
    assert "DuckDuckGo" not in shown and not re.search(r"[A-Za-z]{4,}", shown), shown
    english = plain(Reply("", "no-evidence", said=said), Words("en"))
    assert "Cannot connect to host" in english  # English reads the error itself, with its fix


@pytest.mark.parametrize("language", ["zh-Hant", "th"])
def test_a_source_file_kb_cannot_read_is_said_in_the_readers_words(language):
    from knowledge.words.sources import left_out

    detail = "bin.md is an executable (ELF), not a document kb can read"
    said = left_out(Words(language), "binary", error=detail)
    assert "ELF" not in said and not re.search(r"[A-Za-z]{3,}", said.replace("kb", "")), said
    assert detail in left_out(Words("en"), "binary", error=detail)  # English reads the converter's own words


@pytest.mark.parametrize("language", ["zh-Hant", "th"])
def test_the_command_that_starts_the_model_ends_its_line_in_every_language(language):
    from knowledge.answer.reply import Reply, Said
    from knowledge.words.replies import plain

    fix = "mlx_lm.server --model M --port 8081 --chat-template-args '{\"enable_thinking\": false}'"
    down = Said("model-unavailable", {"reason": "not-running", "detail": "refused", "fix": fix})
    shown = plain(Reply("[1] passage", "degraded", said=(down, Said("best-passages"))), Words(language))
    line = next(line for line in shown.splitlines() if "mlx_lm.server" in line)
    assert line.endswith(fix)  # copied from the terminal, the command takes nothing after it


@pytest.mark.parametrize(
    ("platform", "english", "chinese", "thai"),
    [
        ("darwin", "The model server is not running on the Mac.", "Mac 上的模型伺服器沒有在執行。",
         "เซิร์ฟเวอร์โมเดลบน Mac ไม่ได้ทำงานอยู่"),
        ("linux", "The model server is not running on the computer.", "電腦上的模型伺服器沒有在執行。",
         "เซิร์ฟเวอร์โมเดลบนคอมพิวเตอร์ไม่ได้ทำงานอยู่"),
    ],
)  # fmt: skip
def test_the_owners_computer_is_named_the_mac_only_on_a_mac(platform, english, chinese, thai):
    from knowledge.words.catalog import computer_of
    from knowledge.words.replies import unavailable_text

    said = [
        unavailable_text("not-running", Words(lang, computer=computer_of(platform)))
        for lang in ("en", "zh-Hant", "th")
    ]
    assert said == [english, chinese, thai]
    zh = Words("zh-Hant", computer=computer_of(platform))
    undo = zh.tr(
        "Could not undo {title}: the daemon refused it (kb logs on {computer} says why).", title="押金"
    )
    assert undo == "無法復原 押金：背景程式拒絕了（在{}上執行 kb logs 可看原因）。".format(
        " Mac " if platform == "darwin" else "電腦"
    )


def test_the_computers_name_is_spaced_from_chinese_and_thai_letters_only():
    from knowledge.words.catalog import with_computer

    assert with_computer("在{computer}上執行", "Mac") == "在 Mac 上執行"
    assert with_computer("在{computer}上執行", "電腦") == "在電腦上執行"
    assert with_computer("（{computer}）", "Mac") == "（Mac）"
    assert with_computer("บน{computer}ไม่ได้", "Mac") == "บน Mac ไม่ได้"
    assert with_computer("on {computer}'s disk", "the Mac") == "on the Mac's disk"
