"""``in:NAME`` and ``#tag`` inside a chat's question scope its search as --in and --tag do, and the answer
says which scope it searched, in the reader's language: the terminal chat in process and the bot through
the Bot API stand-in, on real folders and a real index."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cli.chat import answer
from knowledge.conversation.scoping import Asked, scope_words
from knowledge.wiring import conversing, open_engine
from knowledge.words.catalog import Words
from tests import bot_env
from tests.bot_env import drop_note, running_bot, wait_indexed
from tests.conftest import make_settings
from tests.fake_llm import free_port
from tests.test_tag_scope import DOCS, INBOX, QUESTION, VAULT, home  # noqa: F401 - the fixture

env = bot_env.env  # the fixture
RENT = {"Lease", "Garage", "Office", "Storage"}


@pytest.mark.parametrize(
    ("message", "asked"),
    [
        ("in:vault when does the plumber come", Asked("when does the plumber come", "vault")),
        ("when does the plumber come in:vault?", Asked("when does the plumber come ?", "vault")),
        ("what is in:vault.", Asked("what is .", "vault")),
        ("how much was the #deposit", Asked("how much was the deposit", None, "deposit")),
        ("#押金 是多少", Asked("押金 是多少", None, "押金")),
        ("ค่ามัดจำ #บ้าน เท่าไร", Asked("ค่ามัดจำ บ้าน เท่าไร", None, "บ้าน")),
        ("in:docs #home/rent deposit", Asked("home/rent deposit", "docs", "home/rent")),
        ("#rent and #home", Asked("rent and #home", None, "rent")),  # the first counts
        ("is C# faster, or #1?", Asked("is C# faster, or #1?")),  # no tags there
        ("what is within:vault or in: x", Asked("what is within:vault or in: x")),
        ("# a heading", Asked("# a heading")),
    ],
)
def test_scope_words_in_a_message(message, asked):
    assert scope_words(message) == asked


async def chat_reply(kb_home: Path, question: str, language: str = "en"):
    """The terminal chat's answer to one question (the model is down: the passages are shown)."""
    settings = make_settings(kb_home, KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_WEB_SEARCH="off")
    out = io.StringIO()
    async with open_engine(settings) as engine:
        answered = await answer(conversing(settings, engine), "cli:test", question, out, Words(language))
    assert answered is not None
    return answered.reply, out.getvalue()


def titles(reply) -> set[str]:
    return {p.title for p in reply.passages}


async def test_a_tag_in_the_question_scopes_the_search_and_the_answer_says_so(home):  # noqa: F811
    everywhere, _ = await chat_reply(home, QUESTION)
    assert "Gym" in titles(everywhere)
    reply, shown = await chat_reply(home, f"#rent {QUESTION}")
    assert titles(reply) and titles(reply) <= RENT
    assert reply.searched_as[0] == "rent how much is the deposit"  # the tag's word stays, its '#' goes
    assert shown.count("(Searched only the notes tagged #rent.)") == 1
    both, shown = await chat_reply(home, f"in:vault {QUESTION} #RENT", "zh-Hant")
    assert titles(both) == {"Lease", "Garage"}
    assert "（只搜尋了來源 vault 中帶有標籤 #RENT 的筆記。）" in shown
    source, shown = await chat_reply(home, f"{QUESTION} in:docs", "th")
    assert titles(source) == {"Office"} and "(ค้นหาเฉพาะแหล่งข้อมูล docs)" in shown


async def test_an_unknown_scope_is_refused_naming_what_there_is(home):  # noqa: F811
    reply, shown = await chat_reply(home, f"#rnet {QUESTION}")
    assert reply.passages == [] and reply.citations == []
    assert "no document carries the tag #rnet; the tags used most are: #rent (3)" in shown
    reply, shown = await chat_reply(home, f"in:vualt {QUESTION}", "zh-Hant")
    assert reply.passages == [] and "沒有名為 vualt 的來源；現有來源：vault, docs" in shown


async def test_the_bot_scopes_a_question_by_its_tag(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site) as (env, _):  # noqa: F811
        for name, text in {**INBOX, **VAULT, **DOCS}.items():
            drop_note(env, name, text)
        await wait_indexed(env, len(INBOX) + len(VAULT) + len(DOCS))
        await env.say(f"#rent {QUESTION}")
        call = await env.bot_said(lambda c: "Searched only the notes tagged #rent." in c.params["text"], 30)
        asked = [r for r in env.llm.requests if QUESTION.removeprefix("how ") in str(r["messages"])][-1]
        evidence = str(asked["messages"])
        assert "office deposit" in evidence and "gym deposit" not in evidence
        assert "<i>(Searched only the notes tagged #rent.)</i>" in call.params["text"]
        await env.say(f"#rnet {QUESTION}")
        await env.bot_said(
            lambda c: "no document carries the tag #rnet; the tags used most are: #rent (" in c.params["text"]
        )
