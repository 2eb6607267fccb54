"""The Telegram front end: thin handlers that turn updates into engine calls and replies into messages.

All handlers are registered in ``build_application``. A gatekeeper in group -1 drops every
update that is not from an allowed user in a private chat before any handler sees it. Each
chat is served one update at a time, in order (a per-chat lock); different chats run
concurrently. Everything the engine returns is rendered by ``bot.render``.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog
from telegram import Update
from telegram.error import TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    ApplicationHandlerStop,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)

from bot.access import refusal
from bot.actions import CALLBACK_PREFIX as ACTION_PREFIX
from bot.answer import on_callback, on_import, on_search, on_text
from bot.capture import IN_ALBUM, LINK_WITH_COMMENT, on_forward, on_kept_button, on_link_comment, on_note
from bot.converse import on_new, on_stop, on_unknown
from bot.deps import BotDeps, deps_of, words_of
from bot.digest import on_digest
from bot.feedback import CALLBACK_PREFIX as VOTE_PREFIX
from bot.feedback import on_vote
from bot.find import on_action, on_find
from bot.folders import on_folders
from bot.kept import CALLBACK_PREFIX as KEPT_PREFIX
from bot.language import CALLBACK_PREFIX as LANG_PREFIX
from bot.language import learn_language, on_lang, on_lang_button, register_commands
from bot.limiter import ChatLimiter
from bot.media import on_document, on_photo, on_save_note, on_voice
from bot.notes import CALLBACK_PREFIX as NOTE_PREFIX
from bot.render import bold, esc, link
from bot.send import say
from knowledge.errors import IndexMissing, IndexUnreadable
from knowledge.report.status import phone_facts, probe_model, status_report
from knowledge.store.index import Index
from knowledge.words.catalog import LABELLED, N_
from knowledge.words.replies import unreadable_text

log = structlog.get_logger()

EDITS_IGNORED = N_("Edited messages are not answered again — send the corrected question as a new message.")
HELP = N_(
    "<b>kb</b> answers from your own documents and cites them.\n\n"
    "• Ask a question in any language. Follow-ups are understood from the conversation "
    "(“and the second point?”); reply to an earlier answer to continue from it, or to a file or a "
    "saved note to ask about it. /new starts afresh (so do 30 minutes of silence); /stop ends an answer "
    "being written.\n"
    "• Send a PDF, HTML, text or Markdown file, or a photo or screenshot, to add it; "
    "a caption on a photo is answered as a question about it.\n"
    "• Send a voice note to ask by voice; tap “Save as note” to keep what you said.\n"
    "• When your documents do not answer, kb searches the web and shows candidates as buttons: "
    "tap one to import it, and kb answers again from it.\n"
    "• 👍 or 👎 under an answer tells kb whether it helped (kb feedback on {computer} lists the votes); "
    "after 👎, “Search the web” looks for it online.\n"
    "• Paste a link to import that page; a link with a line of comment is imported with the comment.\n"
    "• Forward a message, a photo, an album, a file or a voice note to keep it (not answered); "
    "/note text keeps a thought. “Ask about it” and “Undo” come with each.\n"
    "• /find words lists your documents that match: open one (its passage and the original file) or "
    "delete it (it stays in the trash for 30 days; Undo brings it back). Under an answer, "
    "“Sources” shows the passages it used.\n"
    "• /folders lists the folders kb keeps in sync (a notes vault, Documents) with how many of their files "
    "are indexed. In a question, in:NAME searches one folder only and #tag only the notes with that tag "
    "(“in:vault #rent how much was the deposit?”).\n"
    "• /digest shows what you kept lately, each with a short summary, and the questions left open; "
    "“Summarise” (or “summarise it”) reads a whole document.\n"
    "• /lang chooses the language kb writes to you in.\n\n"
    "/new · /stop · /find words · /search question · /import web-N · /note text · /digest · /sources · "
    "/folders · /status · /forget · /lang"
)


# -- wiring ---------------------------------------------------------------------------------


def build_application(deps: BotDeps, *, token: str, base_url: str, base_file_url: str) -> Application:
    """The PTB application with every handler; polling is started by the caller."""
    app = (
        ApplicationBuilder()
        .token(token)
        .base_url(base_url)
        .base_file_url(base_file_url)
        .concurrent_updates(True)
        .rate_limiter(ChatLimiter())  # a 429 holds its own chat, never the bot
        .post_init(register_commands)
        .build()
    )
    app.bot_data["deps"] = deps
    new = filters.UpdateType.MESSAGE  # an edited message is not a new question
    app.add_handler(TypeHandler(Update, gatekeeper), group=-1)
    app.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE, on_edited))
    app.add_handler(MessageHandler(new & (filters.FORWARDED | IN_ALBUM), on_forward))  # kept, not answered
    commands = {
        ("start", "help"): on_help,
        "search": on_search,
        "import": on_import,
        "sources": on_sources,
        "digest": on_digest,
        "find": on_find,
        "folders": on_folders,
        "status": on_status,
        "forget": on_forget,
        "note": on_note,
        "new": on_new,
        "stop": on_stop,
        "lang": on_lang,
    }
    for names, handle in commands.items():
        app.add_handler(
            CommandHandler(list(names) if isinstance(names, tuple) else names, handle, filters=new)
        )
    app.add_handler(MessageHandler(new & filters.COMMAND, on_unknown))  # after every known command
    app.add_handler(MessageHandler(new & (filters.VOICE | filters.AUDIO | filters.Document.AUDIO), on_voice))
    app.add_handler(MessageHandler(new & filters.PHOTO, on_photo))
    app.add_handler(MessageHandler(new & filters.Document.ALL, on_document))
    app.add_handler(MessageHandler(new & LINK_WITH_COMMENT & ~filters.COMMAND, on_link_comment))
    app.add_handler(MessageHandler(new & filters.TEXT & ~filters.COMMAND, on_text))
    app.add_handler(CallbackQueryHandler(on_save_note, pattern=f"^{NOTE_PREFIX}"))
    app.add_handler(CallbackQueryHandler(on_kept_button, pattern=f"^{KEPT_PREFIX}"))
    app.add_handler(CallbackQueryHandler(on_action, pattern=f"^{ACTION_PREFIX}"))
    app.add_handler(CallbackQueryHandler(on_lang_button, pattern=f"^{LANG_PREFIX}"))
    app.add_handler(CallbackQueryHandler(on_vote, pattern=f"^{VOTE_PREFIX}"))
    app.add_handler(CallbackQueryHandler(on_callback))
    app.add_error_handler(on_error)
    return app


async def gatekeeper(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Stop every update that is not from an allowed user in a private chat: no answer, no side effect."""
    structlog.contextvars.clear_contextvars()
    why = refusal(update, deps_of(context).allowed_users)
    user = update.effective_user
    chat = update.effective_chat
    structlog.contextvars.bind_contextvars(update_id=update.update_id, chat_id=chat.id if chat else None)
    if why is not None:
        log.warning("bot.refused", user_id=user.id if user else None, reason=why)
        raise ApplicationHandlerStop
    await learn_language(deps_of(context), update)


