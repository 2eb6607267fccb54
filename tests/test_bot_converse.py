"""The bot in conversation, through the Bot API stand-in: follow-ups in three languages, /new, the
idle limit, a restart, replies as anchors, answers streamed as drafts (or edits), paced, stopped,
cut off, and the model's Markdown rendered."""

import json
import re
import sqlite3
from contextlib import closing

import pytest

from tests import bot_env
from tests.bot_env import OWNER, ScriptedTranscriber, drop_note, running_bot, wait_indexed
from tests.fake_llm import Step, answer, web_step
from tests.fake_search import Result, ddg_results
from tests.test_converse import DOCS, FIRST, FOLLOW, REWRITES, SECOND, is_rewrite, scripted

env = bot_env.env  # the fixture
ALLOWED = {"b", "i", "a", "code", "pre", "s", "blockquote"}


async def kb_with_docs(env) -> None:
    for name, text in DOCS.items():
        drop_note(env, name, text)
    await wait_indexed(env, len(DOCS))


def owner_message(env, text: str) -> int:
    return next(m.message_id for m in env.telegram.messages(OWNER) if not m.from_bot and m.text == text)


async def answered(env, predicate, timeout_s: float = 20.0, *, since: int = 0):
    """The bot's first HTML message (sent or edited) among the calls from the ``since``-th on whose text
    passes ``predicate``."""
    return await env.telegram.wait_for(
        lambda c: c.index >= since and c.method in ("sendMessage", "editMessageText") and c.ok
        and c.params.get("parse_mode") == "HTML" and predicate(c.params["text"]), timeout_s,
    )  # fmt: skip


async def turn(env, message, predicate, timeout_s: float = 20.0, **reply):
    """The owner sends ``message`` (a reply when ``reply_to`` is given); the bot's answer to it."""
    since = len(env.telegram.calls())
    if reply:
        env.telegram.push_reply(OWNER, OWNER, message, **reply)
    else:
        await env.say(message)
    return await answered(env, predicate, timeout_s, since=since)


def html_ok(call) -> bool:
    tags = set(re.findall(r"</?([a-z-]+)", call.params["text"]))
    return call.params.get("parse_mode") == "HTML" and tags <= ALLOWED


async def test_follow_ups_in_three_languages_new_and_unknown_commands(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber()) as (env, _):
        env.llm.responder = scripted
        await kb_with_docs(env)
        for lang in ("en", "zh", "th"):
            await env.say(FIRST[lang])
            await answered(
                env, lambda t, lang=lang: FIRST[lang] not in t and "searched as" not in t and "[1]" in t
            )
            call = await turn(
                env, FOLLOW[lang], lambda t, lang=lang: SECOND[lang] in t and REWRITES[FOLLOW[lang]] in t
            )
            assert html_ok(call) and "searched as:" in call.params["text"]
            assert call.params["reply_parameters"]["message_id"] == owner_message(env, FOLLOW[lang])
            await turn(env, "/new", lambda t: t.startswith("A new conversation"))
        await turn(env, "/frobnicate", lambda t: "no command /frobnicate" in t and "/help" in t)
        rewrites = [r for r in env.llm.requests if is_rewrite(r)]
        assert len(rewrites) == 3  # one per follow-up, none for a first question
        assert all(FIRST["en"] not in r["messages"][1]["content"] for r in rewrites[1:])  # /new forgot it


async def test_a_restart_keeps_the_conversation_and_the_idle_limit_ends_it(tmp_path, varn_site):
    home = tmp_path / "kb"
    idle = {"KB_CONVERSATION_IDLE_S": "600"}
    async with running_bot(home, varn_site, transcribe=ScriptedTranscriber(), **idle) as (env, _):
        env.llm.responder = scripted
        await kb_with_docs(env)
        await turn(env, FIRST["en"], lambda t: "[1]" in t)
    async with running_bot(home, varn_site, transcribe=ScriptedTranscriber(), **idle) as (env, _):
        env.llm.responder = scripted
        await turn(env, FOLLOW["en"], lambda t: SECOND["en"] in t)
        assert any(is_rewrite(r) and FIRST["en"] in r["messages"][1]["content"] for r in env.llm.requests)
        with closing(sqlite3.connect(home / "runs" / "conversations.sqlite3")) as db, db:
            db.execute("UPDATE conversations SET last_at = last_at - 601")  # ten minutes of silence
        fresh = await turn(env, FIRST["zh"], lambda t: "A new conversation" in t)
        assert "[1]" in fresh.params["text"]


