"""The Bot API stand-in's long polling as python-telegram-bot drives it: getUpdates held, woken,
timed out, conflicting and cut short."""

from __future__ import annotations

import asyncio

import pytest
from telegram import (
    Bot,
    MessageEntity,
)
from telegram.error import Conflict
from telegram.ext import (
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    MessageHandler,
    filters,
)

from tests.fake_telegram import (
    CLIENT_GONE,
    OWNER,
    TOKEN,
    FakeTelegram,
    threaded_fake_telegram,
)
from tests.test_fake_telegram import keyboard

# ---- long polling -------------------------------------------------------------------------


async def test_long_poll_holds_until_an_update_arrives_and_confirms_by_offset(tg: FakeTelegram, bot: Bot):
    now, read = [0.0], []

    def poll_clock() -> float:  # the poll's timeout runs on this clock, moved by the test
        read.append(now[0])
        return now[0]

    tg.poll_clock = poll_clock
    held = asyncio.create_task(bot.get_updates(timeout=30))
    await tg.wait_until(lambda: any(c.status is None for c in tg.calls("getUpdates")))
    now[0] = 29.9
    await tg.wait_until(lambda: read.count(29.9) >= 2)  # it looked at the time again and kept holding
    assert tg.calls("getUpdates")[-1].status is None and not held.done()
    now[0] = 30.0
    assert await held == ()  # held for the whole timeout, then answered empty

    poll = asyncio.create_task(bot.get_updates(timeout=5))
    await tg.wait_until(lambda: tg.calls("getUpdates")[-1].status is None)
    first = tg.push_message(OWNER, OWNER, "/start")
    updates = await poll  # the poll's clock stands still: only the update can end it
    assert [u.update_id for u in updates] == [first] and updates[0].message.text == "/start"
    assert updates[0].message.entities == (MessageEntity(MessageEntity.BOT_COMMAND, 0, 6),)

    second = tg.push_message(OWNER, OWNER, "again")
    assert [u.update_id for u in await bot.get_updates(offset=first)] == [first, second]  # not confirmed
    assert [u.update_id for u in await bot.get_updates(offset=first + 1)] == [second]
    assert [u["update_id"] for u in tg.pending_updates()] == [second]
    assert await bot.get_updates(offset=second + 1) == () and tg.pending_updates() == []
    third, fourth = tg.push_message(OWNER, OWNER, "3"), tg.push_message(OWNER, OWNER, "4")
    assert [u.update_id for u in await bot.get_updates(offset=-1)] == [fourth]  # forgets the earlier ones
    assert third < fourth and [u["update_id"] for u in tg.pending_updates()] == [fourth]


async def test_a_second_get_updates_ends_the_first_with_conflict(tg: FakeTelegram):
    other = Bot(TOKEN, base_url=tg.base_url)
    async with Bot(TOKEN, base_url=tg.base_url) as one, other:
        held = asyncio.create_task(one.get_updates(timeout=5))
        await tg.wait_until(lambda: any(c.status is None for c in tg.calls("getUpdates")))
        assert await other.get_updates(timeout=0) == ()
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await held
    assert [c.status for c in tg.calls("getUpdates")] == [409, 200]


async def test_a_stand_in_in_its_own_thread_is_woken_by_pushes_from_the_test_thread():
    with threaded_fake_telegram(TOKEN) as fake:
        fake.poll_clock = lambda: 0.0  # the poll's timeout never comes: only the push can end it
        async with Bot(TOKEN, base_url=fake.base_url) as b:
            poll = asyncio.create_task(b.get_updates(timeout=5))
            await fake.wait_until(lambda: any(c.status is None for c in fake.calls("getUpdates")))
            pushed = fake.push_message(OWNER, OWNER, "from another thread")
            (update,) = await poll
            assert update.update_id == pushed


async def test_allowed_updates_filter_and_are_remembered(tg: FakeTelegram, bot: Bot):
    tg.push_raw(
        {
            "edited_message": {
                "message_id": 1,
                "date": 1,
                "chat": {"id": OWNER, "type": "private"},
                "text": "e",
            }
        }
    )
    wanted = tg.push_message(OWNER, OWNER, "m")
    updates = await bot.get_updates(allowed_updates=["message", "callback_query"])
    assert [u.update_id for u in updates] == [wanted]
    assert tg.calls("getUpdates")[0].params["allowed_updates"] == ["message", "callback_query"]
    tg.push_raw(
        {"channel_post": {"message_id": 5, "date": 1, "chat": {"id": -1001, "type": "channel"}, "text": "c"}}
    )
    assert [u.update_id for u in await bot.get_updates(offset=wanted + 1)] == []  # the list was kept


async def test_polling_application_gets_message_then_callback_in_order(tg: FakeTelegram):
    seen: list[tuple] = []

    async def on_start(update, context):
        seen.append(("start", update.effective_user.id, update.message.text))
        await context.bot.send_chat_action(update.effective_chat.id, "typing")
        await update.message.reply_text(
            "<b>Pick</b> a source", parse_mode="HTML", reply_markup=keyboard(("web-1", "imp:s1:1"))
        )

    async def on_text(update, context):
        seen.append(("text", update.message.text))

    async def on_button(update, context):
        query = update.callback_query
        seen.append(("button", query.data, query.message.message_id, query.message.text))
        await query.answer()
        await query.edit_message_text("importing web-1…")

    app = ApplicationBuilder().token(TOKEN).base_url(tg.base_url).base_file_url(tg.base_file_url).build()
    app.add_handler(CommandHandler("start", on_start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, on_text))
    app.add_handler(CallbackQueryHandler(on_button))
    await app.initialize()
    await app.start()
    await app.updater.start_polling(poll_interval=0, timeout=1, allowed_updates=["message", "callback_query"])
    try:
        tg.push_message(OWNER, OWNER, "/start", username="owner")
        await tg.wait_for("sendMessage")
        pick = tg.last_message(OWNER)
        qid = tg.push_callback(OWNER, OWNER, pick.message_id, pick.buttons[0]["callback_data"])
        last = tg.push_message(OWNER, OWNER, "and a question")
        await tg.wait_until(lambda: len(seen) == 3)
        await tg.wait_for("editMessageText")
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()

    assert seen == [
        ("start", OWNER, "/start"),
        ("button", "imp:s1:1", pick.message_id, "Pick a source"),
        ("text", "and a question"),
    ]
    assert [c.method for c in tg.calls()][:2] == ["getMe", "deleteWebhook"]
    assert tg.calls("deleteWebhook")[0].raw == {}
    assert tg.callback_answer(qid) is not None
    assert tg.sent_messages(OWNER) == ["importing web-1…"] and tg.last_message(OWNER).reply_markup is None
    assert [a.action for a in tg.chat_actions(OWNER)] == ["typing"]
    polls = tg.calls("getUpdates")
    assert polls[0].params["offset"] == 0 and polls[-1].params == {
        "offset": last + 1,
        "timeout": 0,  # PTB's last call on stop confirms what it fetched
        "allowed_updates": ["message", "callback_query"],
    }
    assert [p.params["offset"] for p in polls] == sorted(p.params["offset"] for p in polls)
    assert tg.pending_updates() == []
    # The long poll PTB cancelled on stop is recorded as closed by the client, not as a conflict.
    await tg.wait_until(lambda: all(c.status is not None for c in tg.calls()))
    assert {c.status for c in tg.calls("getUpdates")} <= {200, CLIENT_GONE}
