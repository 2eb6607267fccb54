"""Telegram's flood waits against the Bot API stand-in, through the bot as build_application configures
it: a 429 holds the chat it came for, never the whole bot; a draft is dropped, a message retried."""

import asyncio

import pytest
from telegram.error import RetryAfter

from bot.app import build_application
from bot.stream import ChatStream
from tests.bot_env import OWNER, TOKEN
from tests.fake_telegram import start_fake_telegram

OTHER = 43  # a second allowed user, in a chat of their own
SAFETY_S = 10.0  # a net only: the other chat is answered at once, the flood wait is 40 s


async def configured_bot():
    telegram, runner, url = await start_fake_telegram(TOKEN)
    for chat in (OWNER, OTHER):
        telegram.push_message(chat, chat, "hello")  # the chats exist
    app = build_application(None, token=TOKEN, base_url=url, base_file_url=telegram.base_file_url)
    return telegram, runner, app.bot


async def test_a_flood_wait_on_one_chats_draft_stops_neither_other_chats_nor_callback_answers():
    telegram, runner, bot = await configured_bot()
    async with bot:
        button = await bot.send_message(
            OTHER, "pick", reply_markup={"inline_keyboard": [[{"text": "x", "callback_data": "x"}]]}
        )
        telegram.fail_next("sendMessageDraft", retry_after=40)
        stream = ChatStream(bot, OWNER, reply_to=None)
        await stream.text("The ferry leaves at nine")
        refused = await telegram.wait_for(lambda c: c.method == "sendMessageDraft" and c.status == 429)
        # the other chat, a callback answer, a command's reply: none waits for the owner's chat
        await asyncio.wait_for(bot.send_message(OTHER, "Help for the other chat"), SAFETY_S)
        tap = telegram.push_callback(OTHER, OTHER, button.message_id, "x")
        assert await asyncio.wait_for(bot.answer_callback_query(tap, text="done"), SAFETY_S)
        await asyncio.wait_for(bot.send_chat_action(OTHER, "typing"), SAFETY_S)
        with pytest.raises(RetryAfter):  # "typing…" in the waiting chat is dropped at once, not sent
            await asyncio.wait_for(bot.send_chat_action(OWNER, "typing"), SAFETY_S)
        streamed = await stream.close()
    await runner.cleanup()
    assert telegram.callback_answer(tap)["text"] == "done"
    assert telegram.last_message(OTHER).text == "Help for the other chat"
    drafts = telegram.calls("sendMessageDraft")
    assert drafts == [refused]  # a draft is droppable: never retried for the flood wait
    assert streamed.message_ids == []
    assert [c.params["chat_id"] for c in telegram.calls("sendChatAction")] == [OTHER]


async def test_a_message_refused_for_a_flood_wait_is_sent_after_it_and_only_its_chat_waits():
    telegram, runner, bot = await configured_bot()
    async with bot:
        telegram.fail_next("sendMessage", retry_after=1)
        held = asyncio.create_task(bot.send_message(OWNER, "The final answer"))
        first = await telegram.wait_for(lambda c: c.method == "sendMessage" and c.status == 429)
        other = await asyncio.wait_for(bot.send_message(OTHER, "Meanwhile"), SAFETY_S)
        sent = await asyncio.wait_for(held, SAFETY_S)  # retried once the wait is over
        typing = bot.send_chat_action(OWNER, "typing")  # sent after the wait: goes at once
        assert await asyncio.wait_for(typing, SAFETY_S)
    await runner.cleanup()
    assert telegram.message(OWNER, sent.message_id).text == "The final answer"
    calls = telegram.calls("sendMessage")
    retried = next(c for c in calls if c.ok and c.params["chat_id"] == OWNER and c.index > first.index)
    meanwhile = next(
        c
        for c in calls
        if c.ok and c.result["message_id"] == other.message_id and c.params["chat_id"] == OTHER
    )
    assert first.index < meanwhile.index < retried.index  # the other chat did not wait for the owner's