# -- handlers -------------------------------------------------------------------------------


async def on_help(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """What kb is and how to use it."""
    chat_id = update.effective_chat.id
    await say(context, chat_id, words_of(deps_of(context), chat_id).tr(HELP))


async def on_edited(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """An edit is not answered again (that would repeat searches and imports): say so, once per edit."""
    chat_id = update.effective_chat.id
    await say(context, chat_id, esc(words_of(deps_of(context), chat_id).tr(EDITS_IGNORED)))


async def on_sources(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """The latest documents with their titles and where they came from."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    words = words_of(deps, chat_id)
    try:
        with Index(deps.settings.index_path, readonly=True) as index:
            docs = sorted(index.documents(), key=lambda d: d.indexed_at, reverse=True)[:15]
    except IndexMissing:
        docs = []
    if not docs:
        await say(
            context, chat_id, esc(words.tr("No documents yet: send me a file or drop one into the inbox."))
        )
        return
    lines = [
        f"• {link(d.source_url, d.title) if d.source_url else esc(d.title)} — {esc(d.source_name)}"
        for d in docs
    ]
    await say(context, chat_id, bold(words.tr("Latest documents")) + "\n" + "\n".join(lines))


async def on_status(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """What an owner needs to know, in words: documents, what waits, the model, indexing, web search, the
    last thing added (in this machine's time zone); the internals are kb status's, at the terminal."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    model = await probe_model(deps.engine.llm)
    report = await asyncio.to_thread(status_report, deps.settings, model=model, counter=deps.tokenizer)
    words = words_of(deps, chat_id)
    facts = phone_facts(report, words, zone=deps.zone)
    await say(
        context, chat_id, "\n".join(esc(words.tr(LABELLED, name=label, what=fact)) for label, fact in facts)
    )


async def on_forget(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Clear this chat's web candidates."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    found = deps.store.forget(str(chat_id))
    words = words_of(deps, chat_id)
    text = words.tr("Web candidates cleared.") if found else words.tr("There were no web candidates.")
    await say(context, chat_id, esc(text))


async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Log the failure and tell the user briefly; the bot keeps running."""
    log.error("bot.error", error=repr(context.error), exc_info=context.error)
    if isinstance(update, Update) and update.effective_chat is not None:
        with contextlib.suppress(TelegramError):
            words = words_of(deps_of(context), update.effective_chat.id)
            text = (
                unreadable_text(context.error.reason, words)
                if isinstance(context.error, IndexUnreadable)
                else words.tr("Sorry — something went wrong with that. It has been logged.")
            )
            await say(context, update.effective_chat.id, esc(text))


def file_base_url(api_url: str) -> str:
    """PTB's file URL for a Bot API base URL (…/bot → …/file/bot)."""
    return (
        api_url[: -len("/bot")] + "/file/bot"
        if api_url.endswith("/bot")
        else api_url.rstrip("/") + "/file/bot"
    )
