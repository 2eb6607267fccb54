"""A local stand-in for the Telegram Bot API, served over HTTP for python-telegram-bot (see FakeTelegram)."""

from tests.fake_telegram.errors import ApiError
from tests.fake_telegram.records import (
    Call,
    CallbackQuery,
    ChatAction,
    StoredDraft,
    StoredFile,
    StoredMessage,
)
from tests.fake_telegram.server import CLIENT_GONE, serve
from tests.fake_telegram.stand_in import FakeTelegram, start_fake_telegram, threaded_fake_telegram
from tests.fake_telegram.text import HtmlParseError, format_text, parse_html, trim_text, utf16_len

TOKEN = "123456:TEST-token"  # the bot token the tests give the stand-in
OWNER = 42  # the owner's user id, and the id of their private chat with the bot

__all__ = [
    "CLIENT_GONE",
    "ApiError",
    "Call",
    "CallbackQuery",
    "ChatAction",
    "FakeTelegram",
    "OWNER",
    "TOKEN",
    "HtmlParseError",
    "StoredDraft",
    "StoredFile",
    "StoredMessage",
    "format_text",
    "parse_html",
    "serve",
    "start_fake_telegram",
    "threaded_fake_telegram",
    "trim_text",
    "utf16_len",
]
