"""The Telegram Bot API stand-in speaks python-telegram-bot's dialect: PTB itself is the client."""

from __future__ import annotations

import datetime as dtm
import json
import time
from pathlib import Path

import aiohttp
import pytest
from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    MessageEntity,
    ReplyParameters,
)
from telegram.error import BadRequest, EndPointNotFound, InvalidToken, NetworkError, RetryAfter
from telegram.ext import (
    AIORateLimiter,
    ExtBot,
)

from tests.fake_telegram import (
    OWNER,
    TOKEN,
    FakeTelegram,
    HtmlParseError,
    parse_html,
    start_fake_telegram,
)


def keyboard(*pairs: tuple[str, str]) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[InlineKeyboardButton(text, callback_data=data)] for text, data in pairs])


# ---- identity and wire format --------------------------------------------------------------


async def test_get_me_is_an_empty_post_and_returns_the_bot(tg: FakeTelegram, bot: Bot):
    me = await bot.get_me()
    assert (me.id, me.is_bot, me.username, me.first_name) == (123456, True, "kb_test_bot", "kb")
    call = tg.calls("getMe")[0]
    assert (call.http_method, call.content_type, call.raw, call.status) == ("POST", None, {}, 200)
    assert call.response == {"ok": True, "result": tg.bot_user}


async def test_html_message_with_keyboard_round_trips(tg: FakeTelegram, bot: Bot):
    tg.push_message(OWNER, OWNER, "hello")  # the user writes first: message 1 of the chat
    text = '<b>Answer</b> &amp; <a href="https://example.org/a?x=1&amp;y=2">source</a> 😀 <i>end</i>'
    sent = await bot.send_message(
        OWNER,
        text,
        parse_mode="HTML",
        reply_markup=keyboard(("web-1 · example.org", "imp:s1:1"), ("web-2", "imp:s1:2")),
        link_preview_options=LinkPreviewOptions(is_disabled=True),
    )
    assert sent.message_id == 2 and sent.chat.id == OWNER and sent.from_user.id == 123456
    assert sent.text == "Answer & source 😀 end"
    assert sent.parse_entities() == {
        MessageEntity(MessageEntity.BOLD, 0, 6): "Answer",
        MessageEntity(MessageEntity.TEXT_LINK, 9, 6, url="https://example.org/a?x=1&y=2"): "source",
        MessageEntity(MessageEntity.ITALIC, 19, 3): "end",  # the emoji counts 2 UTF-16 units
    }
    assert sent.reply_markup == keyboard(("web-1 · example.org", "imp:s1:1"), ("web-2", "imp:s1:2"))

    call = tg.calls("sendMessage")[0]
    assert call.content_type == "application/x-www-form-urlencoded"
    assert isinstance(call.raw["reply_markup"], str) and call.raw["chat_id"] == "42"
    assert call.params["chat_id"] == OWNER and call.params["link_preview_options"] == {"is_disabled": True}
    assert call.params["reply_markup"]["inline_keyboard"][1][0] == {
        "text": "web-2",
        "callback_data": "imp:s1:2",
    }

    stored = tg.last_message(OWNER)
    assert stored.sent_text == text and stored.parse_mode == "HTML" and stored.link_preview_disabled
    assert stored.reply_markup == call.params["reply_markup"]
    assert [b["callback_data"] for b in stored.buttons] == ["imp:s1:1", "imp:s1:2"]
    assert stored.links == [("source", "https://example.org/a?x=1&y=2")]
    assert tg.sent_messages(OWNER) == ["Answer & source 😀 end"]
    assert [m.message_id for m in tg.messages(OWNER)] == [1, 2]


