"""The Telegram bot end to end: real HTTP to a local Bot API stand-in, the scripted model, the daemon."""

import html
import json
import re

import pytest
import structlog

from bot.main import create
from tests import bot_env
from tests.bot_env import (
    OWNER,
    STRANGER,
    TOKEN,
    drop_note,
    indexed_note,
    shown_as_html,
    valid_html,
    wait_indexed,
    web_offer,
)
from tests.conftest import make_settings, subprocess_env
from tests.fake_llm import Step, answer, free_port, web_step
from tests.fake_search import Result, ddg_results

env = bot_env.env  # the fixture


async def test_commands_are_registered_and_start_explains(env):
    env, _ = env
    names = [c["command"] for c in env.telegram.my_commands()]
    assert names == [
        "start",
        "help",
        "new",
        "stop",
        "search",
        "import",
        "find",
        "note",
        "digest",
        "sources",
        "folders",
        "status",
        "forget",
        "lang",
    ]
    await env.say("/start")
    call = await env.bot_said(lambda c: "answers from your own documents" in c.params["text"])
    assert valid_html(call)


async def test_a_question_is_answered_with_citations_while_typing(env):
    env, _ = env
    await indexed_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    env.llm.script = [answer("It is 317 metres deep [1]. <script>x</script> & more")]
    await env.say("How deep is Lake Quillan?")
    call = await env.bot_said(lambda c: "317 metres deep" in c.params["text"])
    assert valid_html(call)
    assert "&lt;script&gt;x&lt;/script&gt; &amp; more" in call.params["text"]
    assert re.search(r"\[1\] Lake Quillan — raw/quillan-[0-9a-f]{8}\.md:\d+-\d+", call.params["text"])
    assert any(a.action == "typing" for a in env.telegram.chat_actions(OWNER))


async def test_strangers_and_groups_get_nothing_and_are_logged(env):
    env, _ = env
    before = len(env.telegram.calls())
    env.llm.script = [answer("I don't know.")]
    with structlog.testing.capture_logs() as logs:
        await env.say("hello?", user=STRANGER)
        await env.say("/status", user=OWNER, chat=-100200, chat_type="supergroup")
        await env.say("relayed", via_bot=True)
        await env.say("ping")  # the owner, to know the bot has read past the others
        await env.bot_said(lambda c: c.params.get("chat_id") == OWNER and c.index >= before)
    sent = [c for c in env.telegram.calls() if c.method in ("sendMessage", "sendChatAction")]
    await env.telegram.wait_until(lambda: all(c.status is not None for c in sent))  # none still being read
    assert {c.params.get("chat_id") for c in sent if c.raw} == {OWNER}  # a call cancelled unsent has none
    assert all("relayed" not in json.dumps(r) and "hello?" not in json.dumps(r) for r in env.llm.requests)
    refused = [e for e in logs if e["event"] == "bot.refused"]
    assert {e["user_id"] for e in refused} == {STRANGER, OWNER} and len(refused) == 3


async def test_web_candidates_tap_to_import_and_answer_again(env):
    env, base = env
    results = [
        Result("The Varn valley and Lake Quillan", f"{base}/varn", "Lake Quillan depth in metres"),
        Result("Quillan tourism", "https://tourism.example/quillan", "Lake Quillan visits and depth"),
    ]
    offer = await web_offer(
        env, results, "1: YES\n2: YES", 1, lambda body: answer("Lake Quillan is 317 metres deep [1].")
    )
    assert valid_html(offer) and "[source:" not in offer.params["text"]
    buttons = offer.params["reply_markup"]["inline_keyboard"]
    assert [row[0]["text"][:5] for row in buttons] == ["web-1", "web-2", "👍"]  # then the answer's vote
    assert all(len(b["callback_data"].encode()) <= 64 for row in buttons for b in row)
    message_id = offer.result["message_id"]
    data = buttons[0][0]["callback_data"]
    first = env.telegram.push_callback(OWNER, OWNER, message_id, data)
    second = env.telegram.push_callback(OWNER, OWNER, message_id, data)  # a double tap
    answer_call = await env.bot_said(
        lambda c: "Lake Quillan is 317 metres deep" in c.params["text"], timeout_s=30
    )
    assert (
        "raw/the-varn-valley-" in answer_call.params["text"]
        and f'href="{base}/varn"' in answer_call.params["text"]
    )
    progress = env.telegram.message(OWNER, message_id)
    assert "web-1: indexed, 1 chunk — The Varn valley" in progress.text
    # the candidates stay tappable, the one imported marked
    assert [b["text"][:7] for b in progress.buttons] == ["✓ web-1", "web-2 ·", "👍", "👎"]
    assert [b["callback_data"] for b in progress.buttons] == [
        b["callback_data"] for row in buttons for b in row
    ]
    assert [h for h in progress.history if "downloading" in h] and [
        h for h in progress.history if "converting" in h
    ]
    assert env.telegram.callback_answer(first)["text"] == "importing web-1…"
    assert env.telegram.callback_answer(second)["text"] == "web-1 is already being imported"
    assert len(list(env.settings.processed.glob("the-varn-valley*.html"))) == 1  # imported once


