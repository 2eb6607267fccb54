"""A typed choice among the web candidates on show: recognised per language, imported as a tap, never
searched; a search that finds nothing never replaces the list."""

from datetime import UTC, datetime

import pytest

from knowledge.conversation.store import Conversations
from knowledge.websearch.choice import Typed, typed_choice
from knowledge.websearch.store import CandidateStore
from knowledge.wiring import candidate_store
from tests import bot_env
from tests.bot_env import OWNER, web_offer
from tests.conftest import make_settings
from tests.fake_llm import answer
from tests.fake_search import Result

env = bot_env.env  # the fixture
IDS = ["web-1", "web-2", "web-3"]


@pytest.mark.parametrize(
    ("message", "chosen"),
    [
        ("我選 web-2，請匯入", Typed("web-2")),
        ("我選web-2請匯入", Typed("web-2")),
        ("匯入 web-2", Typed("web-2")),
        ("選第 3 筆", Typed("web-3")),
        ("第二個", Typed("web-2")),
        ("第 2 個吧", Typed("web-2")),
        ("the second one", Typed("web-2")),
        ("import web-1", Typed("web-1")),
        ("I'll take the first one, thanks", Typed("web-1")),
        ("last one", Typed("web-3")),
        ("เลือก web-2", Typed("web-2")),
        ("เอาอันที่สองครับ", Typed("web-2")),
        ("ＷＥＢ－２", Typed("web-2")),  # full-width, as a phone keyboard may type it
        # it chooses, but not clearly which: asked, never guessed
        ("匯入那個", Typed(None)),
        ("import it", Typed(None)),
        ("web-7", Typed(None)),
        ("web-1 and web-2", Typed(None)),
        ("第五個", Typed(None)),
        # not a choice: questions, the answer's points, anything else
        ("那第二點呢？", None),
        ("第二個是什麼網站？", None),
        ("what is web-2?", None),
        ("Tell me about web-3", None),
        ("the second point", None),
        ("แล้วอันที่สองล่ะ", None),
        ("怎麼選 SSD？", None),
        ("web 2.0 是什麼", None),
        ("How deep is Lake Quillan?", None),
    ],
)
def test_a_typed_choice_is_recognised_per_language(message, chosen):
    assert typed_choice(message, IDS) == chosen


def test_with_one_candidate_on_show_import_it_is_clear_and_without_any_nothing_is_a_choice():
    assert typed_choice("import it", ["web-1"]) == Typed("web-1")
    assert typed_choice("我選 web-2", []) is None


def test_a_search_that_finds_nothing_never_replaces_a_live_list(tmp_path):
    store = CandidateStore(tmp_path / "web-search.json", clock=lambda: datetime.now(UTC))
    live = store.save("chat", "How deep is Lake Quillan?", ["q"], [("Varn", "https://varn.example/", "x")])
    empty = store.save("chat", "我選 web-2，請匯入", ["q2"], [])
    assert empty.candidates == [] and store.latest("chat").search_id == live.search_id
    fresh = store.save("chat", "Quillan tides", ["q3"], [("Tides", "https://tides.example/", "y")])
    assert store.latest("chat").search_id == fresh.search_id  # a search that found something does


def test_kb_ask_in_a_conversation_imports_a_typed_choice_through_the_guard(tmp_path, run_kb):
    home = tmp_path / "kb"
    store = candidate_store(make_settings(home))
    live = store.save("cli", "How deep is Lake Quillan?", ["lake quillan depth"],
                      [("Other", "https://other.example/", "x"), ("Local", "http://127.0.0.1:9/varn", "y")])  # fmt: skip
    chosen = run_kb("--home", str(home), "ask", "--conversation", "lake", "我選 web-2，請匯入")
    assert chosen.returncode == 2 and "refused (private-address)" in chosen.stderr  # the import's own guard
    unclear = run_kb("--home", str(home), "ask", "--conversation", "lake", "匯入那個")
    assert unclear.returncode == 2 and "web-1, web-2" in unclear.stdout
    assert store.latest("cli").search_id == live.search_id  # the list stays for another choice


async def test_the_bot_takes_a_typed_choice_as_a_tap_and_keeps_the_list(env):
    env, base = env
    results = [
        Result("Quillan tourism", "https://tourism.example/quillan", "Lake Quillan visits and depth"),
        Result("The Varn valley and Lake Quillan", f"{base}/old-varn", "Lake Quillan depth in metres"),
    ]
    offer = await web_offer(
        env, results, "1: YES\n2: YES", 2, lambda body: answer("Lake Quillan is 317 metres deep [1].")
    )
    searched = len(env.search.seen)
    record = candidate_store(env.settings).latest(str(OWNER))
    await env.say("匯入那個")
    which = await env.bot_said(lambda c: "Which one?" in c.params.get("text", ""))
    candidates = offer.params["reply_markup"]["inline_keyboard"][:-1]  # the last row: 👍 / 👎 on the answer
    assert which.params["reply_markup"]["inline_keyboard"] == candidates  # the same candidates, asked again
    await env.say("我選 web-2，請匯入")
    await env.bot_said(lambda c: "Lake Quillan is 317 metres deep" in c.params.get("text", ""), timeout_s=30)
    assert any("web-2: indexed" in m.text for m in env.telegram.messages(OWNER))
    assert len(env.search.seen) == searched  # neither message was searched on the web
    assert candidate_store(env.settings).latest(str(OWNER)).search_id == record.search_id  # the list stays
    said = [t.message for t in Conversations(env.settings.conversations_path).current(f"tg:{OWNER}").turns]
    assert "我選 web-2，請匯入" not in said and "匯入那個" not in said  # never a question (nor unanswered)


def test_a_choice_not_in_the_list_is_refused_in_the_readers_words_not_as_expired():
    from knowledge.words.catalog import Words
    from knowledge.words.reasons import refused

    said = {language: refused("not-in-latest", Words(language)) for language in ("en", "zh-Hant", "th")}
    assert "expired" not in said["en"] and "no such candidate" in said["en"]
    assert said["zh-Hant"] == "最近一次搜尋沒有這一筆——請從它的清單中選"
    assert not any(ch.isascii() and ch.isalpha() for ch in said["th"])
