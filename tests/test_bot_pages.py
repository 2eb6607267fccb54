"""What reaches Telegram fits and reads as written: 4,096 counted as UTF-16 code units (an emoji or a
math letter counts two), long texts split rather than refused, bidirectional overrides removed."""

import re

from bot.render import candidate_buttons, reply_messages
from knowledge.answer.reply import Citation, Reply
from knowledge.websearch.store import Candidate, SearchRecord
from tests import bot_env
from tests.bot_env import indexed_note
from tests.fake_llm import Step
from tests.fake_telegram import parse_html, utf16_len

env = bot_env.env  # the fixture
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
EMOJI, MATH = "😀", "𝐱"  # both beyond U+FFFF: two UTF-16 code units each


def shown(message: str) -> str:
    return parse_html(message)[0]


def test_a_reply_of_emoji_and_math_letters_is_cut_as_telegram_counts():
    reply = Reply(f"{EMOJI} " * 1500 + "\n\n" + MATH * 3000, "local", [])
    messages = reply_messages(reply)
    assert all(utf16_len(shown(m).strip()) <= 4096 for m in messages)
    assert "".join(shown(m) for m in messages).count(EMOJI) == 1500
    assert "".join(shown(m) for m in messages).count(MATH) == 3000


def test_bidirectional_overrides_never_reach_a_message_or_a_button():
    title = "Invoice \u202efdp.exe\u202c and \u2067isolated\u2069"
    reply = Reply("See the invoice [1].", "local", [Citation(1, title, "raw/a.md", 1, 3, None, "c1")])
    [message] = reply_messages(reply)
    assert not BIDI.search(message) and "Invoice fdp.exe and isolated" in message
    record = SearchRecord("0123abcd", "42", "q", ["q"], "2026-11-29T00:00:00+00:00",
                          [Candidate("web-1", title, "https://x.example/", "s")])  # fmt: skip
    assert not BIDI.search(candidate_buttons(record)[0].text)


async def test_a_streamed_answer_of_emoji_is_never_refused_and_arrives_whole(env):
    env, _ = env
    await indexed_note(env, "smileys.md", "# Smileys\n\nThe harbor office answers with smileys.\n")
    env.llm.script = [Step(answer=f"{EMOJI} " * 2500, tokens_per_s=2000)]  # 7,500 code units
    await env.say("How does the harbor office answer?")
    last = await env.bot_said(
        lambda c: c.params.get("parse_mode") == "HTML" and "Sources" in c.params["text"], 30
    )
    calls = [c for c in env.telegram.calls() if c.index <= last.index and "text" in c.params]
    too_long = [c for c in calls if not c.ok and "too long" in str(c.response)]
    assert too_long == []
    final = [c for c in calls if c.ok and c.params.get("parse_mode") == "HTML"]
    on_screen = {c.params.get("message_id") or c.result["message_id"]: c.params["text"] for c in final}
    assert sum(shown(t).count(EMOJI) for t in on_screen.values()) == 2500  # every one, once


async def test_a_title_with_a_right_to_left_override_reaches_the_chat_neutralised(env):
    env, _ = env
    await indexed_note(env, "ferry.md", "# Ferry \u202etxt.exe timetable\n\nThe ferry leaves at nine.\n")
    await env.say("/sources")
    listed = await env.bot_said(lambda c: "Latest documents" in c.params["text"])
    assert "Ferry txt.exe timetable" in listed.params["text"] and not BIDI.search(listed.params["text"])


def test_a_source_url_that_is_not_http_is_not_linked():
    reply = Reply("Ask them [1][2].", "local", [Citation(1, "Harbor office", "raw/a.md", 1, 3, "tg://resolve?domain=x_bot", "c1"),
                                             Citation(2, "Pier", "raw/b.md", 1, 3, "https://pier.example/", "c2")])  # fmt: skip
    [message] = reply_messages(reply)
    assert "tg:" not in message and "[1] Harbor office — raw/a.md:1-3" in message
    assert '[2] <a href="https://pier.example/">Pier</a>' in message


def test_a_long_list_of_emoji_is_cut_between_items_and_keeps_its_markup():
    items = "\n".join(f"- **item {n}** " + EMOJI * 20 for n in range(200))  # 8,000+ code units
    messages = reply_messages(Reply(items, "local", []))
    assert len(messages) > 1 and all(utf16_len(shown(m).strip()) <= 4096 for m in messages)
    assert all(m.count("<b>item ") == m.count("• ") for m in messages)  # no item lost its bold
    assert sum(m.count("<b>item ") for m in messages) == 200