async def test_when_the_model_says_the_notes_do_not_answer_the_web_is_offered_then_a_tap_answers(env):
    env, base = env
    drop_note(
        env, "quillan.md", "# Lake Quillan\n\nLake Quillan lies in the Varn valley and is loved by anglers.\n"
    )
    await wait_indexed(env, 1)

    def from_evidence(body):
        if "317 metres" in body["messages"][-1]["content"]:  # the imported page is in the evidence now
            return answer("Lake Quillan is 317 metres deep [1].")
        return answer("我不知道。")  # the note does not say how deep it is

    results = [Result("The Varn valley and Lake Quillan", f"{base}/varn", "Lake Quillan depth")]
    offer = await web_offer(env, results, "1: YES", 1, from_evidence)
    assert valid_html(offer) and offer.params["text"].startswith("Your documents do not answer this.")
    buttons = offer.params["reply_markup"]["inline_keyboard"]
    assert [row[0]["text"][:5] for row in buttons] == ["web-1", "👍"]
    env.telegram.push_callback(OWNER, OWNER, offer.result["message_id"], buttons[0][0]["callback_data"])
    answered = await env.bot_said(
        lambda c: "Lake Quillan is 317 metres deep" in c.params["text"], timeout_s=30
    )
    assert (
        "raw/the-varn-valley-" in answered.params["text"] and f'href="{base}/varn"' in answered.params["text"]
    )


async def test_forged_stale_and_foreign_callbacks_change_nothing(env):
    from knowledge.wiring import candidate_store

    env, base = env
    await env.say("/help")
    helped = await env.bot_said(lambda c: "answers from your own documents" in c.params["text"])
    message_id = helped.result["message_id"]
    store = candidate_store(env.settings)
    foreign = store.save("99", "q", ["q"], [("Varn", f"{base}/varn", "s")])
    stale = store.save(str(OWNER), "q", ["q"], [("Varn", f"{base}/varn", "s")])
    store.save(str(OWNER), "q2", ["q2"], [("Varn", f"{base}/varn", "s")])
    cases = {
        "imp:deadbeef:1": "replaced by a newer search",
        f"imp:{foreign.search_id}:1": "belongs to another chat",
        f"imp:{stale.search_id}:1": "replaced by a newer search",
        "imp:../../etc:1": "search again",
        "del:0123abcd:1": "search again",
        "x" * 64: "search again",
        "imp:0123abcd:9": "search again",
    }
    for data, says in cases.items():
        qid = env.telegram.push_callback(OWNER, OWNER, message_id, data)
        await env.telegram.wait_until(lambda q=qid: env.telegram.callback_answer(q) is not None)
        answered = env.telegram.callback_answer(qid)
        assert answered["show_alert"] is True and says in answered["text"], (data, answered)
    assert not list(env.settings.inbox.glob("*.html"))
    assert env.telegram.message(OWNER, message_id).history == []  # the message was never edited


async def test_a_long_answer_is_split_into_valid_pieces(env):
    env, _ = env
    await indexed_note(env, "long.md", "# Long\n\nThe long topic explained.\n")
    env.llm.script = [
        answer("\n\n".join(f"Part {n}: " + "many words & <symbols> here " * 40 + "[1]" for n in range(8)))
    ]
    before = len(env.telegram.calls())
    await env.say("Explain the long topic")
    await env.bot_said(lambda c: c.index > before and "Sources" in c.params["text"])
    # the pieces as the owner sees them: a page sent while streaming was edited into the answer's HTML
    sent = [c.result["message_id"] for c in env.telegram.calls("sendMessage") if c.index > before and c.ok]
    pieces = [m for m in env.telegram.bot_messages(OWNER) if m.message_id in sent]
    assert len(pieces) >= 2 and all(shown_as_html(p) for p in pieces)
    text = "".join(p.sent_text for p in pieces)
    assert all(f"Part {n}:" in text for n in range(8))


