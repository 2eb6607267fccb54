import html
import re
from datetime import UTC, datetime

import pytest
from telegram import Chat, Message, MessageOriginUser, Update, User

from bot.access import refusal
from bot.pages import MAX_TEXT, split_blocks, visible_length
from bot.render import candidate_buttons, parse_callback, reply_messages
from knowledge.answer.reply import Citation, Reply, Said
from knowledge.websearch.store import Candidate, SearchRecord

OWNER = 42
ALLOWED_TAGS = {"b", "i", "a", "code", "pre"}


def assert_valid_telegram_html(message: str) -> None:
    """Only Telegram's tags, balanced, and no bare & or < outside them."""
    stack = []
    for m in re.finditer(r"<(/?)([a-z-]+)[^>]*>", message):
        closing, tag = m.group(1), m.group(2)
        assert tag in ALLOWED_TAGS, tag
        if closing:
            assert stack and stack.pop() == tag
        else:
            stack.append(tag)
    assert not stack
    text = re.sub(r"<[^>]+>", "", message)
    assert not re.search(r"&(?!(lt|gt|amp|quot|#\d+|#x[0-9a-f]+);)", text) and "<" not in text
    assert visible_length(message) <= MAX_TEXT


def cite(n, url=None):
    return Citation(n, f"Doc <{n}> & co", f"raw/doc-{n}.md", 3, 9, url, f"doc-x-chunk-{n:04d}")


def test_answer_with_citations_is_escaped_html_with_links():
    reply = Reply("It is 5 < 6 & true [1][2].", "local", [cite(1), cite(2, "https://a.example/?q=1&r=2")])
    [message] = reply_messages(reply)
    assert_valid_telegram_html(message)
    assert "It is 5 &lt; 6 &amp; true [1][2]." in message
    assert "[1] Doc &lt;1&gt; &amp; co — raw/doc-1.md:3-9" in message
    assert (
        '[2] <a href="https://a.example/?q=1&amp;r=2">Doc &lt;2&gt; &amp; co</a> — raw/doc-2.md:3-9'
        in message
    )


def test_a_long_reply_is_split_at_paragraphs_and_never_inside_a_citation():
    paragraphs = "\n\n".join(f"Paragraph {n} " + "word & <tag> " * 60 for n in range(20))
    reply = Reply(paragraphs, "local", [cite(n, f"https://s{n}.example/") for n in range(1, 30)])
    messages = reply_messages(reply)
    assert len(messages) > 1
    for m in messages:
        assert_valid_telegram_html(m)
    joined = html.unescape(re.sub(r"<[^>]+>", "", "\n\n".join(messages)))
    for n in range(20):
        assert f"Paragraph {n} " in joined
    for n in range(1, 30):
        assert sum(f"[{n}] Doc <{n}> & co — raw/doc-{n}.md:3-9" in html.unescape(re.sub(r"<[^>]+>", "", m))
                   for m in messages) == 1  # fmt: skip


def test_a_single_huge_paragraph_is_cut_as_text():
    messages = split_blocks(["x" * 10_000])
    assert len(messages) == 3 and all(visible_length(m) <= MAX_TEXT for m in messages)


def test_web_summary_lines_link_their_source():
    reply = Reply("Michelangelo painted it. [web-1] [source: https://art.example/s?a=1&b=2]", "web",
                  candidates=[Candidate("web-1", "T", "https://art.example/s", "s")], said=(Said("web-found"),))  # fmt: skip
    [message] = reply_messages(reply)
    assert_valid_telegram_html(message)
    assert '[web-1] <a href="https://art.example/s?a=1&amp;b=2">art.example</a>' in message


def test_candidate_buttons_fit_telegram_and_parse_back():
    record = SearchRecord("0123abcd", "42", "q", ["q"], "2026-11-29T00:00:00+00:00",
                          [Candidate(f"web-{n}", "A very long title " * 10, f"https://site{n}.example/x", "s")
                           for n in range(1, 6)])  # fmt: skip
    buttons = candidate_buttons(record)
    assert [b.data for b in buttons] == [f"imp:0123abcd:{n}" for n in range(1, 6)]
    assert all(len(b.data.encode()) <= 64 and len(b.text) <= 60 for b in buttons)
    assert buttons[1].text.startswith("web-2 · site2.example — A very long")
    assert parse_callback("imp:0123abcd:2") == ("0123abcd", "web-2")


@pytest.mark.parametrize(
    "data", [None, "", "imp:0123abcd:9", "imp:0123abcd:2:extra", "imp:../../etc:1", "imp:https://evil:1",
             "x" * 64, "del:0123abcd:1", "imp:0123ABCD:1", "imp:0123abcd:0", "é" * 40],
)  # fmt: skip
def test_forged_callback_data_does_not_parse(data):
    assert parse_callback(data) is None


def message_update(user_id, chat_id, chat_type="private", **kw):
    user = User(user_id, "U", False)
    chat = Chat(chat_id, chat_type)
    message = Message(1, datetime(2026, 11, 29, tzinfo=UTC), chat, from_user=user, text="hi", **kw)
    return Update(1, message=message)


@pytest.mark.parametrize(
    ("update", "why"),
    [
        (message_update(OWNER, OWNER), None),
        (message_update(7, 7), "user not allowed"),
        (message_update(OWNER, -100123, "supergroup"), "not a private chat"),
        (message_update(OWNER, -5, "group"), "not a private chat"),
        (message_update(OWNER, OWNER, via_bot=User(9, "B", True)), "sent through another bot"),
        (message_update(OWNER, OWNER, forward_origin=MessageOriginUser(datetime(2026, 1, 1, tzinfo=UTC),
                                                                       User(9, "B", True))), "forwarded from a bot"),
        (message_update(OWNER, OWNER, forward_origin=MessageOriginUser(datetime(2026, 1, 1, tzinfo=UTC),
                                                                       User(8, "Friend", False))), None),
        (Update(2, channel_post=Message(1, datetime(2026, 11, 29, tzinfo=UTC), Chat(-1001, "channel"), text="x")),
         "channel_post updates are not served"),
        (Update(3, business_message=message_update(OWNER, 555).message), "business_message updates are not served"),
        (Update(4, edited_message=message_update(OWNER, OWNER).message), None),
        (message_update(OWNER, 555), "not the owner's own chat with the bot"),
    ],
)  # fmt: skip
def test_only_the_owner_in_a_private_chat_is_served(update, why):
    assert refusal(update, {OWNER}) == why
