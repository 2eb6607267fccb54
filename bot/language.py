"""The language each chat is written to: /lang (buttons, kept across restarts), else the Telegram
client's language, else KB_LANGUAGE, else English; and the command menu in each language.

Telegram's command menus know only two-letter codes: ``zh`` gets the Traditional Chinese menu
(the owner's Chinese unless KB_LANGUAGE says Simplified), ``th`` the Thai one, every other client
the English one.
"""

from __future__ import annotations

import asyncio

import structlog
from telegram import BotCommand, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.ext import Application, ContextTypes

from bot.converse import key_of
from bot.deps import BotDeps, deps_of, words_of
from bot.send import edit, say
from knowledge.words.catalog import N_, owner_words
from knowledge.words.language import LANGUAGES, NAMES, chinese_of, for_telegram

log = structlog.get_logger()

CALLBACK_PREFIX = "lang:"
COMMANDS = [
    ("start", N_("what kb is and how to use it")),
    ("help", N_("how to use kb")),
    ("new", N_("start a new conversation (forget the earlier messages)")),
    ("stop", N_("stop the answer being written")),
    ("search", N_("search the web even when your documents have something")),
    ("import", N_("import a web candidate: /import web-2")),
    ("find", N_("find your documents: /find words (open, delete)")),
    ("note", N_("keep a note: /note text, or reply /note to a message")),
    ("digest", N_("what you kept since the last digest, and questions left open")),
    ("sources", N_("the latest documents")),
    ("folders", N_("your folders kept in sync, and their files indexed")),
    ("status", N_("documents, inbox, daemon and model server")),
    ("forget", N_("clear this chat's web candidates")),
    ("lang", N_("the language kb writes in")),
]


async def learn_language(deps: BotDeps, update: Update) -> None:
    """Note the language of the chat an update comes from: the /lang choice, else its user's client's."""
    chat = update.effective_chat
    if chat is None:
        return
    if chat.id not in deps.chosen:
        deps.chosen[chat.id] = await asyncio.to_thread(deps.conversing.store.language, key_of(chat.id))
    user = update.effective_user
    code = user.language_code if user is not None else None
    deps.languages[chat.id] = for_telegram(deps.chosen[chat.id], code, deps.settings.language)


async def on_lang(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """/lang: buttons for each language kb writes in."""
    deps, chat_id = deps_of(context), update.effective_chat.id
    words = words_of(deps, chat_id)
    rows = [[InlineKeyboardButton(NAMES[lang], callback_data=CALLBACK_PREFIX + lang)] for lang in LANGUAGES]
    text = words.tr("kb writes to you in {language}. Choose another:", language=NAMES[words.language])
    await say(context, chat_id, text, reply_markup=InlineKeyboardMarkup(rows))


async def on_lang_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """A language tapped: kept for this chat, the message says so in it."""
    deps, query = deps_of(context), update.callback_query
    chat_id = update.effective_chat.id
    language = (query.data or "").removeprefix(CALLBACK_PREFIX)
    if language not in LANGUAGES:
        await query.answer(words_of(deps, chat_id).tr("this button has expired"), show_alert=True)
        return
    await asyncio.to_thread(deps.conversing.store.choose_language, key_of(chat_id), language)
    deps.chosen[chat_id] = deps.languages[chat_id] = language
    words = owner_words(language, deps.settings)
    log.info("bot.language", language=language)
    await query.answer(NAMES[language])
    done = words.tr("kb writes to you in {language} from now on.", language=NAMES[language])
    if query.message is not None:
        await edit(context, query.message, done)


async def register_commands(app: Application) -> None:
    """The command menu in English (the default), Traditional (or the owner's) Chinese and Thai."""
    deps: BotDeps = app.bot_data["deps"]
    default = deps.settings.language or "en"
    for code, language in (("", default), ("zh", chinese_of(deps.settings.language)), ("th", "th")):
        words = owner_words(language, deps.settings)
        commands = [BotCommand(name, words.tr(text)) for name, text in COMMANDS]
        await app.bot.set_my_commands(commands, language_code=code or None)