async def test_replies_are_anchors_an_older_answer_a_document_a_message_kb_never_saw(env):
    env, _ = env
    env.llm.responder = scripted
    await kb_with_docs(env)
    first = await turn(env, FIRST["en"], lambda t: "[1]" in t)
    await turn(env, "Where is the office kettle next to the printer?", lambda t: "[1]" in t)
    await turn(env, FOLLOW["en"], lambda t: SECOND["en"] in t, reply_to=first.result["message_id"])
    rewrite = [r for r in env.llm.requests if is_rewrite(r)][-1]["messages"][1]["content"]
    assert FIRST["en"] in rewrite and "office kettle" not in rewrite  # from the turn replied to

    # a file the owner sent: a reply to its "indexed" message asks about it
    since = len(env.telegram.calls())
    env.telegram.push_document(
        OWNER, OWNER, "receipt.txt", b"Receipt\n\nTotal due: 42.50 EUR\n", "text/plain"
    )
    indexed = await answered(env, lambda t: "receipt.txt: indexed" in t, since=since)
    env.llm.responder = None
    env.llm.script = [answer("42.50 EUR [1].")]
    about = await turn(
        env, "How much is it?", lambda t: "42.50 EUR" in t, reply_to=indexed.result["message_id"]
    )
    assert "receipt" in about.params["text"]
    assert "Total due" in env.llm.requests[-1]["messages"][1]["content"]

    # the document just sent is the conversation's: a follow-up is about it
    env.llm.script = [answer("Forty-two euros fifty [1].")]
    await turn(env, "這張收據總共多少錢？", lambda t: "Forty-two euros fifty" in t)
    assert "Total due" in env.llm.requests[-1]["messages"][1]["content"]

    # a message kb never saw: its text is context, marked as data
    env.llm.responder = scripted
    await turn(env, FOLLOW["en"], lambda t: SECOND["en"] in t, reply_to=9999, reply_to_text=FIRST["en"])
    rewrite = [r for r in env.llm.requests if is_rewrite(r)][-1]["messages"][1]["content"]
    assert f"(replying to a message: «{FIRST['en']}»)" in rewrite


PACE = {"KB_TELEGRAM_UPDATE_EVERY_S": "1"}  # the default: one update a second (the other tests go faster)


async def test_an_answer_streams_as_drafts_paced_then_one_final_message(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), **PACE) as (env, _):
        await kb_with_docs(env)
        text = "The checklist asks for three things: " + " ".join(f"point{n}" for n in range(60)) + " [1]."
        env.llm.script = [Step(answer=text, prefill_s=2.0, tokens_per_s=20)]
        env.telegram.fail_next("sendMessageDraft", retry_after=1)  # a flood wait on the way: waited out
        final = await turn(env, FIRST["en"], lambda t: "point59" in t, timeout_s=30)
        drafts = env.telegram.drafts(OWNER)
        assert (
            drafts[0].text.startswith("Reading ") and "passage" in drafts[0].text
        )  # while the prompt is read
        texts = [d.text for d in drafts if d.text.startswith("The checklist")]
        assert len(texts) >= 2 and all(
            b.startswith(a.rstrip(" ▍")) for a, b in zip(texts, texts[1:], strict=False)
        )
        gaps = [b.time - a.time for a, b in zip(drafts, drafts[1:], strict=False)]
        assert sum(gaps) / len(gaps) >= 0.9  # about one update a second
        assert len({d.draft_id for d in drafts}) == 1 and env.telegram.live_draft(OWNER) is None
        assert html_ok(final) and final.method == "sendMessage" and final.params["reply_markup"]  # Sources
        assert final.params["reply_parameters"]["message_id"] == owner_message(env, FIRST["en"])
        assert "I don" not in json.dumps([d.text for d in drafts])


async def test_without_drafts_the_answer_streams_by_edits_and_the_final_edit_carries_the_buttons(
    tmp_path, varn_site
):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), **PACE) as (env, _):
        env.telegram.drafts_refused = True
        await kb_with_docs(env)
        env.llm.script = [Step(answer="- **Manifest**: signed [1]\n- *Tide*: two hours, `<script>` & co [1]",
                               tokens_per_s=8)]  # fmt: skip
        final = await turn(env, FIRST["en"], lambda t: "Manifest" in t)
        plain = [c for c in env.telegram.calls() if c.method in ("sendMessage", "editMessageText")
                 and c.ok and not c.params.get("parse_mode")]  # fmt: skip
        assert plain and plain[0].method == "sendMessage"  # streamed into a message of its own
        gaps = [b.time - a.time for a, b in zip(plain, plain[1:], strict=False)]
        assert all(g >= 1.1 for g in gaps)  # edits at 1.2 s intervals
        assert (
            final.method == "editMessageText" and final.params["message_id"] == plain[0].result["message_id"]
        )
        assert (
            html_ok(final) and "<b>Manifest</b>" in final.params["text"] and "**" not in final.params["text"]
        )
        assert "&lt;script&gt;" in final.params["text"] and final.params["reply_markup"]
        assert env.telegram.message(OWNER, plain[0].result["message_id"]).buttons  # Sources


