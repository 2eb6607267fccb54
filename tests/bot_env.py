"""The bot under test: real HTTP to a local Bot API stand-in, the scripted model, web search
stand-in, the daemon on a real inbox, and a scripted transcriber standing in for Whisper."""

import contextlib
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC
from pathlib import Path

import pytest

from bot.main import create
from daemon.main import background
from knowledge.model.tokenizer import ApproxCounter
from tests.conftest import make_settings
from tests.fake_llm import FakeLLM, Step, start, web_step
from tests.fake_search import FakeSearch, Result, ddg_results, start_fake_search
from tests.fake_telegram import OWNER, TOKEN, start_fake_telegram

STRANGER = 77
ALLOWED_TAGS = {"b", "i", "a", "code", "pre"}


class ScriptedTranscriber:
    """Hears what the test scripts (no Whisper weights can be had here); records the audio it got.

    Each script entry is a Transcript to return or an exception to raise.
    """

    def __init__(self) -> None:
        self.script: list[object] = []
        self.heard: list[bytes] = []

    def __call__(self, data: bytes):
        self.heard.append(data)
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step


class Env:
    """Everything a bot test touches."""

    def __init__(self, telegram, llm, search, settings, voice):
        self.telegram, self.llm, self.search, self.settings = telegram, llm, search, settings
        self.voice = voice

    async def say(self, text: str, *, user: int = OWNER, chat: int | None = None, **kw) -> int:
        return self.telegram.push_message(chat if chat is not None else user, user, text, **kw)

    async def bot_said(self, predicate, timeout_s: float = 15.0):
        return await self.telegram.wait_for(
            lambda c: c.method in ("sendMessage", "editMessageText") and c.ok and predicate(c), timeout_s
        )


@asynccontextmanager
async def running_bot(
    home: Path,
    varn_site,
    *,
    transcribe=None,
    daemon: bool = True,
    zone=None,
    platform: str = sys.platform,
    warm: bool = False,
    **env: str,
) -> AsyncIterator[tuple[Env, str]]:
    """The bot and the daemon on a knowledge base in ``home``, with every stand-in; (Env, web base URL).

    ``transcribe`` None: the bot's own transcriber (mlx-whisper on KB_WHISPER_MODEL, given in ``env``).
    ``daemon`` False: no daemon runs (a test starts one with ``daemon.main.background`` when it wants).
    ``zone``: the owner's time zone (this machine's when None). ``platform``: the operating system kb
    takes itself to run on (this one's by default). ``warm``: as the bot's own process starts it (see
    bot.main.create).
    """
    base, port, _ = varn_site
    telegram, tg_runner, tg_url = await start_fake_telegram(TOKEN)
    llm = FakeLLM()
    llm_runner = await start(llm)
    search = FakeSearch()
    search_runner, _ = await start_fake_search(search)
    settings = make_settings(home, platform=platform, **{
        "KB_TELEGRAM_TOKEN": TOKEN, "KB_TELEGRAM_ALLOWED_USERS": str(OWNER), "KB_TELEGRAM_API_URL": tg_url,
        "KB_LLM_URL": llm.base_url, "KB_DDG_URL": search.ddg_url, "KB_SETTLE_S": "0.1", "KB_IMPORT_WAIT_S": "20",
        "KB_FETCH_PORTS": str(port), "KB_LLM_TIMEOUT_S": "5",
        "KB_TELEGRAM_UPDATE_EVERY_S": "0.05", **env,
    })  # fmt: skip
    app = create(
        settings, transcribe=transcribe, zone=zone, warm=warm, allow_hosts=[("127.0.0.1", port)]
    )  # the test web server only
    with background(settings, ApproxCounter()) if daemon else contextlib.nullcontext():
        await app.initialize()
        await app.post_init(app)
        await app.start()
        await app.updater.start_polling(poll_interval=0, timeout=1)
        try:
            yield Env(telegram, llm, search, settings, transcribe), base
        finally:
            await app.updater.stop()
            await app.stop()
            await app.post_shutdown(app)
            await app.shutdown()
    await search_runner.cleanup()
    await llm_runner.cleanup()
    await tg_runner.cleanup()
    assert telegram.errors == [], telegram.errors  # a bug in the stand-in, with its exception


@pytest.fixture
async def env(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site, transcribe=ScriptedTranscriber(), zone=UTC) as running:
        yield running


def valid_html(call) -> bool:
    text = call.params["text"]
    tags = re.findall(r"</?([a-z-]+)", text)
    return (
        call.params.get("parse_mode") == "HTML"
        and set(tags) <= ALLOWED_TAGS
        and call.params.get("link_preview_options", {}).get("is_disabled") is True
    )


def shown_as_html(message) -> bool:
    """A message of the bot's, as it stands now (after its edits): HTML of the allowed tags, no preview."""
    tags = re.findall(r"</?([a-z-]+)", message.sent_text or "")
    return (
        message.parse_mode == "HTML"
        and set(tags) <= ALLOWED_TAGS
        and (message.link_preview_options or {}).get("is_disabled") is True
    )


def drop_note(env, name: str, text: str) -> bytes:
    """Drop a note into the watched inbox; the bytes written."""
    data = text.encode()
    (env.settings.inbox / name).write_bytes(data)
    return data


async def wait_indexed(env, count: int) -> None:
    from knowledge.store.index import Index

    def ready() -> bool:
        try:
            with Index(env.settings.index_path, readonly=True) as index:
                return index.document_count() >= count
        except Exception:
            return False

    await env.telegram.wait_until(ready, timeout_s=15)


async def indexed_note(env, name: str, text: str) -> None:
    """Drop one note into an empty knowledge base and wait until it is indexed."""
    drop_note(env, name, text)
    await wait_indexed(env, 1)


async def web_offer(
    env, results: list[Result], verdicts: str, cited: int, answer_for: Callable[[dict], Step]
):
    """Ask the bot how deep Lake Quillan is while the web search finds ``results``: the relevance check says
    ``verdicts``, the summary cites result ``cited`` (the Varn valley page) and ``answer_for`` answers from
    the evidence. The message offering the candidates as buttons."""
    env.search.script["ddg"] = [ddg_results("q", results)]
    env.llm.responder = web_step(
        "lake quillan depth", verdicts, f"[{cited}] The Varn valley page gives the depth.", answer_for
    )
    await env.say("How deep is Lake Quillan?")
    return await env.bot_said(lambda c: c.method == "sendMessage" and c.params.get("reply_markup"))