async def test_json_bodies_and_get_queries_are_accepted(tg: FakeTelegram):
    tg.add_chat(7)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{tg.base_url}{TOKEN}/getMe") as r:
            assert r.status == 200 and (await r.json())["result"]["username"] == "kb_test_bot"
        markup = {"inline_keyboard": [[{"text": "One", "callback_data": "btn:1"}]]}
        async with http.post(
            f"{tg.base_url}{TOKEN}/sendMessage",
            json={"chat_id": 7, "text": "<b>json</b>", "parse_mode": "HTML", "reply_markup": markup},
        ) as r:
            body = await r.json()
            assert (
                r.status == 200
                and body["result"]["text"] == "json"
                and body["result"]["reply_markup"] == markup
            )
        async with http.get(
            f"{tg.base_url}{TOKEN}/sendMessage", params={"chat_id": "7", "text": "query"}
        ) as r:
            assert (await r.json())["result"]["message_id"] == 2
        async with http.post(f"{tg.base_url}{TOKEN}/noSuchMethod") as r:
            assert r.status == 404 and await r.json() == {
                "ok": False,
                "error_code": 404,
                "description": "Not Found",
            }
        async with http.post(f"{tg.base_url}not-a-token/getMe") as r:
            assert r.status == 404
        async with http.post(f"{tg.base_url}999:wrong/getMe") as r:
            assert r.status == 401 and await r.json() == {
                "ok": False,
                "error_code": 401,
                "description": "Unauthorized",
            }
    assert tg.sent_messages(7) == ["json", "query"]
    assert tg.calls("sendMessage")[0].params["reply_markup"] == markup


async def test_wrong_token_is_invalid_token_and_unknown_method_is_endpoint_not_found(
    tg: FakeTelegram, bot: Bot
):
    stranger = Bot("999:wrong-token", base_url=tg.base_url, base_file_url=tg.base_file_url)
    try:
        with pytest.raises(InvalidToken, match="Unauthorized"):
            await stranger.get_me()
        with pytest.raises(InvalidToken):
            await stranger.initialize()
    finally:
        await stranger.shutdown()
    assert [c.status for c in tg.calls("getMe")] == [200, 401, 401]  # the fixture's bot, then the stranger
    with pytest.raises(EndPointNotFound):
        await bot.do_api_request("noSuchMethod")


# ---- Telegram's 400s as PTB surfaces them --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a<br>b", 'Unsupported start tag "br" at byte offset 1'),
        ("é<p>x</p>", 'Unsupported start tag "p" at byte offset 2'),  # bytes, not characters
        ("a < b", 'Unsupported start tag "" at byte offset 2'),
        ("Q&A", 'Unescaped "&" at byte offset 1; write it as "&amp;"'),
        ('<a href="https://e.org/?a=1&b=2">x</a>', 'Unescaped "&" at byte offset 27; write it as "&amp;"'),
        ("<b>open", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ("<b", "Unclosed start tag at byte offset 0"),
        ("<span>x</span>", 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
    ],
)
def test_html_parse_errors_name_the_byte_offset(text: str, reason: str):
    with pytest.raises(HtmlParseError) as info:
        parse_html(text)
    assert str(info.value) == reason


def test_html_the_bot_api_allows_parses_to_entities():
    plain, entities = parse_html(
        '<pre><code class="language-python">x = 1</code></pre> <blockquote expandable>q</blockquote> '
        '<tg-spoiler>s</tg-spoiler> <span class="tg-spoiler">t</span> <S>u</S> &#128512;&#x41;&quot;&lt;&gt; 1 > 0'
    )
    assert plain == 'x = 1 q s t u 😀A"<> 1 > 0'
    assert [e["type"] for e in entities] == [
        "pre",
        "expandable_blockquote",
        "spoiler",
        "spoiler",
        "strikethrough",
    ]
    assert entities[0]["language"] == "python"
    assert parse_html("AT&T", strict_ampersand=False) == ("AT&T", [])


