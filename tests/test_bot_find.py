"""Finding and managing documents from the phone, end to end: /find with pages, Open (the passage and
the original file back), Delete → Undo, the Sources button under an answer, and forged buttons."""

import re

import pytest

from bot.actions import Actions
from daemon.main import background
from knowledge.model.tokenizer import ApproxCounter
from tests import bot_env
from tests.bot_env import (
    OWNER,
    ScriptedTranscriber,
    drop_note,
    indexed_note,
    running_bot,
    valid_html,
    wait_indexed,
)
from tests.conftest import ingest_texts, make_settings
from tests.fake_llm import answer

env = bot_env.env  # the fixture


async def tap(env, message, label: str) -> dict:
    """Tap the button with this label on a message; the callback's answer once given."""
    data = next(b["callback_data"] for b in message.buttons if b["text"] == label)
    qid = env.telegram.push_callback(OWNER, OWNER, message.message_id, data)
    await env.telegram.wait_until(lambda: env.telegram.callback_answer(qid) is not None)
    return env.telegram.callback_answer(qid)


async def ask_to_delete(env, words: str):
    """/find words, then Delete on its only document: the confirming message."""
    await env.say(f"/find {words}")
    call = await env.bot_said(lambda c: "1 document" in c.params["text"])
    await tap(env, env.telegram.message(OWNER, call.result["message_id"]), "Delete 1")
    await env.bot_said(lambda c: c.params["text"].startswith("Delete "))
    return last_with(env, "the original is kept in the trash for 30 days")


def last_with(env, text: str):
    return next(m for m in reversed(env.telegram.bot_messages(OWNER)) if m.text and text in m.text)


async def test_find_lists_matching_documents_a_page_at_a_time(env):
    env, _ = env
    for n in range(7):
        drop_note(env, f"harbour-{n}.md", f"# Harbour day {n}\n\nBoats left the harbour {n} times.\n")
    drop_note(env, "bread.md", "# Sourdough\n\nSourdough rises with wild yeast.\n")
    await wait_indexed(env, 8)
    await env.say("/find harbour")
    call = await env.bot_said(lambda c: "7 documents" in c.params["text"])
    assert valid_html(call)
    listing = env.telegram.message(OWNER, call.result["message_id"])
    assert "(1–5)" in listing.text and "Sourdough" not in listing.text
    assert re.search(
        r"1\. Harbour day \d · [A-Z][a-z]{2} \d{1,2}, \d{4} · harbour-\d\.md\n    Boats left the harbour",
        listing.text,
    )
    labels = [b["text"] for b in listing.buttons]
    assert labels == [f"{a} {n}" for n in range(1, 6) for a in ("Open", "Delete", "Summarise")] + ["Next ›"]
    await tap(env, listing, "Next ›")
    await env.telegram.wait_until(
        lambda: "(6–7)" in (env.telegram.message(OWNER, listing.message_id).text or "")
    )
    page2 = env.telegram.message(OWNER, listing.message_id)
    assert [b["text"] for b in page2.buttons] == [
        "Open 6", "Delete 6", "Summarise 6", "Open 7", "Delete 7", "Summarise 7", "‹ Previous",
    ]  # fmt: skip
    await tap(env, page2, "‹ Previous")
    await env.telegram.wait_until(
        lambda: "(1–5)" in (env.telegram.message(OWNER, listing.message_id).text or "")
    )
    await env.say("/find zeppelin")
    await env.bot_said(lambda c: "No document matches “zeppelin”" in c.params["text"])
    await env.say("/find")
    await env.bot_said(lambda c: "Usage: /find words" in c.params["text"])


async def test_open_sends_the_passage_with_its_lines_and_the_original_file_back(env):
    env, _ = env
    data = drop_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    await wait_indexed(env, 1)
    await env.say("/find Quillan")
    call = await env.bot_said(lambda c: "1 document" in c.params["text"])
    answered = await tap(env, env.telegram.message(OWNER, call.result["message_id"]), "Open 1")
    assert answered["text"] == "opening…"
    sent = await env.telegram.wait_for("sendDocument", timeout_s=10)
    assert sent.ok and sent.params["_files"]["document"] == "quillan.md"
    assert env.telegram.file(sent.result["document"]["file_id"]).data == data
    passage = last_with(env, "Lake Quillan is 317 metres deep.")
    assert re.search(r"raw/quillan-[0-9a-f]{8}\.md:\d+-\d+", passage.text)