async def test_an_uploaded_file_is_indexed_and_reported(env):
    env, _ = env
    env.telegram.push_document(
        OWNER, OWNER, "zorblat.md", b"# Zorblat 9000\n\nIt brews 12 cups at once.\n", "text/markdown"
    )
    await env.bot_said(
        lambda c: "zorblat.md: indexed, 1 chunk — Zorblat 9000" in c.params["text"], timeout_s=30
    )
    sidecar = json.loads((env.settings.processed / "zorblat.md.source.json").read_text())
    assert sidecar["source"] == "telegram upload" and sidecar["telegram_user_id"] == OWNER
    docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    env.telegram.push_document(OWNER, OWNER, "report.docx", b"PK\x03\x04" + bytes(10), docx)
    refused = await env.bot_said(lambda c: "report.docx: kb accepts" in c.params["text"])
    assert "PNG" in refused.params["text"] and ".pdf" in refused.params["text"]


async def test_a_dead_model_server_degrades_never_silence(env, tmp_path):
    env, _ = env
    await indexed_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    env.llm.script = [Step(status=500)]
    await env.say("How deep is Lake Quillan?")
    call = await env.bot_said(lambda c: "The model server answered with an error." in c.params["text"])
    assert "317 metres deep" in call.params["text"] and "raw/quillan-" in call.params["text"]
    assert "The best matching passages:" in call.params["text"]
    # on a phone, what is wrong is said once, in words: no error text, no command
    assert "unavailable" not in call.params["text"] and "500" not in call.params["text"]


DEPOSIT = (
    "# Deposit rules\n\nThe **deposit** is *two months* of rent, see [the lease](https://lease.example/terms).\n\n"
    "| Item | Amount |\n|---|---:|\n| Deposit | 40,000 |\n\n- Returned within `30 days` of moving out\n"
)
DEPOSIT_SHOWN = [
    "The deposit is two months of rent, see the lease (https://lease.example/terms).",
    "Deposit · 40,000",
]
MARKDOWN_MARKS = ["**", "*two", "](", "| ", "|---", "# ", "`"]


async def test_the_passages_of_a_degraded_answer_are_plain_text_not_markdown(env):
    env, _ = env
    await indexed_note(env, "deposit.md", DEPOSIT)
    env.llm.script = [Step(status=500)]
    await env.say("How much is the deposit?")
    call = await env.bot_said(lambda c: "The best matching passages:" in c.params["text"])
    shown = html.unescape(re.sub(r"<[^>]+>", "", call.params["text"]))
    assert all(line in shown for line in DEPOSIT_SHOWN), shown
    assert [mark for mark in MARKDOWN_MARKS if mark in shown] == [], shown


async def test_forget_and_status(env):
    env, _ = env
    await env.say("/status")
    empty = await env.bot_said(lambda c: "knowledge base: " in c.params["text"])
    assert empty.params["text"].splitlines() == [
        "knowledge base: 0 documents", "waiting: nothing", "model server: running", "indexing: running",
        "web search: on",
    ]  # fmt: skip
    (env.settings.inbox / "ferry.md").write_text("# Ferry timetable\n\nThe ferry leaves at nine.\n")
    await wait_indexed(env, 1)
    sent = len(env.telegram.calls())
    await env.say("/status")
    status = await env.bot_said(lambda c: c.index >= sent and "knowledge base: " in c.params["text"])
    # what an owner needs, in words; paths, addresses, the process id and the tokenizer are kb status's
    lines = status.params["text"].splitlines()
    assert lines[0] == "knowledge base: 1 document" and re.fullmatch(
        r"last added: ferry\.md, \d+/\d+/\d+, \d+:\d\d\s[AP]M", lines[-1]
    )
    for internal in (str(env.settings.home), env.llm.base_url, "pid", "tokenizer", "approx-v1", "KB_"):
        assert internal not in status.params["text"]
    await env.say("/forget")
    await env.bot_said(lambda c: "no web candidates" in c.params["text"].lower())


