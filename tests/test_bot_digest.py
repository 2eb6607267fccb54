"""kb speaks first, end to end: /digest through the Bot API stand-in, and the scheduled digest that
fell due while the bot was down, sent once at start and never twice."""

import time

import pytest
import structlog

from tests.bot_env import OWNER, ScriptedTranscriber, running_bot, valid_html, wait_indexed, web_offer
from tests.conftest import make_settings
from tests.fake_llm import answer, web_step
from tests.fake_search import Result, ddg_results
from tests.test_bot_capture import channel


async def test_digest_shows_what_came_in_grouped_with_open_buttons(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber()) as (env, _):
        (env.settings.inbox / "ferry.md").write_text("# Ferry timetable\n\nThe ferry leaves at nine.\n")
        env.telegram.push_forward(OWNER, OWNER, origin=channel(71), text="The pier closes at six")
        await wait_indexed(env, 2)
        await env.say("/digest")
        digest = await env.bot_said(lambda c: c.params["text"].startswith("<b>Digest: "))
        text = digest.params["text"]
        assert (
            "<b>Files</b>\n1. Ferry timetable" in text
            and "<b>Notes and forwards</b>\n2. The pier closes at six" in text
        )
        assert [b["text"] for b in env.telegram.message(OWNER, digest.result["message_id"]).buttons] == [
            "Open 1",
            "Open 2",
        ]
        assert valid_html(digest)
        sent = len(env.telegram.calls())
        await env.say("/digest")  # since the last one: nothing new
        await env.bot_said(
            lambda c: c.index >= sent and c.params["text"].startswith("Nothing was kept or asked since ")
        )


async def test_the_digest_leaves_out_questions_answered_since_and_greetings(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber()) as (env, base):
        results = [Result("The Varn valley and Lake Quillan", f"{base}/varn", "Lake Quillan depth in metres")]
        offer = await web_offer(  # not in the documents: answered once the owner has imported a page
            env, results, "1: YES", 1, lambda body: answer("Lake Quillan is 317 metres deep [1].")
        )
        tap = offer.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        env.telegram.push_callback(OWNER, OWNER, offer.result["message_id"], tap)
        await env.bot_said(lambda c: "Lake Quillan is 317 metres deep [1]" in c.params["text"], timeout_s=30)
        greet = '{"needsSearch": false, "queries": []}'
        env.llm.responder = lambda body: answer(
            greet if "plan web" in body["messages"][0]["content"] else "你好！"
        )
        await env.say("你好")
        await env.bot_said(lambda c: "你好！" in c.params["text"])
        env.search.script["ddg"] = [ddg_results("q", [])]  # nothing on the web either: still open
        env.llm.responder = web_step("ferry", "", "", lambda body: answer("I don't know."))
        await env.say("When does the Quillan ferry leave?")
        await env.bot_said(lambda c: "No web result passed the filters." in c.params["text"])
        await env.say("/digest")
        digest = await env.bot_said(lambda c: c.params["text"].startswith("<b>Digest: "))
        text = digest.params["text"]
        assert "<b>Questions left unanswered</b>\n• When does the Quillan ferry leave?" in text
        assert "How deep is Lake Quillan?" not in text and "你好" not in text


async def test_a_scheduled_digest_missed_while_down_is_sent_once_at_start(tmp_path, varn_site):
    from knowledge.conversation.store import Conversations

    home = tmp_path / "kb"
    Conversations(make_settings(home).conversations_path).digest_sent(f"tg:{OWNER}", time.time() - 3 * 86400)
    for start in ("after three days down", "again"):
        async with running_bot(
            home, varn_site, transcribe=ScriptedTranscriber(), KB_DIGEST="daily@00:00"
        ) as bot:
            env, _ = bot
            env.telegram.add_chat(OWNER)  # the owner's chat with the bot, as Telegram knows it
            with structlog.testing.capture_logs() as logs:  # the start-up check, 3 s after the start
                await env.telegram.wait_until(lambda: any(e["event"] == "bot.digest_checked" for e in logs))
            [checked] = [e for e in logs if e["event"] == "bot.digest_checked"]
            assert checked["sent"] is (start == "after three days down"), start
            sent = [
                c
                for c in env.telegram.calls("sendMessage")
                if "Nothing was kept or asked since " in c.params["text"]
            ]
            assert len(sent) == (1 if start == "after three days down" else 0), start


def test_a_digest_of_many_long_summaries_fits_one_message(tmp_path):
    from datetime import UTC, datetime, timedelta

    from bot.deps import BotDeps
    from bot.digest import digest_html
    from knowledge.report.digest import Digest, Item

    now = datetime(2026, 12, 3, tzinfo=UTC)
    items = [Item(f"doc-{n:016x}", f"Document {n} " + "with a long title " * 4, "files", "A summary that goes on. " * 8,
                  now.isoformat()) for n in range(50)]  # fmt: skip
    digest = Digest(now - timedelta(days=7), now, {"files": items}, {}, ["How deep is it?"] * 1)
    deps = BotDeps(
        settings=make_settings(tmp_path), engine=None, store=None, fetch=None, allowed_users=frozenset()
    )
    text, markup = digest_html(deps, OWNER, digest)
    assert len(text) <= 4096 and "…and " in text  # the rest is counted, not cut off mid-line
    assert text.count("\n1. ") == 1 and len(markup.inline_keyboard[0]) == 4


@pytest.fixture
def berlin(monkeypatch):
    """This machine's clock in Europe/Berlin (summer time from the last Sunday of March)."""
    import tzlocal

    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    tzlocal.reload_localzone()
    yield
    monkeypatch.undo()
    time.tzset()
    tzlocal.reload_localzone()


@pytest.mark.parametrize(
    ("after", "sent_utc"),
    [
        (
            "2027-03-27T12:00:00+00:00",
            "2027-03-28T06:00:00+00:00",
        ),  # 08:00 CEST, the morning clocks go forward
        ("2026-10-24T12:00:00+00:00", "2026-10-25T07:00:00+00:00"),  # 08:00 CET, the morning they go back
        ("2026-12-05T12:00:00+00:00", "2026-12-06T07:00:00+00:00"),
    ],
)
def test_the_scheduled_digest_keeps_the_owners_hour_across_a_change_of_clocks(
    tmp_path, berlin, after, sent_utc
):
    from datetime import datetime

    from bot.app import build_application
    from bot.deps import BotDeps
    from bot.digest import schedule_digests

    app = build_application(
        None, token="1:x", base_url="http://127.0.0.1:9/bot", base_file_url="http://127.0.0.1:9/file/bot"
    )
    deps = BotDeps(settings=make_settings(tmp_path, KB_DIGEST="daily@08:00"), engine=None, store=None, fetch=None,
                   allowed_users=frozenset({OWNER}))  # fmt: skip
    schedule_digests(app, deps)
    [job] = app.job_queue.get_jobs_by_name(f"digest-{OWNER}")
    fires = job.job.trigger.get_next_fire_time(None, datetime.fromisoformat(after))
    assert fires == datetime.fromisoformat(sent_utc)