async def test_delete_asks_once_more_then_undo_brings_the_document_back(env):
    env, _ = env
    drop_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    drop_note(env, "bread.md", "# Sourdough\n\nSourdough rises with wild yeast.\n")
    await wait_indexed(env, 2)
    confirm = await ask_to_delete(env, "Quillan")
    assert [b["text"] for b in confirm.buttons] == ["Delete", "Keep it"]
    yes = confirm.buttons[0]["callback_data"]
    await tap(env, confirm, "Delete")
    await env.telegram.wait_until(
        lambda: "Deleted: Lake Quillan" in (env.telegram.message(OWNER, confirm.message_id).text or ""), 25
    )
    assert not list(env.settings.raw.glob("quillan-*.md"))
    assert not list(env.settings.processed.glob("quillan*.md"))
    await env.say("/find Quillan")
    await env.bot_said(lambda c: "No document matches “Quillan”" in c.params["text"])
    qid = env.telegram.push_callback(OWNER, OWNER, confirm.message_id, yes)  # a replayed confirmation
    await env.telegram.wait_until(lambda: env.telegram.callback_answer(qid) is not None)
    again = env.telegram.callback_answer(qid)
    assert again["show_alert"] is True and "expired" in again["text"]

    deleted = env.telegram.message(OWNER, confirm.message_id)
    await tap(env, deleted, "Undo")
    await env.telegram.wait_until(
        lambda: "Restored: Lake Quillan" in (env.telegram.message(OWNER, confirm.message_id).text or ""), 25
    )
    assert list(env.settings.raw.glob("quillan-*.md")) and list(env.settings.processed.glob("quillan*.md"))
    await env.say("/find Quillan")
    await env.bot_said(lambda c: "1 document" in c.params["text"] and "Lake Quillan" in c.params["text"])


async def test_keep_it_deletes_nothing(env):
    env, _ = env
    await indexed_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    confirm = await ask_to_delete(env, "Quillan")
    await tap(env, confirm, "Keep it")
    await env.telegram.wait_until(
        lambda: "Kept: Lake Quillan" in (env.telegram.message(OWNER, confirm.message_id).text or "")
    )
    assert list(env.settings.raw.glob("quillan-*.md"))


async def test_the_sources_button_shows_the_passages_the_answer_used(env):
    env, _ = env
    await indexed_note(
        env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep and never freezes.\n"
    )
    env.llm.script = [answer("It is 317 metres deep [1].")]
    await env.say("How deep is Lake Quillan?")
    call = await env.bot_said(lambda c: "317 metres deep" in c.params["text"])
    reply = env.telegram.message(OWNER, call.result["message_id"])
    assert [b["text"] for b in reply.buttons] == ["Sources", "👍", "👎"]
    await tap(env, reply, "Sources")
    shown = await env.bot_said(lambda c: c.params["text"].startswith("[1] "))
    assert valid_html(shown)
    passage = env.telegram.message(OWNER, shown.result["message_id"])
    assert "never freezes" in passage.text and re.search(r"raw/quillan-[0-9a-f]{8}\.md:\d+-\d+", passage.text)
    await tap(env, passage, "Open [1]")
    sent = await env.telegram.wait_for("sendDocument", timeout_s=10)
    assert sent.params["_files"]["document"] == "quillan.md"


async def test_forged_replayed_and_foreign_buttons_do_nothing(env):
    env, _ = env
    await indexed_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    await env.say("/find Quillan")
    call = await env.bot_said(lambda c: "1 document" in c.params["text"])
    listing = env.telegram.message(OWNER, call.result["message_id"])
    delete = next(b["callback_data"] for b in listing.buttons if b["text"] == "Delete 1")
    for data in ("act:forged-token", "act:", "act:" + "x" * 60, delete.replace("act:", "act:x")):
        qid = env.telegram.push_callback(OWNER, OWNER, listing.message_id, data)
        await env.telegram.wait_until(lambda q=qid: env.telegram.callback_answer(q) is not None)
        assert "expired" in env.telegram.callback_answer(qid)["text"]
    assert list(env.settings.raw.glob("quillan-*.md"))