async def test_the_length_limit_counts_utf16_code_units_unless_told_code_points(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    assert (await bot.send_message(OWNER, "😀" * 2048)).text == "😀" * 2048  # 4,096 units
    with pytest.raises(BadRequest, match="too long"):
        await bot.send_message(OWNER, "😀" * 2049)
    with pytest.raises(BadRequest, match="too long"):
        await bot.send_message_draft(OWNER, 1, "𝐱" * 2049)  # math letters are beyond U+FFFF too
    tg.length_in_utf16 = False
    assert (await bot.send_message(OWNER, "😀" * 4096)).text == "😀" * 4096


async def test_bad_requests_surface_as_ptb_bad_request(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)

    async def refused(coro) -> str:
        with pytest.raises(BadRequest) as info:
            await coro
        return info.value.message

    # PTB strips "Bad Request: " and str.capitalize()s the rest, lowercasing all but the first letter.
    assert await refused(bot.send_message(OWNER, "x" * 4097)) == "Message is too long"
    assert await refused(bot.send_message(OWNER, "<b>x</b>" + "&amp;" * 4096, parse_mode="HTML")) == (
        "Message is too long"
    )
    assert await refused(bot.send_message(OWNER, "a<br>b", parse_mode="HTML")) == (
        'Can\'t parse entities: unsupported start tag "br" at byte offset 1'
    )
    assert (await refused(bot.send_message(OWNER, "Q&A", parse_mode="HTML"))).startswith(
        "Can't parse entities"
    )
    assert (await refused(bot.send_message(OWNER, "<i>x", parse_mode="HTML"))).startswith(
        "Can't parse entities"
    )
    assert await refused(bot.send_message(OWNER, "  <b> </b> ", parse_mode="HTML")) == "Message text is empty"
    assert await refused(bot.send_message(OWNER, "pick", reply_markup=keyboard(("é", "é" * 33)))) == (
        "Button_data_invalid"
    )
    assert await refused(bot.send_message(-100, "nobody")) == "Chat not found"
    assert [c.status for c in tg.calls("sendMessage")] == [400] * 8
    assert tg.sent_messages(OWNER) == []

    # Text of exactly 4,096 characters after decoding, and 64 bytes of callback data, pass.
    ok = await bot.send_message(
        OWNER, "&amp;" * 4096, parse_mode="HTML", reply_markup=keyboard(("é", "é" * 32))
    )
    assert len(ok.text) == 4096

    same = keyboard(("é", "é" * 32))
    assert await refused(bot.edit_message_text("&" * 4096, OWNER, ok.message_id, reply_markup=same)) == (
        "Message is not modified: specified new message content and reply markup are exactly the same as a "
        "current content and reply markup of the message"
    )
    # Without reply_markup an edit removes the keyboard, so the same text is a modification.
    edited = await bot.edit_message_text("&" * 4096, OWNER, ok.message_id)
    assert edited.reply_markup is None and tg.last_message(OWNER).reply_markup is None
    assert await refused(bot.edit_message_reply_markup(OWNER, ok.message_id)) == (
        "Message is not modified: specified new message content and reply markup are exactly the same as a "
        "current content and reply markup of the message"
    )
    assert await refused(bot.edit_message_text("new", OWNER, 999)) == "Message to edit not found"
    assert await refused(bot.edit_message_reply_markup(OWNER, 999, reply_markup=keyboard(("a", "b")))) == (
        "Message to edit not found"
    )
    assert await refused(
        bot.edit_message_reply_markup(OWNER, ok.message_id, reply_markup=keyboard(("a", "x" * 65)))
    ) == ("Button_data_invalid")
    assert await refused(bot.answer_callback_query("no-such-query")) == (
        "Query is too old and response timeout expired or query id is invalid"
    )

    qid = tg.push_callback(OWNER, OWNER, ok.message_id, "imp:s1:1")
    assert await bot.answer_callback_query(qid, text="importing…") is True
    assert await refused(bot.answer_callback_query(qid)) == (
        "Query is too old and response timeout expired or query id is invalid"
    )
    assert tg.callback_answer(qid) == {
        "text": "importing…",
        "show_alert": False,
        "url": None,
        "cache_time": None,
    }

    tg.push_message(OWNER, OWNER, "mine")
    mine = tg.last_message(OWNER, from_bot=False)
    assert mine.text == "mine" and await refused(bot.edit_message_text("x", OWNER, mine.message_id)) == (
        "Message can't be edited"
    )
    assert await bot.delete_message(OWNER, ok.message_id) is True
    assert await refused(bot.delete_message(OWNER, ok.message_id)) == "Message to delete not found"


async def test_edits_keep_history_and_the_not_modified_rule_compares_entities(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    sent = await bot.send_message(OWNER, "downloading…", reply_markup=keyboard(("web-1", "imp:s:1")))
    await bot.edit_message_text("<b>downloading…</b>", OWNER, sent.message_id, parse_mode="HTML")
    await bot.edit_message_text("indexed, 3 chunks", OWNER, sent.message_id)
    stored = tg.message(OWNER, sent.message_id)
    assert stored.history == ["downloading…", "downloading…"] and stored.text == "indexed, 3 chunks"
    assert stored.edit_date is not None and tg.sent_messages(OWNER) == ["indexed, 3 chunks"]


async def test_too_many_requests_is_retry_after(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    tg.fail_next("sendMessage", retry_after=3)
    with pytest.raises(RetryAfter) as info:
        await bot.send_message(OWNER, "hi")
    assert info.value.retry_after in (3, dtm.timedelta(seconds=3))
    first = tg.calls("sendMessage")[0]
    assert first.status == 429 and first.response == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 3",
        "parameters": {"retry_after": 3},
    }
    assert (await bot.send_message(OWNER, "hi")).text == "hi"  # armed once only

    tg.fail_next("sendMessage", status=502, description="Bad Gateway")
    with pytest.raises(NetworkError):
        await bot.send_message(OWNER, "again")


async def test_aio_rate_limiter_retries_after_the_429(tg: FakeTelegram):
    tg.add_chat(OWNER)
    tg.fail_next("sendMessage", retry_after=1)
    limited = ExtBot(
        TOKEN,
        base_url=tg.base_url,
        base_file_url=tg.base_file_url,
        rate_limiter=AIORateLimiter(max_retries=1),
    )
    async with limited:
        started = time.monotonic()
        sent = await limited.send_message(OWNER, "after the pause")
        waited = time.monotonic() - started
    assert sent.text == "after the pause" and waited >= 1.0
    assert [c.status for c in tg.calls("sendMessage")] == [429, 200]


# ---- files and commands -------------------------------------------------------------------


async def test_get_file_and_download_return_the_pushed_bytes(tg: FakeTelegram, bot: Bot, tmp_path: Path):
    data = b"%PDF-1.4 fake pdf bytes\n"
    tg.push_document(OWNER, OWNER, "notes.pdf", data, "application/pdf", caption="for the kb")
    (update,) = await bot.get_updates()
    document = update.message.document
    assert (document.file_name, document.mime_type, document.file_size) == (
        "notes.pdf",
        "application/pdf",
        len(data),
    )
    assert update.message.caption == "for the kb"
    file = await bot.get_file(document.file_id)
    assert file.file_size == len(data) and file.file_path.startswith(tg.base_file_url + TOKEN + "/documents/")
    path = await file.download_to_drive(tmp_path / "notes.pdf")
    assert path.read_bytes() == data and tg.downloads == ["documents/file_1.pdf"]

    tg.push_document(OWNER, OWNER, "big.pdf", b"x", "application/pdf", file_size=20 * 1024 * 1024 + 1)
    (big,) = await bot.get_updates(offset=update.update_id + 1)
    with pytest.raises(BadRequest, match="File is too big"):
        await bot.get_file(big.message.document.file_id)
    with pytest.raises(BadRequest, match="Invalid file_id"):
        await bot.get_file("nope")


async def test_set_my_commands_is_stored(tg: FakeTelegram, bot: Bot):
    commands = [("start", "what kb is"), ("search", "search the web"), ("status", "documents and health")]
    assert await bot.set_my_commands(commands) is True
    assert tg.my_commands() == [{"command": c, "description": d} for c, d in commands]
    assert json.loads(tg.calls("setMyCommands")[0].raw["commands"])[1] == {
        "command": "search",
        "description": "search the web",
    }
    assert [(c.command, c.description) for c in await bot.get_my_commands()] == commands
    with pytest.raises(BadRequest, match="Bot_command_invalid"):
        await bot.set_my_commands([("Start", "capital letters are not allowed")])


# ---- the test-side API's guards ---------------------------------------------------------------


async def test_updates_for_groups_forwards_and_bots_look_like_telegrams(tg: FakeTelegram, bot: Bot):
    with pytest.raises(ValueError):
        tg.push_message(5, 5, "hi", chat_type="group")  # group ids are negative
    with pytest.raises(ValueError):
        tg.push_message(5, 6, "hi")  # a private chat's id is its user's
    tg.push_message(-1001234, 7, "/start@kb_test_bot", chat_type="supergroup")
    tg.push_message(OWNER, OWNER, "see https://example.org", forward_from_bot=True)
    tg.push_message(OWNER, OWNER, "inline", via_bot=True)
    group, forwarded, inline = await bot.get_updates()
    assert group.effective_chat.type == "supergroup" and group.effective_chat.id == -1001234
    assert group.message.entities[0].length == len("/start@kb_test_bot")
    assert forwarded.message.forward_origin.sender_user.is_bot
    assert forwarded.message.parse_entities([MessageEntity.URL]) == {
        MessageEntity(MessageEntity.URL, 4, 19): "https://example.org"
    }
    assert inline.message.via_bot.is_bot
    with pytest.raises(KeyError):
        tg.push_callback(OWNER, OWNER, 99, "imp:x:1")


# ---- drafts (sendMessageDraft) ----------------------------------------------------------------


async def test_drafts_are_kept_and_animated_by_draft_id(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    assert await bot.send_message_draft(OWNER, 7) is True  # no text: the "Thinking..." placeholder
    assert await bot.send_message_draft(OWNER, 7, "") is True
    assert await bot.send_message_draft(OWNER, 7, "<b>Half</b> an answer", parse_mode="HTML") is True
    await bot.send_message_draft(OWNER, 8, "  next segment ", message_thread_id=3)
    drafts = tg.drafts(OWNER)
    assert [(d.draft_id, d.text, d.sent_text) for d in drafts] == [
        (7, "", None),
        (7, "", ""),
        (7, "Half an answer", "<b>Half</b> an answer"),
        (8, "next segment", "  next segment "),
    ]
    assert drafts[2].parse_mode == "HTML" and drafts[2].entities == [
        {"type": "bold", "offset": 0, "length": 4}
    ]
    assert drafts[3].message_thread_id == 3 and tg.live_draft(OWNER) is drafts[3]
    assert tg.calls("sendMessageDraft")[0].params == {"chat_id": OWNER, "draft_id": 7}
    assert [d.time for d in drafts] == sorted(d.time for d in drafts) and tg.sent_messages(OWNER) == []


@pytest.mark.filterwarnings("ignore:Please use .Bot.sendMessageDraft.:telegram.warnings.PTBUserWarning")
async def test_drafts_telegram_refuses(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    tg.add_chat(-1001234, chat_type="supergroup")
    for refused, message in [
        (bot.send_message_draft(OWNER, 0, "x"), "Draft_id must be non-zero"),
        (
            bot.do_api_request("sendMessageDraft", {"chat_id": OWNER, "text": "x"}),
            "Draft_id must be non-zero",
        ),
        (bot.send_message_draft(-1001234, 1, "x"), "Textdraft_peer_invalid"),
        (bot.send_message_draft(99, 1, "x"), "Chat not found"),
        (bot.send_message_draft(OWNER, 1, "x" * 4097), "Message is too long"),
        (bot.send_message_draft(OWNER, 1, "a<br>b", parse_mode="HTML"), "Can't parse entities"),
    ]:
        with pytest.raises(BadRequest, match=message):
            await refused
    assert await bot.send_message_draft(OWNER, -1, "&amp;" * 4096, parse_mode="HTML") is True
    assert [d.text for d in tg.drafts()] == ["&" * 4096]


async def test_live_draft_goes_with_a_message_or_after_30_seconds(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    tg.add_chat(7)
    await bot.send_message_draft(OWNER, 1, "streaming…")
    await bot.send_message_draft(7, 1, "elsewhere")
    await bot.send_message(OWNER, "the whole answer")
    assert tg.live_draft(OWNER) is None and tg.live_draft(7).text == "elsewhere"  # only its own chat

    now = time.monotonic()
    tg.clock = lambda: now
    await bot.send_message_draft(OWNER, 2, "again")
    tg.clock = lambda: now + 29.9
    assert tg.live_draft(OWNER).text == "again"
    await bot.send_message_draft(OWNER, 2, "again, longer")  # an update restarts the 30 s
    tg.clock = lambda: now + 59.8
    assert tg.live_draft(OWNER).text == "again, longer"
    tg.clock = lambda: now + 59.9
    assert tg.live_draft(OWNER) is None and len(tg.drafts(OWNER)) == 3  # the record stays


async def test_drafts_refused_makes_every_draft_fail():
    fake, runner, base_url = await start_fake_telegram(TOKEN, drafts_refused=True)
    try:
        fake.add_chat(OWNER)
        async with Bot(TOKEN, base_url=base_url) as b:
            with pytest.raises(BadRequest, match="Textdraft_peer_invalid"):
                await b.send_message_draft(OWNER, 1, "x")
            fake.drafts_refused = False
            assert await b.send_message_draft(OWNER, 1, "x") is True
    finally:
        await runner.cleanup()
    assert [c.status for c in fake.calls("sendMessageDraft")] == [400, 200] and len(fake.drafts()) == 1


async def test_too_many_drafts_is_retry_after(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    tg.fail_next("sendMessageDraft", retry_after=2)
    with pytest.raises(RetryAfter) as info:
        await bot.send_message_draft(OWNER, 1, "x")
    assert info.value.retry_after in (2, dtm.timedelta(seconds=2)) and tg.drafts() == []
    assert await bot.send_message_draft(OWNER, 1, "x") is True


# ---- replies ------------------------------------------------------------------------------------


async def test_a_reply_with_a_quote_carries_a_text_quote(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    answer = await bot.send_message(OWNER, "😀 <b>First</b> point. <i>Second point.</i>", parse_mode="HTML")
    tg.push_reply(OWNER, OWNER, "what about this?", reply_to=answer.message_id, quote="Second point")
    tg.push_reply(OWNER, OWNER, "and this?", reply_to=answer.message_id, quote="not in it")
    quoted, lost = (u.message for u in await bot.get_updates())
    assert quoted.quote.text == "Second point" and quoted.quote.is_manual
    assert quoted.quote.position == 16  # UTF-16: the emoji counts 2
    assert quoted.quote.entities == (MessageEntity(MessageEntity.ITALIC, 0, 12),)
    assert quoted.reply_to_message.message_id == answer.message_id
    assert (lost.quote.text, lost.quote.position) == ("not in it", 0)


async def test_a_reply_to_the_bot_names_the_bot_and_nests_no_further_reply(tg: FakeTelegram, bot: Bot):
    tg.push_message(OWNER, OWNER, "question")
    answer = await bot.send_message(OWNER, "answer", reply_to_message_id=1)
    assert tg.message(OWNER, answer.message_id).reply_to_id == 1
    tg.push_reply(OWNER, OWNER, "/more", reply_to=answer.message_id)
    *_, update = await bot.get_updates()
    replied = update.message.reply_to_message
    assert replied.from_user.is_bot and replied.from_user.username == "kb_test_bot"
    assert replied.text == "answer" and replied.reply_to_message is None  # not nested, as on Telegram
    assert update.message.entities == (MessageEntity(MessageEntity.BOT_COMMAND, 0, 5),)
    assert tg.last_message(OWNER, from_bot=False).reply_to_id == answer.message_id


async def test_a_reply_to_a_message_the_stand_in_never_saw(tg: FakeTelegram, bot: Bot):
    tg.add_chat(OWNER)
    with pytest.raises(KeyError):
        tg.push_reply(OWNER, OWNER, "what?", reply_to=50)
    tg.push_reply(OWNER, OWNER, "what?", reply_to=50, reply_to_text="an old text", quote="old")
    tg.push_reply(OWNER, OWNER, "and?", reply_to=40, reply_to_text="an old answer", reply_to_from_bot=True)
    first, second = (u.message for u in await bot.get_updates())
    assert first.reply_to_message.text == "an old text" and not first.reply_to_message.from_user.is_bot
    assert first.reply_to_message.message_id == 50 and first.message_id > 50  # ids stay unique
    assert (first.quote.text, first.quote.position) == ("old", 3)
    assert second.reply_to_message.from_user.is_bot and second.reply_to_message.text == "an old answer"


async def test_send_message_with_reply_parameters_keeps_the_replied_message(tg: FakeTelegram, bot: Bot):
    tg.push_message(OWNER, OWNER, "question")
    tg.push_reply(OWNER, OWNER, "follow-up", reply_to=1)
    sent = await bot.send_message(OWNER, "answer", reply_parameters=ReplyParameters(message_id=2))
    assert sent.reply_to_message.text == "follow-up" and sent.reply_to_message.reply_to_message is None
    stored = tg.last_message(OWNER)
    assert stored.reply_to_id == 2 and stored.extra["reply_to_message"]["text"] == "follow-up"
    assert tg.calls("sendMessage")[0].params["reply_parameters"] == {"message_id": 2}
    plain = await bot.send_message(OWNER, "no reply")
    assert plain.reply_to_message is None and tg.last_message(OWNER).reply_to_id is None
    with pytest.raises(BadRequest, match="Message to be replied not found"):
        await bot.send_message(OWNER, "x", reply_parameters=ReplyParameters(message_id=99))
    kept = await bot.send_message(
        OWNER, "x", reply_parameters=ReplyParameters(message_id=99, allow_sending_without_reply=True)
    )
    assert kept.reply_to_message is None
