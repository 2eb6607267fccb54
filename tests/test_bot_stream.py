"""The stream's pacing and renewal against the Bot API stand-in, with a clock the test moves."""

import asyncio

from telegram import Bot
from telegram.request import HTTPXRequest

from bot.stream import ChatStream
from tests.bot_env import OWNER, TOKEN
from tests.fake_telegram import start_fake_telegram


async def test_a_draft_is_renewed_while_nothing_new_comes_and_a_long_answer_continues_in_a_new_message():
    telegram, runner, url = await start_fake_telegram(TOKEN)
    telegram.push_message(OWNER, OWNER, "hello")  # the chat exists
    bot = Bot(TOKEN, base_url=url, request=HTTPXRequest())
    async with bot:
        stream = ChatStream(bot, OWNER, reply_to=None, renew_s=0.3, draft_every_s=0.05)
        await stream.reading(3, 0, 100)
        await asyncio.sleep(1.0)  # the model is still reading: the draft is sent again before it expires
        readings = [d for d in telegram.drafts(OWNER) if d.text == "Reading 3 passages…"]
        assert len(readings) >= 3
        await stream.text("word " * 1000)  # 5,000 characters: more than one message holds
        await asyncio.sleep(0.5)
        done = await stream.close()
    await runner.cleanup()
    assert len(done.message_ids) == 1  # the first page became a message of its own
    page = telegram.message(OWNER, done.message_ids[0]).text
    assert 1900 < len(page) <= 3800 and page.endswith("word")
    assert telegram.drafts(OWNER)[-1].text.startswith("word") and len(telegram.drafts(OWNER)[-1].text) < 3900


async def test_a_page_in_flight_when_the_answer_ends_is_known_to_the_final_reply():
    telegram, runner, url = await start_fake_telegram(TOKEN)
    telegram.push_message(OWNER, OWNER, "hello")  # the chat exists
    answered = telegram.hold("sendMessage")  # the page is sent, its answer is late
    bot = Bot(TOKEN, base_url=url, request=HTTPXRequest())
    async with bot:
        stream = ChatStream(bot, OWNER, reply_to=None, draft_every_s=0.05)
        await stream.text("word " * 1000)  # more than one message holds: the first page goes out
        await telegram.wait_until(lambda: telegram.bot_messages(OWNER))  # on the phone, unanswered
        closing = asyncio.ensure_future(stream.close())  # the answer is done meanwhile
        await asyncio.sleep(0)
        answered.set()
        done = await closing
    await runner.cleanup()
    page = telegram.bot_messages(OWNER)
    assert len(page) == 1 and done.message_ids == [
        page[0].message_id
    ]  # the reply will edit it, not repeat it