def test_a_button_acts_only_in_its_own_chat_once_when_once_and_not_after_a_day():
    now = [1000.0]
    actions = Actions(clock=lambda: now[0])
    data = actions.add(OWNER, "delete-yes", once=True, doc_id="doc-1")
    assert actions.take(OWNER + 1, data) is None  # another chat
    assert actions.take(OWNER, data).target == {"doc_id": "doc-1"}
    assert actions.take(OWNER, data) is None  # once
    page = actions.add(OWNER, "page", page=1)
    assert actions.take(OWNER, page) is not None and actions.take(OWNER, page) is not None
    now[0] += 24 * 3600 + 1
    assert actions.take(OWNER, page) is None  # a day later
    assert len(data.encode()) <= 64  # Telegram's callback data limit


async def test_a_delete_asked_while_the_daemon_is_down_is_done_when_it_starts(tmp_path, varn_site):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"quillan.md": "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n"})
    async with running_bot(home, varn_site, transcribe=ScriptedTranscriber(), daemon=False) as (env, _):
        confirm = await ask_to_delete(env, "Quillan")
        await tap(env, confirm, "Delete")
        waiting = "Waiting for the daemon: “Lake Quillan” leaves your knowledge base when it runs."
        await env.telegram.wait_until(lambda: env.telegram.message(OWNER, confirm.message_id).text == waiting)
        assert list(env.settings.raw.glob("quillan-*.md"))  # nothing done yet, nothing lost
        with background(env.settings, ApproxCounter()):
            await env.telegram.wait_until(lambda: not list(env.settings.raw.glob("quillan-*.md")), 15)
        assert len(list(env.settings.trash.iterdir())) == 1


async def test_open_says_who_wrote_an_article_and_when_in_the_readers_language(env):
    env, _ = env
    drop_note(env, "quillan.html",
              '<html><head><title>Lake news</title><meta name="author" content="Jane Doe">'
              '<meta property="article:published_time" content="2024-05-01T10:00:00Z"></head><body>'
              "<article><h1>Lake Quillan is deep</h1>"
              "<p>Lake Quillan is 317 metres deep and never freezes in winter, scientists say after a long survey.</p>"
              "<p>Anglers come in summer to the Varn valley, where the lake lies between two ridges of granite.</p>"
              "</article></body></html>")  # fmt: skip
    await wait_indexed(env, 1)
    await env.say("/find Quillan")
    call = await env.bot_said(lambda c: "1 document" in c.params["text"])
    await tap(env, env.telegram.message(OWNER, call.result["message_id"]), "Open 1")
    passage = await env.bot_said(
        lambda c: "317 metres deep" in c.params["text"] and "<code>raw/" in c.params["text"]
    )
    assert "<i>by Jane Doe · published May 1, 2024</i>" in passage.params["text"]
    assert valid_html(passage)


async def test_summarise_reads_a_long_document_part_by_part_and_cites_its_parts(tmp_path, varn_site):
    from tests.fake_llm import Step
    from tests.test_summary import LONG

    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(),
                           KB_CONTEXT_TOKENS="1500", KB_MAX_OUTPUT_TOKENS="256") as (env, _):  # fmt: skip
        env.llm.responder = lambda body: Step(
            answer="The log counts boats [1] and tides [2]."
            if "Summarise the whole document" in body["messages"][-1]["content"]
            else "Boats were counted [1]."
        )
        drop_note(env, "harbour.md", LONG)
        await wait_indexed(env, 1)
        await env.say("/find harbour")
        call = await env.bot_said(lambda c: "1 document" in c.params["text"])
        answered = await tap(env, env.telegram.message(OWNER, call.result["message_id"]), "Summarise 1")
        assert answered["text"] == "summarising…"
        await env.bot_said(
            lambda c: re.fullmatch(r"<i>Reading part 3 of \d+…</i>", c.params["text"]), timeout_s=30
        )
        done = await env.bot_said(
            lambda c: "The log counts boats [1] and tides [2]." in c.params["text"], timeout_s=30
        )
        assert done.params["text"].startswith("<b>The harbour log</b>\n\n")
        assert re.search(
            r"\[1\] <code>raw/harbour-[0-9a-f]{8}\.md:\d+-\d+</code>\n\[2\] <code>", done.params["text"]
        )
        summary = env.telegram.message(OWNER, done.params["message_id"])
        assert [b["text"] for b in summary.buttons] == ["Open [1]", "Open [2]"]
        assert valid_html(done)