def test_the_bot_refuses_to_start_without_allowed_users(tmp_path):
    from knowledge.errors import ConfigError

    settings = make_settings(
        tmp_path, KB_TELEGRAM_TOKEN=TOKEN, KB_TELEGRAM_API_URL=f"http://127.0.0.1:{free_port()}/bot"
    )
    with pytest.raises(ConfigError, match="KB_TELEGRAM_ALLOWED_USERS is empty.*kb logs --event bot.refused"):
        create(settings)


def test_kb_bot_polls_and_stops_cleanly_on_sigterm(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests.fake_telegram import threaded_fake_telegram

    with threaded_fake_telegram(TOKEN) as telegram:
        env = subprocess_env(KB_TELEGRAM_TOKEN=TOKEN, KB_TELEGRAM_ALLOWED_USERS=str(OWNER),
                             KB_TELEGRAM_API_URL=telegram.base_url, KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1")  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "--home", str(tmp_path), "bot"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not telegram.calls("getUpdates"):
                time.sleep(0.1)
            assert telegram.calls("getUpdates"), "the bot started polling"
            assert [c["command"] for c in telegram.my_commands()][:2] == ["start", "help"]
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
        finally:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 0, err
    # one start line on the console, even with no terminal (journald, launchd logs), and the event
    [line] = [line for line in out.splitlines() if line.startswith("kb bot @")]
    assert (
        "serving 1 allowed user," in line and "no index yet" in line and "SIGTERM or Ctrl-C stops it" in line
    )
    started = [json.loads(x) for x in (tmp_path / "runs" / "logs" / "kb.jsonl").read_text().splitlines()]
    [event] = [e for e in started if e["event"] == "bot.started"]
    assert event["allowed_users"] == 1 and event["bot"] and event["documents"] == "no index yet"


async def test_uploads_with_hidden_lock_file_or_long_names_are_saved_under_a_name_the_daemon_takes(env):
    env, _ = env
    thai = "ก" * 82 + ".md"  # 249 bytes: with ".source.json" it would pass the 255-byte limit
    for name, text in [
        (".hidden.md", "hidden walrus"),
        ("~$lock.md", "locked narwhal"),
        (thai, "thai dugong"),
    ]:
        env.telegram.push_document(
            OWNER, OWNER, name, f"# {text}\n\nAbout the {text}.\n".encode(), "text/markdown"
        )
        call = await env.bot_said(
            lambda c, t=text: f"indexed, 1 chunk — {t}" in c.params["text"], timeout_s=30
        )
        if name != thai:
            assert "saved as" in call.params["text"]
    assert not [p for p in env.settings.inbox.iterdir() if p.is_file()]  # nothing left waiting


async def test_a_reused_upload_name_reports_this_files_result_not_the_earlier_ones(env):
    env, _ = env
    env.telegram.push_document(OWNER, OWNER, "notes.md", b"# Old notes\n\nThe old notes.\n", "text/markdown")
    await env.bot_said(lambda c: "notes.md: indexed, 1 chunk — Old notes" in c.params["text"], timeout_s=30)
    png = b"\x89PNG\r\n\x1a\n" + bytes(64)
    env.telegram.push_document(OWNER, OWNER, "notes.md", png, "text/markdown")
    call = await env.bot_said(lambda c: "notes.md: not added" in c.params["text"], timeout_s=30)
    assert "Old notes" not in call.params["text"]


def _business_or_guest(kind: str, text: str) -> dict:
    """The owner writing, through kb as a business bot, in someone else's private chat."""
    owner = {"id": OWNER, "is_bot": False, "first_name": "Owner"}
    other = {"id": 555, "type": "private", "first_name": "Friend"}
    message = {"message_id": 900, "date": 1_700_000_000, "chat": other, "from": owner, "text": text}
    if kind == "business_message":
        message["business_connection_id"] = "bc-1"
    return {kind: message}


async def test_only_the_owners_own_chat_is_served_whatever_the_update_type(env):
    env, _ = env
    await indexed_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
    await env.say("/help")  # the owner's chat exists before the edit arrives
    await env.bot_said(lambda c: "answers from your own documents" in c.params["text"])
    before = len(env.telegram.calls())
    with structlog.testing.capture_logs() as logs:
        env.telegram.push_raw(_business_or_guest("business_message", "How deep is Lake Quillan?"))
        env.telegram.push_raw(_business_or_guest("guest_message", "How deep is Lake Quillan?"))
        env.telegram.push_raw({"edited_message": {
            "message_id": 901, "date": 1_700_000_000, "edit_date": 1_700_000_100,
            "chat": {"id": OWNER, "type": "private", "first_name": "Owner"},
            "from": {"id": OWNER, "is_bot": False, "first_name": "Owner"}, "text": "How deep is Lake Quillan?",
        }})  # fmt: skip
        await env.bot_said(lambda c: "Edited messages are not answered again" in c.params["text"])
        await env.say("ping")
        await env.bot_said(
            lambda c: (
                c.params.get("chat_id") == OWNER and c.index >= before and "ping" not in c.params["text"]
            )
        )
    sent = [
        c for c in env.telegram.calls() if c.index >= before and c.method in ("sendMessage", "sendChatAction")
    ]
    assert {c.params.get("chat_id") for c in sent} == {OWNER}
    assert not any("317" in c.params.get("text", "") for c in sent)  # the edit was not answered
    reasons = {e["reason"] for e in logs if e["event"] == "bot.refused"}
    assert reasons == {"business_message updates are not served", "guest_message updates are not served"}


async def test_import_after_a_web_search_that_found_nothing_says_so(env):
    env, _ = env
    env.search.script["ddg"] = [ddg_results("q", [])]
    env.llm.responder = web_step("ferry", "", "", lambda body: answer("I don't know."))
    await env.say("When does the Quillan ferry leave?")
    await env.bot_said(lambda c: "No web result passed the filters." in c.params["text"])
    sent = len(env.telegram.calls())
    await env.say("/import web-1")
    said = await env.bot_said(lambda c: c.index >= sent and c.method == "editMessageText")
    assert said.params["text"] == "<i>web-1: refused: the last web search found nothing to import</i>"


async def test_a_greeting_is_answered_without_the_not_from_your_documents_note(env):
    env, _ = env
    env.telegram.set_language(OWNER, "zh-hant")
    plan = '{"needsSearch": false, "queries": []}'
    env.llm.responder = lambda body: answer(
        plan if "plan web" in body["messages"][0]["content"] else "你好！"
    )
    await env.say("你好")
    said = await env.bot_said(lambda c: c.method == "sendMessage" and "你好！" in c.params["text"])
    assert said.params["text"] == "你好！"
    await env.say("Lake Quillan 有多深？")  # a question the documents do not answer still says so
    await env.bot_said(lambda c: "（非出自你的知識庫" in c.params["text"])


async def test_sentences_in_chinese_are_joined_without_an_ascii_space(env):
    env, _ = env
    env.telegram.set_language(OWNER, "zh-hant")
    env.search.script["ddg"] = [ddg_results("q", [])]
    env.llm.responder = web_step("ferry", "", "", lambda body: answer("我不知道。"))
    await env.say("奎蘭湖的渡輪幾點開？")
    said = await env.bot_said(lambda c: "沒有網路結果通過篩選" in c.params["text"])
    assert said.params["text"].startswith("你的文件沒有回答這個問題。已上網搜尋：\n")


@pytest.mark.parametrize("language", ["en", "zh-hant"])
async def test_a_tap_keeps_the_links_of_the_candidate_list(env, language):
    env, base = env
    env.telegram.set_language(OWNER, language)
    results = [Result("The Varn valley and Lake Quillan", f"{base}/varn", "Lake Quillan depth in metres")]
    offer = await web_offer(
        env, results, "1: YES", 1, lambda body: answer("Lake Quillan is 317 metres deep [1].")
    )
    link = f'<a href="{base}/varn">127.0.0.1</a>'
    assert link in offer.params["text"]
    tap = offer.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    env.telegram.push_callback(OWNER, OWNER, offer.result["message_id"], tap)
    await env.bot_said(lambda c: "Lake Quillan is 317 metres deep" in c.params["text"], timeout_s=30)
    edits = [c.params["text"] for c in env.telegram.calls("editMessageText")
             if c.params.get("message_id") == offer.result["message_id"]]  # fmt: skip
    assert edits and all(link in text and "web-1" in text for text in edits), edits