async def test_i_dont_know_never_shows_a_stream_cut_off_keeps_what_was_said_and_stop_ends_an_answer(env):
    env, base = env
    await kb_with_docs(env)
    env.search.script["ddg"] = [ddg_results("q", [Result("Harbor rules", f"{base}/varn", "harbor release")])]
    env.llm.responder = web_step("harbor checklist", "1: YES", "[1] Harbor rules.",
                                 lambda body: Step(answer="I don't know.", tokens_per_s=30))  # fmt: skip
    offer = await turn(env, FIRST["en"], lambda t: "From the web" in t)
    assert offer.params["reply_markup"] and not any("I don" in d.text for d in env.telegram.drafts(OWNER))

    env.llm.responder = None
    env.llm.script = [Step(answer="The manifest is signed by the master and " + "then " * 40, tokens_per_s=40,
                           cut_after=12)]  # fmt: skip
    cut = await turn(
        env, "What does the harbor release checklist require of the manifest?", lambda t: "cut off" in t
    )
    assert "The manifest is signed" in cut.params["text"] and "raw/harbor-" in cut.params["text"]

    env.llm.script = [Step(answer="word " * 300, tokens_per_s=10)]
    await env.say("What does the harbor release checklist require, in detail?")
    await env.telegram.wait_until(lambda: any("word word" in d.text for d in env.telegram.drafts(OWNER)), 15)
    env.llm.script = [answer("Two hours [1].")]
    waiting = len(env.telegram.calls())
    await turn(env, "And the tide window?", lambda t: "After the current answer" in t)  # it waits its turn
    stopped = await turn(env, "/stop", lambda t: "(stopped)" in t)
    assert "word word" in stopped.params["text"]
    await answered(env, lambda t: "Two hours" in t, since=waiting)  # the waiting question is answered next


async def test_a_failed_import_keeps_the_candidates_and_a_way_to_retry(env):
    env, base = env
    env.search.script["ddg"] = [
        ddg_results("q", [Result("Gone page", base.replace("127.0.0.1", "localhost") + "/gone", "Lake Quillan depth"),
                          Result("The Varn valley", f"{base}/varn", "Lake Quillan depth")])
    ]  # fmt: skip
    env.llm.responder = web_step("lake quillan depth", "1: YES\n2: YES", "[1] Gone.\n[2] Varn.",
                                 lambda body: answer("Lake Quillan is 317 metres deep [1]."))  # fmt: skip
    await env.say("How deep is Lake Quillan?")
    offer = await env.bot_said(lambda c: c.method == "sendMessage" and c.params.get("reply_markup"))
    rows = offer.params["reply_markup"]["inline_keyboard"]
    env.telegram.push_callback(OWNER, OWNER, offer.result["message_id"], rows[0][0]["callback_data"])
    await env.telegram.wait_until(
        lambda: "/import web-1" in (env.telegram.message(OWNER, offer.result["message_id"]).text or ""), 20
    )
    shown = env.telegram.message(OWNER, offer.result["message_id"])
    assert [b["text"][:7] for b in shown.buttons] == ["↻ web-1", "web-2 ·", "👍", "👎"]
    tap = env.telegram.push_callback(OWNER, OWNER, offer.result["message_id"], rows[0][0]["callback_data"])
    await env.telegram.wait_until(lambda: env.telegram.callback_answer(tap) is not None, 10)
    assert env.telegram.callback_answer(tap)["text"] == "importing web-1…"  # tried again, not "already"
    env.telegram.push_callback(OWNER, OWNER, offer.result["message_id"], rows[1][0]["callback_data"])
    reply = await answered(
        env, lambda t: "317 metres" in t, timeout_s=30, since=len(env.telegram.calls()) - 1
    )
    assert "raw/the-varn-valley-" in reply.params["text"]  # answered from the page imported


@pytest.mark.parametrize("drafts", [True, False], ids=["drafts", "edits"])
async def test_stop_on_a_multi_page_answer_finishes_the_page_and_sends_the_rest(tmp_path, varn_site, drafts):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber()) as (env, _):
        env.telegram.drafts_refused = not drafts
        await kb_with_docs(env)
        env.llm.script = [Step(answer=" ".join(f"signature-{n:04d}" for n in range(1500)), tokens_per_s=320)]
        await env.say("What does the harbor release checklist require, in detail?")

        def page(c) -> bool:  # a full page became a message of its own (no cursor: it is finished)
            return (c.ok and c.method in ("sendMessage", "editMessageText") and not c.params.get("parse_mode")
                    and len(c.params["text"]) > 3000 and not c.params["text"].endswith("▍"))  # fmt: skip

        first = await env.telegram.wait_for(page, 30)
        await env.say("/stop")
        stopped = await answered(env, lambda t: t.endswith("<i>(stopped)</i>"))
        calls = env.telegram.calls()
        assert not [
            c
            for c in calls
            if c.method == "editMessageText" and not c.ok and "not modified" not in str(c.response)
        ]
        page_id = first.params.get("message_id") or first.result["message_id"]
        kept = env.telegram.message(OWNER, page_id).text
        assert kept == first.params["text"].strip()  # the full page stays as it was (Telegram trims it)
        rest = stopped.params["text"].removesuffix("<i>(stopped)</i>").strip()
        numbers = [int(n) for n in re.findall(r"signature-(\d{4})", kept + " " + rest)]
        assert (
            numbers == list(range(len(numbers))) and len(numbers) > 150
        )  # the rest follows on, nothing lost
        assert (
            stopped.index > first.index
            and (stopped.params.get("message_id") or stopped.result["message_id"]) != page_id
        )
