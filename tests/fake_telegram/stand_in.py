"""FakeTelegram, the Bot API stand-in assembled from its parts, and the ways to serve it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fake_telegram.methods import Methods
from tests.fake_telegram.records import (
    Call,
    CallbackQuery,
    ChatAction,
    Records,
    StoredDraft,
    StoredFile,
    StoredMessage,
)
from tests.fake_telegram.server import Failure, Poller, Server, serve
from tests.fake_telegram.updates import Updates

DRAFT_TTL_S = 30.0  # a draft is "a temporary 30-second preview" (Bot API, sendMessageDraft)


class FakeTelegram(Updates, Records, Methods, Server):
    """A stand-in for the Telegram Bot API on 127.0.0.1, speaking the dialect python-telegram-bot uses.

    Bot methods live under ``/bot<token>/<method>``. Requests may be form-encoded POSTs with
    JSON-encoded structured fields (what PTB sends), ``application/json`` bodies, multipart forms or
    GET query strings. File downloads are served at ``/file/bot<token>/<file_path>``. Point PTB at the
    stand-in with ``base_url=fake.base_url`` and ``base_file_url=fake.base_file_url``.

    The stand-in behaves like Telegram, as described in ../shared/reference/external-services.md §2:

    * Answers come in ``{"ok": true, "result": …}`` envelopes. Errors come as
      ``{"ok": false, "error_code": N, "description": "…"}`` with the same HTTP status.
    * A wrong (well-formed) token gets 401 "Unauthorized". A malformed token or an unknown method gets
      404 "Not Found".
    * Text sent with ``parse_mode=HTML`` is parsed the way Telegram's parser (tdlib ``parse_html``)
      does it. The parse yields the plain text and the entities (offsets in UTF-16 code units), and the
      error wordings are Telegram's, e.g. ``Unsupported start tag "br" at byte offset 3``. One rule is
      stricter than tdlib, on purpose: a bare ``&`` that does not start ``&lt;`` ``&gt;`` ``&amp;``
      ``&quot;`` or a numeric entity (with its ``;``) is refused. The Bot API documentation requires the
      escape, but Telegram itself probably keeps such a character as text. Set
      ``FakeTelegram.strict_ampersand = False`` to get Telegram's own leniency.
    * Plain text is trimmed of surrounding whitespace and then checked: empty text gives "message
      text is empty", more than 4,096 characters gives "message is too long". Which unit Telegram
      counts is disputed (one live measurement reported code points; many clients count UTF-16 code
      units, the unit of entity offsets): the stand-in counts UTF-16 code units, the stricter of the
      two, so text that passes here passes either way (``length_in_utf16 = False``: code points).
    * Inline keyboards are checked too: callback data must be 1–64 UTF-8 bytes (BUTTON_DATA_INVALID).
    * Edits give "message is not modified", "message to edit not found" and "message can't be edited"
      where Telegram would. editMessageText without a reply_markup removes the inline keyboard, as on
      Telegram.
    * answerCallbackQuery refuses an unknown, already answered or expired query id.
    * sendMessageDraft (Bot API 9.3+, conversation.md §3a) answers ``true`` and keeps a StoredDraft; it
      is no message. The chat must be a known private chat; ``draft_id`` must be a non-zero integer;
      the text is 0–4,096 characters after parsing (empty shows "Thinking..."). The chat's live draft
      lasts 30 s after its last update (``draft_ttl_s``, timed by ``clock``) and goes when the bot sends
      a message there. ``drafts_refused`` makes every draft fail, as for a bot Telegram refuses them.
    * A reply's reply_to_message carries no reply_to_message of its own; a reply with a quote carries
      a TextQuote (UTF-16 position, the formatting entities inside it, is_manual).
    * getUpdates long-polls. It confirms by offset, filters by allowed_updates (Telegram remembers the
      last list), and a newer getUpdates ends an older one that is still held with 409 "Conflict:
      terminated by other getUpdates request…", which is what Telegram does to the older request.
    * ``fail_next`` arms a 429 with ``parameters.retry_after``, any other error status, or a dropped
      connection.

    Some wordings are believed rather than verified (see the reference, §2.4): "message text is empty",
    BUTTON_DATA_INVALID, "query is too old…", "Unauthorized", BOT_COMMAND_INVALID,
    "MESSAGE_TOO_LONG" (answerCallbackQuery text over 200 characters), "invalid file_id", "file is
    too big", "chat not found", TEXTDRAFT_PEER_INVALID (sendMessageDraft into a group or channel, and
    with ``drafts_refused``; seen in public bug reports), and two that are the stand-in's own: the
    bare-``&`` message and "draft_id must be non-zero".

    Test-side API (plain Python; thread-safe, so a ThreadedServer works too):
    ``push_message``, ``push_callback``, ``push_document``, ``push_photo``, ``push_voice``, ``push_audio``,
    ``push_forward``, ``push_reply``, ``push_raw``, ``add_chat``,
    ``fail_next``, ``calls``, ``wait_for``, ``wait_until``, ``sent_messages``, ``messages``,
    ``message``, ``last_message``, ``chat_actions``, ``drafts``, ``live_draft``, ``callback_answer``,
    ``my_commands``, ``pending_updates``.

    Serve it with ``start_fake_telegram`` (or ``threaded_fake_telegram``).
    """

    strict_ampersand = True
    # Every sendMessageDraft fails with 400 TEXTDRAFT_PEER_INVALID (a bot whose drafts Telegram
    # refuses), to test falling back to editMessageText.
    drafts_refused: bool = False
    draft_ttl_s: float = DRAFT_TTL_S  # a live draft disappears this long after its last update
    length_in_utf16: bool = True  # the 4,096 limit in UTF-16 code units (an emoji counts two)

    def __init__(
        self,
        token: str,
        *,
        bot_username: str = "kb_test_bot",
        bot_first_name: str = "kb",
        first_update_id: int = 1000,
        callback_expiry_s: float | None = 15.0,
        drafts_refused: bool | None = None,
    ) -> None:
        self.token = token
        if drafts_refused is not None:
            self.drafts_refused = drafts_refused
        # The clock of drafts (their times and expiry); a test may set e.g. ``lambda: t + 31``.
        self.clock: Callable[[], float] = time.monotonic
        # The clock of getUpdates' long-poll timeout; a test may hold it still or move it on.
        self.poll_clock: Callable[[], float] = time.monotonic
        bot_id = int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 123456
        self.bot_user = {
            "id": bot_id,
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }
        self.callback_expiry_s = callback_expiry_s
        self.base_url = ""  # "http://127.0.0.1:PORT/bot", set when served
        self.base_file_url = ""  # "http://127.0.0.1:PORT/file/bot"
        self.webhook_url: str | None = None  # set it to make getUpdates answer 409
        self.allowed_updates: list[str] | None = None  # as getUpdates last set it
        self.errors: list[BaseException] = []  # exceptions inside the stand-in (answered 500)
        self.downloads: list[str] = []  # file paths served

        self._lock = threading.RLock()
        self._calls: list[Call] = []
        self._updates: list[dict] = []  # not yet confirmed, ascending update_id
        self._next_update_id = first_update_id
        self._chats: dict[int, dict] = {}
        self._users: dict[int, dict] = {}
        self._messages: dict[int, dict[int, StoredMessage]] = {}
        self._next_message_id: dict[int, int] = {}
        self._callbacks: dict[str, CallbackQuery] = {}
        self._next_callback = 0
        self._files: dict[str, StoredFile] = {}
        self._files_by_path: dict[str, StoredFile] = {}
        self._next_file = 0
        self._chat_actions: list[ChatAction] = []
        self._drafts: list[StoredDraft] = []
        self._live_drafts: dict[int, StoredDraft] = {}  # by chat: the draft on the user's screen
        self._commands: dict[str, list[dict]] = {}
        self._failures: dict[str, list[Failure]] = {}
        self._held: dict[str, asyncio.Event] = {}  # methods whose answers wait for the test (hold)
        self._poller: Poller | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None


async def start_fake_telegram(token: str, **options: Any) -> tuple[FakeTelegram, web.AppRunner, str]:
    """A stand-in for the bot ``token`` served in the running loop.

    Returns (fake, runner, base_url) where base_url is PTB's ``base_url``
    ("http://127.0.0.1:PORT/bot"); the file base URL is ``fake.base_file_url``
    ("http://127.0.0.1:PORT/file/bot"). Stop with ``await runner.cleanup()``.
    """
    fake = FakeTelegram(token, **options)
    runner = await serve(fake)
    return fake, runner, fake.base_url


def threaded_fake_telegram(token: str, **options: Any):
    """The stand-in in a thread of its own (for kb run as a subprocess): ``with … as fake:``."""
    from tests.fake_llm import ThreadedServer

    return ThreadedServer(FakeTelegram(token, **options), serve)