@pytest.mark.parametrize(
    ("text", "asks"),
    [("summarise it", True), ("Summarize this.", True), ("TL;DR", True), ("摘要一下", True), ("幫我總結", True),
     ("สรุปให้หน่อยครับ", True), ("summarise the meeting about boats", False), ("What does it summarise?", False),
     ("摘要裡說了什麼？", False)],
)  # fmt: skip
def test_a_message_that_only_asks_for_a_summary(text, asks):
    from bot.summarise import asks_for_summary

    assert asks_for_summary(text) is asks


async def test_summarise_it_after_sending_a_document_summarises_that_document(env):
    env, _ = env
    from tests.test_bot_capture import channel

    env.telegram.push_forward(OWNER, OWNER, origin=channel(81), text="The pier closes at six tonight")
    await env.bot_said(lambda c: "Saved: The pier closes at six tonight\nIndexed" in c.params["text"])
    env.llm.script = [answer("The pier closes at six [1].")]
    await env.say("摘要一下")
    done = await env.bot_said(lambda c: "The pier closes at six [1]." in c.params["text"], timeout_s=20)
    assert done.params["text"].startswith("<b>The pier closes at six tonight</b>\n\n")
    assert "Summarise the whole document" in env.llm.requests[-1]["messages"][-1]["content"]


async def test_a_summary_longer_than_one_message_is_shown_split_never_a_stuck_reading(env):
    env, _ = env
    from tests.test_bot_capture import channel

    env.telegram.push_forward(OWNER, OWNER, origin=channel(82), text="The harbour log of the winter")
    await env.bot_said(lambda c: "Saved: The harbour log of the winter\nIndexed" in c.params["text"])
    long = " ".join(
        f"Sentence {n} about the boats and the tides [1]." for n in range(100)
    )  # 4,600 characters
    env.llm.script = [answer(long)]
    await env.say("summarise it")
    reading = await env.bot_said(lambda c: c.method == "sendMessage" and "Reading “" in c.params["text"])
    await env.bot_said(lambda c: "Sentence 99 about" in c.params["text"], timeout_s=20)
    status = env.telegram.message(OWNER, reading.result["message_id"])
    assert status.text.startswith(
        "The harbour log of the winter\n\nSentence 0 about"
    )  # no longer "Reading …"
    later = [m for m in env.telegram.bot_messages(OWNER) if m.message_id > status.message_id]
    shown = " ".join([status.text, *(m.text for m in later)])
    assert all(f"Sentence {n} about the boats" in shown for n in range(100))
    assert [b["text"] for b in later[-1].buttons] == ["Open [1]"] and not status.buttons


async def test_a_file_name_with_a_right_to_left_override_is_listed_and_sent_back_neutralised(env):
    env, _ = env
    await indexed_note(
        env, "invoice\u202efdp.md", "# Invoice \u202efdp.exe\n\nThe invoice is due on Friday.\n"
    )
    await env.say("/find invoice")
    call = await env.bot_said(lambda c: "1 document" in c.params["text"])
    assert "Invoice fdp.exe" in call.params["text"] and not re.search(
        "[\u202a-\u202e\u2066-\u2069]", call.params["text"]
    )
    await tap(env, env.telegram.message(OWNER, call.result["message_id"]), "Open 1")
    sent = await env.telegram.wait_for("sendDocument", timeout_s=10)
    assert sent.ok and sent.params["_files"]["document"] == "invoicefdp.md"
