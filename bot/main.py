"""Entry point of ``kb bot``: check the settings, wire the engine, poll Telegram until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import signal
import warnings
from collections.abc import Callable
from datetime import tzinfo
from functools import partial

import structlog
from telegram import Update
from telegram.error import InvalidToken
from telegram.warnings import PTBDeprecationWarning

from bot.app import build_application, file_base_url
from bot.deps import BotDeps
from bot.digest import machine_zone, schedule_digests
from knowledge.config import Settings
from knowledge.conversation.session import Conversing
from knowledge.errors import ConfigError, KbError
from knowledge.feedback.store import Feedback
from knowledge.report.status import plural
from knowledge.speech.transcribe import Transcript, speech_runner, transcribe_audio
from knowledge.store.index import Index
from knowledge.wiring import (
    Language,
    build_engine,
    candidate_store,
    conversing,
    http_session,
    load_language,
    make_fetcher,
)

log = structlog.get_logger()

FIND_YOUR_ID = (
    "set KB_TELEGRAM_ALLOWED_USERS to your numeric Telegram user id. To find it, message @userinfobot, or start "
    "the bot with KB_TELEGRAM_ALLOWED_USERS=1, send it a message, and run: kb logs --event bot.refused"
)


def check_settings(settings: Settings) -> None:
    """A token and at least one allowed user, or a ConfigError that says how to fix it."""
    if not settings.telegram_token:
        raise ConfigError(
            "KB_TELEGRAM_TOKEN is not set: create a bot with @BotFather and put its token there"
        )
    if not settings.telegram_allowed_users:
        raise ConfigError("KB_TELEGRAM_ALLOWED_USERS is empty: " + FIND_YOUR_ID)


def create(
    settings: Settings,
    *,
    transcribe: Callable[[bytes], Transcript] | None = None,
    language: Language | None = None,
    signals: bool = False,
    warm: bool = False,
    zone: tzinfo | None = None,
    **fetch_test_only: object,
):
    """The application, with the engine and its HTTP session made at start-up and closed at shutdown.

    ``transcribe`` replaces the speech-to-text model (tests script it: no Whisper weights there); by
    default voice notes are transcribed with KB_WHISPER_MODEL in a worker process started on the first
    one, or refused with a sentence when mlx-whisper is not installed. ``language``: the token counter
    and chat template (load_language's) when the caller has them already. ``signals``: SIGTERM and
    SIGINT stop it, ending a model download first (the bot's own process; tests stop it themselves).
    ``warm``: load what the owner's first question would, on a thread from the start (Engine.warm; the
    bot's own process), so that it is answered as fast as the next; a stop does not wait for it.
    ``zone``: the owner's time zone (this machine's by default).
    """
    check_settings(settings)
    counter, template, why = language or load_language(settings)  # the caller's, when it has loaded them
    session_box: dict[str, object] = {}
    runner = speech_runner()
    if transcribe is None and importlib.util.find_spec("mlx_whisper") is not None:
        transcribe = partial(transcribe_audio, settings=settings, runner=runner)

    app = build_application(
        None,  # type: ignore[arg-type] - filled in post_init, inside the running loop
        token=settings.telegram_token,
        base_url=settings.telegram_api_url,
        base_file_url=file_base_url(settings.telegram_api_url),
    )
    register = app.post_init

    def on_signal() -> None:
        """SIGTERM or SIGINT: a speech model download or transcription under way ends now (the first
        voice note may be fetching GBs), so does an answer waiting on the model (it says "stopped"),
        then the bot stops as python-telegram-bot stops it (it waits for the handlers running)."""
        log.info("bot.stopping")
        runner.interrupt()
        deps = app.bot_data.get("deps")
        for task in list(deps.answering.values()) if deps is not None else []:
            task.cancel()
        app.stop_running()

    async def start(application) -> None:
        if signals:  # the bot's own process (serve): SIGTERM and SIGINT stop it through on_signal
            for sig in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(sig, on_signal)
        session = http_session()
        session_box["session"] = session
        engine = build_engine(settings, session, counter, template)
        talk = conversing(settings, engine)
        application.bot_data["deps"] = BotDeps(
            settings=settings,
            engine=engine,
            conversing=talk,
            feedback=Feedback(talk.store),
            store=candidate_store(settings),
            fetch=make_fetcher(settings, **fetch_test_only).fetch,
            allowed_users=frozenset(settings.telegram_allowed_users),
            transcribe=transcribe,
            tokenizer=(counter, why),
            zone=zone or machine_zone(),
        )
        if register is not None:
            await register(application)
        deps = application.bot_data["deps"]
        schedule_digests(application, deps, zone=deps.zone)
        if warm:  # while the bot polls (a question meanwhile waits for what it loads); not holding a stop up
            engine.warm_in_background(owner_language(settings, talk))
        announce(settings, application.bot.username)

    async def stop(application) -> None:
        deps = application.bot_data.get("deps")
        # forwards still gathering (the last 1.5 s) are dropped; notes already saved stay in the inbox
        if deps is not None:
            await deps.collector.close()
            await deps.kept.close()
        session = session_box.pop("session", None)
        if session is not None:
            await session.close()
        await asyncio.to_thread(runner.close)

    app.post_init = start
    app.post_shutdown = stop
    return app


def owner_language(settings: Settings, talk: Conversing) -> str:
    """The language the bot warms in first: KB_LANGUAGE, else the one last chosen with /lang ("": English)."""
    return settings.language or talk.store.last_chosen_language() or ""


def announce(settings: Settings, username: str | None) -> None:
    """One start line on any console (journald and launchd logs read stdout) and the ``bot.started`` event."""
    users = len(settings.telegram_allowed_users)
    documents = "no index yet"
    with contextlib.suppress(KbError), Index(settings.index_path, readonly=True) as index:
        documents = f"{index.document_count()} documents"
    print(
        f"kb bot @{username or '?'}: serving {plural(users, 'allowed user')}, "
        f"model {settings.model or '(none)'} at {settings.llm_url}, {documents} in {settings.home}; "
        "SIGTERM or Ctrl-C stops it",
        flush=True,
    )
    log.info(
        "bot.started", bot=username, allowed_users=users, model=settings.model, llm_url=settings.llm_url,
        index=str(settings.index_path), documents=documents,
    )  # fmt: skip


def serve(settings: Settings, *, language: Language | None = None) -> int:
    """Poll Telegram until SIGTERM or SIGINT; exit 0 after a clean stop (``language``: see create)."""
    # PTB reads its own RetryAfter's field as a 429 arrives and warns that the field will become a timedelta;
    # kb reads either (bot.limiter.retry_seconds), so the warning is not the owner's to see on the terminal
    warnings.filterwarnings("ignore", message=".*retry_after.*", category=PTBDeprecationWarning)
    app = create(settings, language=language, signals=True, warm=True)
    try:
        app.run_polling(allowed_updates=Update.ALL_TYPES, stop_signals=None)  # create's own: see on_signal
    except InvalidToken:  # its message carries the token: never chained into a traceback or a log
        raise ConfigError(
            f"the Bot API at {settings.telegram_api_url} refused the bot token (401 Unauthorized): check "
            "KB_TELEGRAM_TOKEN (from @BotFather) and, for a self-hosted Bot API server, KB_TELEGRAM_API_URL"
        ) from None
    return 0
