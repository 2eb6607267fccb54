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
  text is empty", more than 4,096 characters gives "message is too long".
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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import mimetypes
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.local_server import serve_app

MAX_TEXT_LENGTH = 4096
MAX_CALLBACK_DATA_BYTES = 64
MAX_CALLBACK_ANSWER_TEXT = 200
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024

TOKEN_RE = re.compile(r"^\d+:[\w-]+$")
COMMAND_RE = re.compile(r"^[a-z0-9_]{1,32}$")
# A command in a user's text, as clients and the server mark it: "/cmd" or "/cmd@botname".
BOT_COMMAND_RE = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?")
URL_RE = re.compile(r"https?://[^\s<>\"']+")

CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)
# Fields whose values are JSON inside a form (PTB json.dumps everything that is not a str).
JSON_FIELDS = frozenset(
    {
        "reply_markup",
        "allowed_updates",
        "link_preview_options",
        "commands",
        "reply_parameters",
        "entities",
        "caption_entities",
        "scope",
        "media",
        "results",
    }
)
INT_FIELDS = frozenset(
    {
        "chat_id",
        "message_id",
        "offset",
        "limit",
        "message_thread_id",
        "cache_time",
        "from_chat_id",
        "reply_to_message_id",
        "user_id",
        "draft_id",
    }
)
FLOAT_FIELDS = frozenset({"timeout"})
BOOL_FIELDS = frozenset(
    {
        "disable_notification",
        "protect_content",
        "show_alert",
        "drop_pending_updates",
        "disable_web_page_preview",
        "allow_sending_without_reply",
        "allow_paid_broadcast",
    }
)
# Update types delivered when allowed_updates was never set or set to [].
DEFAULT_EXCLUDED_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
INLINE_BUTTON_ACTIONS = (
    "callback_data",
    "url",
    "login_url",
    "switch_inline_query",
    "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat",
    "callback_game",
    "pay",
    "web_app",
    "copy_text",
)

NOT_MODIFIED = (
    "message is not modified: specified new message content and reply markup are exactly the same "
    "as a current content and reply markup of the message"
)
QUERY_TOO_OLD = "query is too old and response timeout expired or query ID is invalid"
CONFLICT_OTHER_POLL = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
)
# sendMessageDraft into a group, supergroup or channel (drafts are for private chats only), and
# the answer to every draft while FakeTelegram.drafts_refused is set. Seen in public bug reports
# (e.g. nullclaw/nullclaw#626, a bot streaming into a private chat), not verified here.
DRAFT_PEER_INVALID = "TEXTDRAFT_PEER_INVALID"
DRAFT_ID_INVALID = "draft_id must be non-zero"  # the stand-in's own wording
# The sender push_reply gives a replied message the stand-in does not know.
OLD_MESSAGE_SENDER = {"id": 9000002, "is_bot": False, "first_name": "Someone", "username": "someone"}
DRAFT_TTL_S = 30.0  # a draft is "a temporary 30-second preview" (Bot API, sendMessageDraft)
# The entity types Telegram keeps in a reply's quote (Bot API, TextQuote.entities).
QUOTE_ENTITY_TYPES = frozenset({"bold", "italic", "underline", "strikethrough", "spoiler", "custom_emoji"})
CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete "
    "the webhook first"
)


# --------------------------------------------------------------------------------------------
# Errors


class ApiError(Exception):
    """An error answer: HTTP status, Telegram's description and optional ``parameters``."""

    def __init__(self, status: int, description: str, parameters: dict | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters

    def body(self) -> dict:
        out: dict[str, Any] = {"ok": False, "error_code": self.status, "description": self.description}
        if self.parameters:
            out["parameters"] = self.parameters
        return out


def bad_request(what: str) -> ApiError:
    return ApiError(400, f"Bad Request: {what}")


# --------------------------------------------------------------------------------------------
# parse_mode=HTML, after tdlib's parse_html (td/telegram/MessageEntity.cpp)

SUPPORTED_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
        "tg-time",
    }
)
_SIMPLE_ENTITIES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
}
_ENTITY_RE = re.compile(rb"&(?:#([0-9]{1,8})|#[xX]([0-9a-fA-F]{1,7})|([a-zA-Z]+))(;?)")
_NAMED = {b"lt": "<", b"gt": ">", b"amp": "&", b"quot": '"'}
_SPACE = frozenset(b" \t\r\n\v\f")


class HtmlParseError(ValueError):
    """Telegram's 'can't parse entities' reason, e.g. 'Unsupported start tag "br" at byte offset 3'."""


def utf16_len(s: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's entity offsets."""
    return len(s.encode("utf-16-le")) // 2


def _decode_entity(s: bytes, i: int, strict: bool) -> tuple[str | None, int]:
    """The character an HTML entity at s[i] stands for and the index after it, or (None, i)."""
    m = _ENTITY_RE.match(s, i)
    if m is None:
        return None, i
    dec, hx, name, semi = m.groups()
    if strict and not semi:
        return None, i
    if name is not None:
        char = _NAMED.get(name)
        if char is None:
            return None, i
        return char, m.end()
    code = int(dec) if dec is not None else int(hx, 16)
    if code == 0 or code >= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return None, i
    return chr(code), m.end()


@dataclass
class _Open:
    tag: str
    arg: str
    start16: int  # offset in UTF-16 units of the decoded text
    start_byte: int  # offset in bytes of the decoded text
    expandable: bool = False


def parse_html(text: str, *, strict_ampersand: bool = True) -> tuple[str, list[dict]]:
    """The plain text and entities Telegram makes of ``text`` with parse_mode=HTML.

    Raises HtmlParseError with Telegram's reason (byte offsets count UTF-8 bytes of ``text``).
    The text is not trimmed here; see ``format_text``.
    """
    s = text.encode("utf-8")
    n = len(s)
    out = bytearray()
    u16 = 0
    stack: list[_Open] = []
    entities: list[dict] = []
    i = 0

    def add(chunk: str) -> None:
        nonlocal u16
        out.extend(chunk.encode("utf-8"))
        u16 += utf16_len(chunk)

    def is_space(k: int) -> bool:
        return k < n and s[k] in _SPACE

    while i < n:
        c = s[i]
        if c == 0x26:  # &
            char, j = _decode_entity(s, i, strict_ampersand)
            if char is not None:
                add(char)
                i = j
                continue
            if strict_ampersand:
                raise HtmlParseError(f'Unescaped "&" at byte offset {i}; write it as "&amp;"')
        if c != 0x3C:  # not <
            out.append(c)
            if c & 0xC0 != 0x80:  # a UTF-8 lead byte starts a character
                u16 += 2 if c >= 0xF0 else 1
            i += 1
            continue

        begin = i
        i += 1
        if i >= n or s[i] != 0x2F:  # an opening tag
            name_begin = i
            while i < n and s[i] not in _SPACE and s[i] != 0x3E:
                i += 1
            if i >= n:
                raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
            tag = s[name_begin:i].decode("utf-8", "replace").lower()
            if tag not in SUPPORTED_TAGS:
                raise HtmlParseError(f'Unsupported start tag "{tag}" at byte offset {begin}')
            arg = ""
            expandable = False
            while i < n and s[i] != 0x3E:
                while is_space(i):
                    i += 1
                if i < n and s[i] == 0x3E:
                    break
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                attr_begin = i
                while i < n and s[i] not in _SPACE and s[i] not in b"=>":
                    i += 1
                attr = s[attr_begin:i].decode("utf-8", "replace").lower()
                if not attr:
                    raise HtmlParseError(f'Empty attribute name in the tag "{tag}" at byte offset {begin}')
                while is_space(i):
                    i += 1
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                if s[i] != 0x3D:  # no "=": only <blockquote expandable> may do that
                    if tag == "blockquote" and attr == "expandable":
                        expandable = True
                        continue
                    raise HtmlParseError(
                        f'Expected equal sign in declaration of an attribute of the tag "{tag}" '
                        f"at byte offset {begin}"
                    )
                i += 1
                while is_space(i):
                    i += 1
                if i >= n:
                    raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                if s[i] not in b"\"'":  # a name token: letters, digits, '.' and '-'
                    token_begin = i
                    while i < n and (chr(s[i]).isalnum() and s[i] < 0x80 or s[i] in b".-"):
                        i += 1
                    value = s[token_begin:i].decode("ascii").lower()
                    if i >= n:
                        raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                    if s[i] not in _SPACE and s[i] != 0x3E:
                        raise HtmlParseError(f"Unexpected end of name token at byte offset {token_begin}")
                else:
                    quote = s[i]
                    i += 1
                    raw = bytearray()
                    while i < n and s[i] != quote:
                        if s[i] == 0x26:
                            char, j = _decode_entity(s, i, strict_ampersand)
                            if char is not None:
                                raw.extend(char.encode("utf-8"))
                                i = j
                                continue
                            if strict_ampersand:
                                raise HtmlParseError(f'Unescaped "&" at byte offset {i}; write it as "&amp;"')
                        raw.append(s[i])
                        i += 1
                    if i < n:
                        i += 1  # the closing quote
                    value = raw.decode("utf-8", "replace")
                    if i >= n:
                        raise HtmlParseError(f"Unclosed start tag at byte offset {begin}")
                if tag == "a" and attr == "href":
                    arg = value
                elif tag == "code" and attr == "class" and value.startswith("language-"):
                    arg = value[len("language-") :]
                elif tag == "span" and attr == "class" and value.startswith("tg-"):
                    arg = value[len("tg-") :]
                elif (tag, attr) in (("tg-emoji", "emoji-id"), ("tg-time", "unix")):
                    arg = value
            i += 1  # the ">"
            if tag == "span" and arg != "spoiler":
                raise HtmlParseError(f'Tag "span" must have class "tg-spoiler" at byte offset {begin}')
            stack.append(_Open(tag, arg, u16, len(out), expandable))
            continue

        # a closing tag
        if not stack:
            raise HtmlParseError(f"Unexpected end tag at byte offset {begin}")
        i += 1  # the "/"
        name_begin = i
        while i < n and s[i] not in _SPACE and s[i] != 0x3E:
            i += 1
        end_name = s[name_begin:i].decode("utf-8", "replace").lower()
        while is_space(i):
            i += 1
        if i >= n or s[i] != 0x3E:
            raise HtmlParseError(f"Unclosed end tag at byte offset {begin}")
        i += 1
        top = stack[-1]
        if end_name and end_name != top.tag:
            raise HtmlParseError(
                f'Unmatched end tag at byte offset {begin}, expected "</{top.tag}>", found "</{end_name}>"'
            )
        stack.pop()
        if u16 <= top.start16:
            continue  # empty entities are dropped
        offset, length = top.start16, u16 - top.start16
        kind = _SIMPLE_ENTITIES.get(top.tag)
        if top.tag == "span":
            kind = "spoiler"
        if kind is not None:
            entities.append({"type": kind, "offset": offset, "length": length})
        elif top.tag == "a":
            url = top.arg or out[top.start_byte :].decode("utf-8", "replace")
            entities.append({"type": "text_link", "offset": offset, "length": length, "url": url})
        elif top.tag == "code":
            entity = {"type": "code", "offset": offset, "length": length}
            if top.arg:
                entity["_language"] = top.arg
            entities.append(entity)
        elif top.tag == "pre":
            last = entities[-1] if entities else None
            if last and last["type"] == "code" and last["offset"] == offset and last["length"] == length:
                entities[-1] = {"type": "pre", "offset": offset, "length": length}
                if last.get("_language"):
                    entities[-1]["language"] = last["_language"]
            else:
                entities.append({"type": "pre", "offset": offset, "length": length})
        elif top.tag == "blockquote":
            kind = "expandable_blockquote" if top.expandable else "blockquote"
            entities.append({"type": kind, "offset": offset, "length": length})
        elif top.tag == "tg-emoji":
            if not top.arg.isdigit():
                raise HtmlParseError("Invalid custom emoji identifier specified")
            entities.append(
                {"type": "custom_emoji", "offset": offset, "length": length, "custom_emoji_id": top.arg}
            )
        # tg-time: accepted, no entity (the date_time entity's fields are not verified here)
    if stack:
        raise HtmlParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1].tag}"')
    for entity in entities:
        entity.pop("_language", None)
    return out.decode("utf-8", "replace"), entities


def trim_text(text: str, entities: list[dict]) -> tuple[str, list[dict]]:
    """Telegram strips surrounding whitespace from message text; entities follow the cut."""
    stripped = text.strip()
    if stripped == text:
        return text, entities
    lead16 = utf16_len(text[: len(text) - len(text.lstrip())])
    end16 = lead16 + utf16_len(stripped)
    out = []
    for e in entities:
        start = max(e["offset"], lead16)
        stop = min(e["offset"] + e["length"], end16)
        if stop > start:
            out.append({**e, "offset": start - lead16, "length": stop - start})
    return stripped, out


def format_text(
    text: str,
    parse_mode: str | None,
    entities: list | None,
    *,
    strict_ampersand: bool = True,
    allow_empty: bool = False,
):
    """(plain text, entities) as Telegram stores them, or ApiError as Telegram answers.

    ``allow_empty`` lets the text be empty after parsing and trimming (sendMessageDraft's
    "Thinking..." placeholder)."""
    if parse_mode:
        mode = parse_mode.lower()
        if mode == "html":
            try:
                plain, found = parse_html(text, strict_ampersand=strict_ampersand)
            except HtmlParseError as exc:
                raise bad_request(f"can't parse entities: {exc}") from None
        elif mode in ("markdown", "markdownv2"):
            plain, found = text, []  # not parsed by the stand-in
        else:
            raise bad_request("unsupported parse_mode")
    else:
        plain, found = text, list(entities or [])
    plain, found = trim_text(plain, found)
    found.sort(key=lambda e: (e["offset"], -e["length"]))
    if not plain and not allow_empty:
        raise bad_request("message text is empty")
    if len(plain) > MAX_TEXT_LENGTH:
        raise bad_request("message is too long")
    return plain, found


# --------------------------------------------------------------------------------------------
# Records and state


@dataclass
class Call:
    """One Bot API request the stand-in received."""

    index: int
    method: str  # as Telegram knows it, e.g. "sendMessage" (whatever case the client used)
    params: dict  # decoded: JSON fields parsed, ids and numbers as int, flags as bool
    raw: dict  # as received: form strings, or the JSON body's values
    http_method: str
    content_type: str | None  # the request's Content-Type header (None for PTB's empty POSTs)
    time: float  # time.monotonic() at arrival
    # HTTP status of the answer: None while a getUpdates is held, CLIENT_GONE (499) when the client
    # closed a held getUpdates (PTB does on stop), 0 for a connection fail_next(drop=True) closed
    status: int | None = None
    response: dict | None = None  # the JSON answer

    @property
    def ok(self) -> bool:
        return bool(self.response and self.response.get("ok"))

    @property
    def result(self) -> Any:
        return (self.response or {}).get("result")

    @property
    def description(self) -> str | None:
        return (self.response or {}).get("description")


@dataclass
class StoredMessage:
    """A message in a chat as the stand-in keeps it (the bot's and the users')."""

    chat_id: int
    message_id: int
    date: int
    from_bot: bool  # sent by the bot under test
    sender: dict  # the "from" User
    text: str | None  # plain text as the user sees it (tags stripped, entities decoded)
    sent_text: str | None = None  # text as the bot sent it (HTML source when parse_mode=HTML)
    parse_mode: str | None = None
    entities: list[dict] = field(default_factory=list)
    reply_markup: dict | None = None  # parsed JSON
    link_preview_options: dict | None = None
    disable_web_page_preview: bool | None = None
    edit_date: int | None = None
    deleted: bool = False
    document: dict | None = None
    extra: dict = field(default_factory=dict)  # other Message fields (forward_origin, via_bot, caption…)
    history: list[str] = field(default_factory=list)  # earlier plain texts, oldest first

    @property
    def buttons(self) -> list[dict]:
        """The inline keyboard's buttons, row after row."""
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return [button for row in rows for button in row]

    @property
    def links(self) -> list[tuple[str, str]]:
        """(link text, url) of every text_link entity."""
        out = []
        for e in self.entities:
            if e["type"] == "text_link":
                units = (self.text or "").encode("utf-16-le")
                piece = units[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
                out.append((piece, e["url"]))
        return out

    @property
    def link_preview_disabled(self) -> bool:
        return bool((self.link_preview_options or {}).get("is_disabled") or self.disable_web_page_preview)

    @property
    def reply_to_id(self) -> int | None:
        """The message_id of the message this one replies to, None when it is no reply."""
        replied = self.extra.get("reply_to_message")
        return replied.get("message_id") if isinstance(replied, dict) else None


@dataclass
class StoredDraft:
    """One sendMessageDraft as the stand-in received it (a draft is no message: it has no id)."""

    chat_id: int
    draft_id: int  # drafts with the same id are animated into one another on the user's screen
    text: str  # plain text after parsing and trimming; "" is the "Thinking..." placeholder
    sent_text: str | None  # the text as the bot sent it (None when it sent none)
    parse_mode: str | None
    time: float  # FakeTelegram.clock() at arrival (time.monotonic() unless a test set a clock)
    entities: list[dict] = field(default_factory=list)
    message_thread_id: int | None = None


@dataclass
class CallbackQuery:
    id: str
    chat_id: int
    user_id: int
    message_id: int
    data: str
    created: float
    answered: bool = False
    answer: dict | None = None  # {"text", "show_alert", "url", "cache_time"} as the bot answered
    answered_at: float | None = None


@dataclass
class ChatAction:
    chat_id: int
    action: str
    time: float


@dataclass
class StoredFile:
    file_id: str
    file_unique_id: str
    file_path: str
    data: bytes
    file_size: int


@dataclass
class _Failure:
    status: int
    description: str
    parameters: dict | None
    drop: bool
    remaining: int


class _ClientGone(Exception):
    """The client closed its call: a held getUpdates (PTB does on stop) or one cancelled mid-send."""


CLIENT_GONE = 499  # nginx's "client closed request": the status recorded for such a call


class _Poller:
    """A getUpdates request being held."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()
        self.terminated = False


# --------------------------------------------------------------------------------------------
# The stand-in


class FakeTelegram:
    """State, records and HTTP handlers of the stand-in. Serve it with ``start_fake_telegram``."""

    strict_ampersand = True
    # Every sendMessageDraft fails with 400 TEXTDRAFT_PEER_INVALID (a bot whose drafts Telegram
    # refuses), to test falling back to editMessageText.
    drafts_refused: bool = False
    draft_ttl_s: float = DRAFT_TTL_S  # a live draft disappears this long after its last update

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
        self._failures: dict[str, list[_Failure]] = {}
        self._poller: _Poller | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    # ---- test side: updates in -----------------------------------------------------------

    def add_chat(
        self,
        chat_id: int,
        *,
        chat_type: str = "private",
        title: str | None = None,
        username: str | None = None,
        first_name: str | None = None,
    ) -> dict:
        """Make a chat known (the bot can only write to chats it has seen). Returns the Chat."""
        if chat_type == "private" and chat_id <= 0:
            raise ValueError("a private chat's id is the user's id, a positive number")
        if chat_type in ("group", "supergroup", "channel") and chat_id >= 0:
            raise ValueError(f"{chat_type} chat ids are negative (supergroups and channels: -100…)")
        if chat_type not in ("private", "group", "supergroup", "channel"):
            raise ValueError(f"unknown chat type {chat_type!r}")
        with self._lock:
            chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
            if chat_type == "private":
                chat["first_name"] = first_name or f"User{chat_id}"
                if username:
                    chat["username"] = username
            else:
                chat["title"] = title or f"Chat {chat_id}"
                if username:
                    chat["username"] = username
            self._chats[chat_id] = chat
            self._messages.setdefault(chat_id, {})
            self._next_message_id.setdefault(chat_id, 1)
            return chat

    def set_language(self, user_id: int, language_code: str | None) -> None:
        """The language the user's Telegram client reports (``language_code``; None: it reports none)."""
        with self._lock:
            user = self._users.setdefault(user_id, {"id": user_id, "is_bot": False})
            user["language_code"] = language_code

    def _user(self, user_id: int, username: str | None, first_name: str | None) -> dict:
        user = dict(self._users.get(user_id) or {"id": user_id, "is_bot": False})
        user["first_name"] = first_name or user.get("first_name") or f"User{user_id}"
        if username is not None:
            user["username"] = username
        user.setdefault("username", f"user{user_id}")
        user.setdefault("language_code", "en")
        self._users[user_id] = user
        return user

    def _ensure_chat(self, chat_id: int, chat_type: str, user: dict, title: str | None = None) -> dict:
        chat = self._chats.get(chat_id)
        if chat is None or chat["type"] != chat_type:
            chat = self.add_chat(
                chat_id,
                chat_type=chat_type,
                title=title,
                username=user.get("username") if chat_type == "private" else None,
                first_name=user.get("first_name") if chat_type == "private" else None,
            )
        return chat

    def _new_message_id(self, chat_id: int) -> int:
        n = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = n + 1
        return n

    def _enqueue(self, update: dict) -> int:
        with self._lock:
            if "update_id" not in update:
                update = {"update_id": self._next_update_id, **update}
            self._next_update_id = max(self._next_update_id, update["update_id"] + 1)
            self._updates.append(update)
            self._updates.sort(key=lambda u: u["update_id"])
        self._wake_pollers()
        return update["update_id"]

    def push_message(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        chat_type: str = "private",
        username: str | None = None,
        first_name: str | None = None,
        chat_title: str | None = None,
        forward_from_bot: bool = False,
        via_bot: bool = False,
    ) -> int:
        """A user's text message; returns its update_id.

        Commands ("/start", "/help@kb_test_bot") get bot_command entities and URLs get url
        entities, as Telegram adds them. Private chats have the user's id; groups negative ids.
        ``forward_from_bot`` adds a forward_origin naming another bot; ``via_bot`` a via_bot.
        """
        if chat_type == "private" and chat_id != user_id:
            raise ValueError("in a private chat the chat id is the user's id")
        with self._lock:
            user = self._user(user_id, username, first_name)
            chat = self._ensure_chat(chat_id, chat_type, user, chat_title)
            now = int(time.time())
            entities = []
            for m in BOT_COMMAND_RE.finditer(text):
                entities.append(self._entity("bot_command", text, m.start(), m.end()))
            for m in URL_RE.finditer(text):
                entities.append(self._entity("url", text, m.start(), m.end()))
            entities.sort(key=lambda e: e["offset"])
            extra: dict[str, Any] = {}
            if forward_from_bot:
                extra["forward_origin"] = {
                    "type": "user",
                    "date": now - 60,
                    "sender_user": {
                        "id": 5000000001,
                        "is_bot": True,
                        "first_name": "Other",
                        "username": "other_bot",
                    },
                }
            if via_bot:
                extra["via_bot"] = {
                    "id": 5000000002,
                    "is_bot": True,
                    "first_name": "Inline",
                    "username": "inline_bot",
                }
            msg = StoredMessage(
                chat_id=chat_id,
                message_id=self._new_message_id(chat_id),
                date=now,
                from_bot=False,
                sender=user,
                text=text,
                sent_text=text,
                entities=entities,
                extra=extra,
            )
            self._messages[chat_id][msg.message_id] = msg
            payload = self._message_dict(msg, chat)
        return self._enqueue({"message": payload})

    @staticmethod
    def _entity(kind: str, text: str, start: int, end: int) -> dict:
        return {"type": kind, "offset": utf16_len(text[:start]), "length": utf16_len(text[start:end])}

    def push_callback(
        self,
        chat_id: int,
        user_id: int,
        message_id: int,
        data: str,
        *,
        username: str | None = None,
        first_name: str | None = None,
        inaccessible: bool = False,
    ) -> str:
        """A tap on an inline button of message ``message_id``; returns the callback_query_id.

        The update carries the stored message as it is now (text, entities, reply_markup). ``data``
        is sent as given, so forged data can be tested. ``inaccessible`` sends the message as
        Telegram does for old ones (date 0, PTB's InaccessibleMessage).
        """
        with self._lock:
            msg = self._messages.get(chat_id, {}).get(message_id)
            if msg is None or msg.deleted:
                raise KeyError(f"no message {message_id} in chat {chat_id} to press a button on")
            user = self._user(user_id, username, first_name)
            chat = self._chats[chat_id]
            self._next_callback += 1
            qid = str(4_000_000_000_000_000_000 + self._next_callback)
            self._callbacks[qid] = CallbackQuery(qid, chat_id, user_id, message_id, data, time.monotonic())
            message = (
                {"message_id": message_id, "date": 0, "chat": chat}
                if inaccessible
                else self._message_dict(msg, chat)
            )
            query = {
                "id": qid,
                "from": user,
                "message": message,
                "chat_instance": str(-(8_000_000_000_000_000_000 + abs(chat_id))),
                "data": data,
            }
        self._enqueue({"callback_query": query})
        return qid

    def push_document(
        self,
        chat_id: int,
        user_id: int,
        file_name: str,
        data: bytes,
        mime_type: str,
        *,
        caption: str | None = None,
        chat_type: str = "private",
        username: str | None = None,
        file_size: int | None = None,
    ) -> int:
        """A user sends a file; returns the update_id. getFile then gives a file_path that serves
        ``data``. ``file_size`` overrides the announced size (e.g. to test the 20 MB refusal
        without making 20 MB)."""
        if chat_type == "private" and chat_id != user_id:
            raise ValueError("in a private chat the chat id is the user's id")
        ext = mimetypes.guess_extension(mime_type) or ""
        if "." in file_name:
            ext = "." + file_name.rsplit(".", 1)[1]
        with self._lock:
            stored = self._store_file(data, "documents", ext, "Document", file_size)
        document = {
            "file_name": file_name,
            "mime_type": mime_type,
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size,
        }
        return self._push_media(
            chat_id, user_id, "document", document, caption, username, chat_type=chat_type
        )

    def _store_file(self, data: bytes, folder: str, ext: str, kind: str, file_size: int | None) -> StoredFile:
        """Keep ``data`` for getFile and the download URL (call with the lock held)."""
        self._next_file += 1
        n = self._next_file
        stored = StoredFile(
            file_id=f"AgACAgIAAxkBAAI{n:06d}fake{kind}",
            file_unique_id=f"AQAD{n:06d}",
            file_path=f"{folder}/file_{n}{ext}",
            data=bytes(data),
            file_size=len(data) if file_size is None else file_size,
        )
        self._files[stored.file_id] = stored
        self._files_by_path[stored.file_path] = stored
        return stored

    def _push_media(
        self,
        chat_id: int,
        user_id: int,
        field_name: str,
        value: object,
        caption: str | None,
        username: str | None,
        *,
        chat_type: str = "private",
    ) -> int:
        """A user message carrying one media field (document, photo, voice, audio); returns the update_id."""
        with self._lock:
            user = self._user(user_id, username, None)
            chat = self._ensure_chat(chat_id, chat_type, user)
            extra: dict[str, Any] = {field_name: value}
            if caption:
                extra["caption"] = caption
            msg = StoredMessage(
                chat_id=chat_id,
                message_id=self._new_message_id(chat_id),
                date=int(time.time()),
                from_bot=False,
                sender=user,
                text=None,
                extra=extra,
            )
            self._messages[chat_id][msg.message_id] = msg
            payload = self._message_dict(msg, chat)
        return self._enqueue({"message": payload})

    def push_photo(
        self,
        chat_id: int,
        user_id: int,
        data: bytes,
        *,
        width: int,
        height: int,
        thumbnail: bytes = b"\xff\xd8\xff\xe0 thumbnail",
        caption: str | None = None,
        username: str | None = None,
        file_size: int | None = None,
    ) -> int:
        """A user sends a photo: like Telegram, the message lists sizes smallest first (a 90-pixel
        thumbnail with its own bytes, then ``data`` at width × height); returns the update_id."""
        with self._lock:
            thumb = self._store_file(thumbnail, "photos", ".jpg", "Thumb", None)
            full = self._store_file(data, "photos", ".jpg", "Photo", file_size)
        scale = 90 / max(width, height)
        sizes = [
            {"file_id": thumb.file_id, "file_unique_id": thumb.file_unique_id, "file_size": thumb.file_size,
             "width": max(1, round(width * scale)), "height": max(1, round(height * scale))},
            {"file_id": full.file_id, "file_unique_id": full.file_unique_id, "file_size": full.file_size,
             "width": width, "height": height},
        ]  # fmt: skip
        return self._push_media(chat_id, user_id, "photo", sizes, caption, username)

    def push_voice(
        self,
        chat_id: int,
        user_id: int,
        data: bytes,
        *,
        duration: int,
        mime_type: str = "audio/ogg",
        username: str | None = None,
        file_size: int | None = None,
    ) -> int:
        """A user records a voice note (OGG/Opus on Telegram); returns the update_id."""
        with self._lock:
            stored = self._store_file(data, "voice", ".oga", "Voice", file_size)
        voice = {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "duration": duration,
                 "mime_type": mime_type, "file_size": stored.file_size}  # fmt: skip
        return self._push_media(chat_id, user_id, "voice", voice, None, username)

    def push_audio(
        self,
        chat_id: int,
        user_id: int,
        data: bytes,
        *,
        file_name: str,
        mime_type: str,
        duration: int,
        caption: str | None = None,
        username: str | None = None,
    ) -> int:
        """A user sends an audio file (shown in a music player on Telegram); returns the update_id."""
        ext = "." + file_name.rsplit(".", 1)[1] if "." in file_name else ""
        with self._lock:
            stored = self._store_file(data, "music", ext, "Audio", None)
        audio = {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "duration": duration,
                 "file_name": file_name, "mime_type": mime_type, "file_size": stored.file_size}  # fmt: skip
        return self._push_media(chat_id, user_id, "audio", audio, caption, username)

    @staticmethod
    def origin(
        kind: str,
        *,
        date: int,
        name: str = "Someone",
        username: str | None = None,
        chat_id: int = -1001234567890,
        message_id: int = 1,
        user_id: int = 9000001,
        is_bot: bool = False,
    ) -> dict:
        """A forward_origin of ``kind`` user, hidden_user, chat or channel (date: the original time)."""
        if kind == "user":
            user = {"id": user_id, "is_bot": is_bot, "first_name": name}
            if username:
                user["username"] = username
            return {"type": "user", "date": date, "sender_user": user}
        if kind == "hidden_user":
            return {"type": "hidden_user", "date": date, "sender_user_name": name}
        chat = {"id": chat_id, "type": "channel" if kind == "channel" else "supergroup", "title": name}
        if username:
            chat["username"] = username
        if kind == "chat":
            return {"type": "chat", "date": date, "sender_chat": chat}
        return {"type": "channel", "date": date, "chat": chat, "message_id": message_id}

    def push_forward(
        self,
        chat_id: int,
        user_id: int,
        *,
        origin: dict,
        text: str | None = None,
        entities: list[dict] | None = None,
        photo: tuple[bytes, int, int] | None = None,
        voice: tuple[bytes, int] | None = None,
        document: tuple[str, bytes, str] | None = None,
        caption: str | None = None,
        media_group_id: str | None = None,
    ) -> int:
        """The owner forwards a message: text (with ``entities`` as given, UTF-16 offsets), a photo
        (bytes, width, height), a voice note (bytes, seconds) or a document (name, bytes, mime);
        ``media_group_id`` puts it in an album. Returns the update_id."""
        extra: dict[str, Any] = {"forward_origin": origin}
        if media_group_id is not None:
            extra["media_group_id"] = media_group_id
        if caption:
            extra["caption"] = caption
        with self._lock:
            if photo is not None:
                data, width, height = photo
                full = self._store_file(data, "photos", ".jpg", "Photo", None)
                extra["photo"] = [{"file_id": full.file_id, "file_unique_id": full.file_unique_id,
                                   "file_size": full.file_size, "width": width, "height": height}]  # fmt: skip
            if voice is not None:
                stored = self._store_file(voice[0], "voice", ".oga", "Voice", None)
                extra["voice"] = {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
                                  "duration": voice[1], "mime_type": "audio/ogg", "file_size": stored.file_size}  # fmt: skip
            if document is not None:
                name, data, mime = document
                stored = self._store_file(data, "documents", "." + name.rsplit(".", 1)[-1], "Document", None)
                extra["document"] = {"file_name": name, "mime_type": mime, "file_id": stored.file_id,
                                     "file_unique_id": stored.file_unique_id, "file_size": stored.file_size}  # fmt: skip
            user = self._user(user_id, None, None)
            chat = self._ensure_chat(chat_id, "private", user)
            msg = StoredMessage(
                chat_id=chat_id, message_id=self._new_message_id(chat_id), date=int(time.time()),
                from_bot=False, sender=user, text=text, sent_text=text, entities=entities or [], extra=extra,
            )  # fmt: skip
            self._messages[chat_id][msg.message_id] = msg
            payload = self._message_dict(msg, chat)
        return self._enqueue({"message": payload})

    def push_reply(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        reply_to: int,
        quote: str | None = None,
        reply_to_text: str | None = None,
        reply_to_from_bot: bool = False,
    ) -> int:
        """The owner answers message ``reply_to`` of this chat with ``text`` (a command gets its
        entity); returns the update_id.

        The update's reply_to_message is the stored message as it is now (the bot's carries the
        bot as ``from``), without a reply_to_message of its own, as on Telegram. ``quote`` is the
        part of it the user highlighted: the message gets a TextQuote with its UTF-16 position in
        the replied text (0 when not found) and the formatting entities inside it.
        ``reply_to_text`` allows a ``reply_to`` the stand-in does not know (a message older than
        its memory): the reply_to_message is then a minimal one with that text, from another user
        (from the bot with ``reply_to_from_bot``).
        """
        with self._lock:
            user = self._user(user_id, None, None)
            chat = self._ensure_chat(chat_id, "private", user)
            target = self._messages[chat_id].get(reply_to)
            if target is not None and not target.deleted:
                original = self._replied_dict(target, chat)
            elif reply_to_text is not None:
                original = {
                    "message_id": reply_to,
                    "from": self.bot_user if reply_to_from_bot else dict(OLD_MESSAGE_SENDER),
                    "chat": chat,
                    "date": int(time.time()) - 30 * 86400,
                    "text": reply_to_text,
                }
                # Later messages of the chat must not take the old message's id.
                self._next_message_id[chat_id] = max(self._next_message_id.get(chat_id, 1), reply_to + 1)
            else:
                raise KeyError(f"no message {reply_to} in chat {chat_id} to reply to (pass reply_to_text)")
            entities = [
                self._entity("bot_command", text, m.start(), m.end()) for m in BOT_COMMAND_RE.finditer(text)
            ]
            extra: dict[str, Any] = {"reply_to_message": original}
            if quote is not None:
                extra["quote"] = self._text_quote(original, quote)
            msg = StoredMessage(
                chat_id=chat_id, message_id=self._new_message_id(chat_id), date=int(time.time()),
                from_bot=False, sender=user, text=text, sent_text=text, entities=entities, extra=extra,
            )  # fmt: skip
            self._messages[chat_id][msg.message_id] = msg
            payload = self._message_dict(msg, chat)
        return self._enqueue({"message": payload})

    def _replied_dict(self, msg: StoredMessage, chat: dict) -> dict:
        """A message as a reply_to_message: Telegram leaves out its own reply_to_message (and quote)."""
        out = self._message_dict(msg, chat)
        out.pop("reply_to_message", None)
        out.pop("quote", None)
        return out

    @staticmethod
    def _text_quote(original: dict, quote: str) -> dict:
        """The TextQuote of ``quote`` in the replied message (its text, else its caption)."""
        if "text" in original:
            source, source_entities = original["text"], original.get("entities") or []
        else:
            source, source_entities = original.get("caption") or "", original.get("caption_entities") or []
        found = source.find(quote) if quote else -1
        position = utf16_len(source[:found]) if found >= 0 else 0
        out: dict[str, Any] = {"text": quote, "position": position, "is_manual": True}
        if found >= 0:
            end = position + utf16_len(quote)
            kept = []
            for e in source_entities:
                start, stop = max(e["offset"], position), min(e["offset"] + e["length"], end)
                if e["type"] in QUOTE_ENTITY_TYPES and stop > start:
                    kept.append({**e, "offset": start - position, "length": stop - start})
            if kept:
                out["entities"] = kept
        return out

    def push_raw(self, update: dict) -> int:
        """Any update dict (channel_post, edited_message, my_chat_member…); update_id is added
        when missing. Returns the update_id."""
        return self._enqueue(json.loads(json.dumps(update)))

    # ---- test side: what happened ------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        retry_after: int | None = None,
        status: int | None = None,
        description: str | None = None,
        drop: bool = False,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail (before any other check).

        ``retry_after=N`` → 429 "Too Many Requests: retry after N" with parameters.retry_after;
        ``status``/``description`` → that error (e.g. 403 "Forbidden: bot was blocked by the
        user", 502 "Bad Gateway"); ``drop=True`` → the connection is closed without an answer.
        """
        if retry_after is not None:
            failure = _Failure(
                status or 429,
                description or f"Too Many Requests: retry after {retry_after}",
                {"retry_after": retry_after},
                drop,
                times,
            )
        else:
            code = status or (0 if drop else 500)
            failure = _Failure(code, description or _default_description(code), None, drop, times)
        with self._lock:
            self._failures.setdefault(method.lower(), []).append(failure)

    def calls(self, method: str | None = None) -> list[Call]:
        """Recorded requests, oldest first; only ``method``'s when given (case-insensitive)."""
        with self._lock:
            if method is None:
                return list(self._calls)
            return [c for c in self._calls if c.method.lower() == method.lower()]

    async def wait_for(self, predicate: Callable[[Call], bool] | str, timeout_s: float = 5.0) -> Call:
        """The first recorded call (earlier ones included) that matches; waits up to ``timeout_s``.

        ``predicate`` is a function of a Call or a method name. To wait for a *new* call, compare
        ``call.index`` with ``len(fake.calls())`` taken before. Raises TimeoutError.
        """
        match = (lambda c: c.method.lower() == predicate.lower()) if isinstance(predicate, str) else predicate
        deadline = time.monotonic() + timeout_s
        while True:
            for call in self.calls():
                if call.status is not None and match(call):
                    return call
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no matching Bot API call within {timeout_s}s; calls: {self._summary()}")
            await asyncio.sleep(0.005)

    async def wait_until(self, condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
        """Waits until ``condition()`` (about the stand-in's state) is true. Raises TimeoutError."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout_s}s; calls: {self._summary()}")
            await asyncio.sleep(0.005)

    def _summary(self) -> str:
        with self._lock:
            return ", ".join(f"{c.method}→{c.status}" for c in self._calls[-30:]) or "none"

    def messages(self, chat_id: int, *, include_deleted: bool = False) -> list[StoredMessage]:
        """All messages of the chat (users' and the bot's), in order."""
        with self._lock:
            found = sorted(self._messages.get(chat_id, {}).values(), key=lambda m: m.message_id)
            return [m for m in found if include_deleted or not m.deleted]

    def message(self, chat_id: int, message_id: int) -> StoredMessage:
        with self._lock:
            return self._messages[chat_id][message_id]

    def bot_messages(self, chat_id: int) -> list[StoredMessage]:
        """The bot's messages in the chat, not deleted, in order."""
        return [m for m in self.messages(chat_id) if m.from_bot]

    def sent_messages(self, chat_id: int) -> list[str]:
        """The current plain texts of the bot's messages in the chat, in order (what the user sees:
        tags stripped, entities decoded; ``bot_messages`` gives the HTML as sent)."""
        return [m.text or "" for m in self.bot_messages(chat_id)]

    def last_message(self, chat_id: int, *, from_bot: bool = True) -> StoredMessage | None:
        """The bot's latest message in the chat (any sender's with ``from_bot=False``)."""
        found = self.bot_messages(chat_id) if from_bot else self.messages(chat_id)
        return found[-1] if found else None

    def chat_actions(self, chat_id: int | None = None) -> list[ChatAction]:
        with self._lock:
            return [a for a in self._chat_actions if chat_id is None or a.chat_id == chat_id]

    def drafts(self, chat_id: int | None = None) -> list[StoredDraft]:
        """Every sendMessageDraft accepted (in ``chat_id`` when given), oldest first."""
        with self._lock:
            return [d for d in self._drafts if chat_id is None or d.chat_id == chat_id]

    def live_draft(self, chat_id: int) -> StoredDraft | None:
        """The draft the user sees in the chat now: the latest one, unless ``draft_ttl_s`` passed
        since it was last updated or the bot has sent a message (sendMessage, sendDocument) since."""
        with self._lock:
            draft = self._live_drafts.get(chat_id)
            if draft is not None and self.clock() - draft.time >= self.draft_ttl_s:
                del self._live_drafts[chat_id]
                return None
            return draft

    def callback_answer(self, callback_query_id: str) -> dict | None:
        """How the bot answered the query (text, show_alert, url, cache_time), None if not yet."""
        with self._lock:
            q = self._callbacks.get(callback_query_id)
            return dict(q.answer) if q and q.answered and q.answer is not None else None

    def callback_query(self, callback_query_id: str) -> CallbackQuery:
        with self._lock:
            return self._callbacks[callback_query_id]

    def my_commands(self, scope: dict | None = None, language_code: str = "") -> list[dict] | None:
        """Commands registered by setMyCommands for the scope (default scope when None)."""
        with self._lock:
            found = self._commands.get(self._commands_key(scope, language_code))
            return [dict(c) for c in found] if found is not None else None

    def pending_updates(self) -> list[dict]:
        """Updates not yet confirmed by a getUpdates offset."""
        with self._lock:
            return [json.loads(json.dumps(u)) for u in self._updates]

    def file(self, file_id: str) -> StoredFile:
        with self._lock:
            return self._files[file_id]

    # ---- HTTP -----------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", r"/bot{token:[^/]*}/{method:[^/]*}", self._handle_api)
        app.router.add_route("GET", r"/file/bot{token:[^/]*}/{path:.+}", self._handle_file)
        app.on_startup.append(self._on_startup)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    async def _on_shutdown(self, app: web.Application) -> None:
        poller = self._poller
        if poller is not None:
            poller.terminated = True
            poller.wake.set()

    def _wake_pollers(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._wake_now()
        else:
            loop.call_soon_threadsafe(self._wake_now)

    def _wake_now(self) -> None:
        if self._poller is not None:
            self._poller.wake.set()

    async def _read_params(self, request: web.Request) -> tuple[dict, dict]:
        """(raw, files): the request's fields as received, and uploaded files by field."""
        raw: dict[str, Any] = dict(request.query)
        files: dict[str, tuple[str, bytes]] = {}
        if request.method in ("GET", "HEAD"):
            return raw, files
        ctype = request.headers.get("Content-Type", "")
        if ctype.startswith("application/json"):
            body = await request.read()
            if body.strip():
                try:
                    obj = json.loads(body)
                except ValueError:
                    raise bad_request("can't parse JSON request body") from None
                if not isinstance(obj, dict):
                    raise bad_request("JSON request body must be an object")
                raw.update(obj)
        elif ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    files[key] = (value.filename, value.file.read())
                    raw[key] = f"<file {value.filename}>"
                else:
                    raw[key] = value
        else:
            await request.read()
        return raw, files

    @staticmethod
    def _decode(raw: dict) -> dict:
        params: dict[str, Any] = {}
        for key, value in raw.items():
            if key in JSON_FIELDS and isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    what = "reply keyboard markup" if key == "reply_markup" else key
                    raise bad_request(f"can't parse {what} JSON object") from None
            elif key in INT_FIELDS and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    value = int(value)
            elif key in FLOAT_FIELDS and isinstance(value, str):
                try:
                    value = float(value)
                    value = int(value) if value.is_integer() else value
                except ValueError:
                    raise bad_request(f"wrong parameter {key} in request") from None
            elif key in BOOL_FIELDS and isinstance(value, str):
                value = value.lower() in ("true", "1")
            params[key] = value
        return params

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        method = request.match_info["method"]
        with self._lock:
            call = Call(
                index=len(self._calls),
                method=method,
                params={},
                raw={},
                http_method=request.method,
                content_type=request.headers.get("Content-Type"),
                time=time.monotonic(),
            )
            self._calls.append(call)
        try:
            try:
                try:
                    raw, files = await self._read_params(request)
                except ConnectionResetError:  # the client hung up while sending (a cancelled call)
                    raise _ClientGone from None
                call.raw = raw
                call.params = self._decode(raw)
                if files:
                    call.params["_files"] = {k: v[0] for k, v in files.items()}
                    call.params["_uploads"] = files  # (file name, bytes) by field, for sendDocument
                if not TOKEN_RE.match(token):
                    raise ApiError(404, "Not Found")
                if token != self.token:
                    raise ApiError(401, "Unauthorized")
                handler = _HANDLERS.get(method.lower())
                if handler is None and method.lower() != "getupdates":
                    raise ApiError(404, "Not Found")
                failure = self._take_failure(method)
                if failure is not None:
                    if failure.drop:
                        call.status, call.response = 0, {"dropped": True}
                        if request.transport is not None:
                            request.transport.close()
                        return web.Response(status=200)
                    raise ApiError(failure.status, failure.description, failure.parameters)
                if handler is None:  # getUpdates, the one method that waits
                    result = await self._get_updates(call.params, request)
                else:
                    with self._lock:
                        result = handler(self, call.params)
                body: dict[str, Any] = {"ok": True, "result": result}
                status = 200
            except ApiError as exc:
                body, status = exc.body(), exc.status
            except _ClientGone:
                call.status, call.response = CLIENT_GONE, {"client_gone": True}
                return web.Response(status=CLIENT_GONE)
        except Exception as exc:  # a bug in the stand-in: answer like Telegram's 500 and keep it
            self.errors.append(exc)
            body, status = {"ok": False, "error_code": 500, "description": "Internal Server Error"}, 500
        call.response, call.status = body, status
        return web.json_response(body, status=status)

    def _take_failure(self, method: str) -> _Failure | None:
        with self._lock:
            queue = self._failures.get(method.lower())
            if not queue:
                return None
            failure = queue[0]
            failure.remaining -= 1
            if failure.remaining <= 0:
                queue.pop(0)
            return failure

    async def _handle_file(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        path = request.match_info["path"]
        with self._lock:
            stored = self._files_by_path.get(path)
            self.downloads.append(path)
        if token != self.token:
            return web.json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401
            )
        if stored is None:
            return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)
        return web.Response(body=stored.data, content_type="application/octet-stream")

    # ---- methods ----------------------------------------------------------------------------

    async def _get_updates(self, params: dict, request: web.Request) -> list[dict]:
        if self.webhook_url:
            raise ApiError(409, CONFLICT_WEBHOOK)
        previous, me = self._poller, _Poller()
        if previous is not None:  # Telegram ends the older request
            previous.terminated = True
            previous.wake.set()
        self._poller = me
        try:
            offset = int(params.get("offset") or 0)
            limit = int(params.get("limit") or 100)
            limit = min(max(limit, 1), 100)
            timeout = max(float(params.get("timeout") or 0), 0.0)
            allowed = params.get("allowed_updates")
            with self._lock:
                if allowed is not None:
                    if not isinstance(allowed, list):
                        raise bad_request("can't parse allowed updates")
                    self.allowed_updates = [str(a) for a in allowed]
                self._confirm(offset)
            deadline = time.monotonic() + timeout
            while True:
                with self._lock:
                    batch = self._select(limit)
                remaining = deadline - time.monotonic()
                if batch or remaining <= 0:
                    return batch
                me.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(me.wake.wait(), min(remaining, 0.05))
                if me.terminated:
                    # A client that gave up on this poll (PTB cancels it on stop) and then polled
                    # again has closed the connection: let the close arrive before answering.
                    await asyncio.sleep(0.02)
                    if _gone(request):
                        raise _ClientGone
                    raise ApiError(409, CONFLICT_OTHER_POLL)
                if _gone(request):
                    raise _ClientGone
        finally:
            if self._poller is me:
                self._poller = None

    def _confirm(self, offset: int) -> None:
        if offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        elif offset < 0:
            self._updates = self._updates[offset:]

    def _select(self, limit: int) -> list[dict]:
        allowed = self.allowed_updates
        keep = []
        for update in self._updates:
            kind = next((k for k in update if k != "update_id"), None)
            if allowed:
                ok = kind in allowed
            else:
                ok = kind not in DEFAULT_EXCLUDED_UPDATES
            if ok:
                keep.append(update)
        self._updates = keep  # updates of types not asked for are not delivered at all
        return [json.loads(json.dumps(u)) for u in keep[:limit]]

    def _get_me(self, params: dict) -> dict:
        return dict(self.bot_user)

    def _delete_webhook(self, params: dict) -> bool:
        self.webhook_url = None
        if params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    def _set_webhook(self, params: dict) -> bool:
        self.webhook_url = str(params.get("url") or "") or None
        return True

    def _chat(self, params: dict) -> dict:
        chat_id = params.get("chat_id")
        if chat_id in (None, ""):
            raise bad_request("chat_id is empty")
        if isinstance(chat_id, str):
            found = next((c for c in self._chats.values() if "@" + c.get("username", "") == chat_id), None)
        else:
            found = self._chats.get(chat_id)
        if found is None:
            raise bad_request("chat not found")
        return found

    def _markup(self, params: dict) -> dict | None:
        markup = params.get("reply_markup")
        if markup is None:
            return None
        if not isinstance(markup, dict):
            raise bad_request("can't parse reply keyboard markup JSON object")
        if "inline_keyboard" in markup:
            rows = markup["inline_keyboard"]
            if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
                raise bad_request(
                    "can't parse inline keyboard button: InlineKeyboardButton must be an Object"
                )
            for row in rows:
                for button in row:
                    if not isinstance(button, dict) or not isinstance(button.get("text"), str):
                        raise bad_request("can't parse inline keyboard button: Text must be a String")
                    if not any(k in button for k in INLINE_BUTTON_ACTIONS):
                        raise bad_request("text buttons are unallowed in the inline keyboard")
                    if "callback_data" in button:
                        data = button["callback_data"]
                        size = len(data.encode("utf-8")) if isinstance(data, str) else 0
                        if not 1 <= size <= MAX_CALLBACK_DATA_BYTES:
                            raise bad_request("BUTTON_DATA_INVALID")
            if not any(rows):
                return None  # an empty inline keyboard is no keyboard
        return markup

    def _text(self, params: dict) -> tuple[str, list[dict]]:
        text = params.get("text")
        if text is None or text == "":
            raise bad_request("message text is empty")
        return format_text(
            str(text),
            params.get("parse_mode"),
            params.get("entities"),
            strict_ampersand=self.strict_ampersand,
        )

    def _message_dict(self, msg: StoredMessage, chat: dict) -> dict:
        out: dict[str, Any] = {
            "message_id": msg.message_id,
            "from": self.bot_user if msg.from_bot else msg.sender,
            "chat": chat,
            "date": msg.date,
        }
        if msg.edit_date is not None:
            out["edit_date"] = msg.edit_date
        if msg.text is not None:
            out["text"] = msg.text
            if msg.entities:
                out["entities"] = msg.entities
        if msg.document is not None:
            out["document"] = msg.document
        if msg.link_preview_options:
            out["link_preview_options"] = msg.link_preview_options
        if msg.reply_markup and "inline_keyboard" in msg.reply_markup:
            out["reply_markup"] = msg.reply_markup
        out.update(msg.extra)
        return json.loads(json.dumps(out))

    def _send_message(self, params: dict) -> dict:
        chat = self._chat(params)
        markup = self._markup(params)
        plain, entities = self._text(params)
        extra: dict[str, Any] = {}
        reply = params.get("reply_parameters")
        if reply is None and params.get("reply_to_message_id"):
            reply = {"message_id": params["reply_to_message_id"]}
        if reply:
            target = self._messages[chat["id"]].get(int(reply.get("message_id") or 0))
            if target is not None and not target.deleted:
                extra["reply_to_message"] = self._replied_dict(target, chat)
            elif not reply.get("allow_sending_without_reply") and not params.get(
                "allow_sending_without_reply"
            ):
                raise bad_request("message to be replied not found")
        return self._bot_message(
            chat,
            text=plain,
            sent_text=str(params["text"]),
            parse_mode=params.get("parse_mode"),
            entities=entities,
            reply_markup=markup,
            link_preview_options=params.get("link_preview_options"),
            disable_web_page_preview=params.get("disable_web_page_preview"),
            extra=extra,
        )

    def _bot_message(self, chat: dict, **fields: Any) -> dict:
        """A new message from the bot in ``chat``, kept; the Message the API answers with."""
        msg = StoredMessage(
            chat_id=chat["id"],
            message_id=self._new_message_id(chat["id"]),
            date=int(time.time()),
            from_bot=True,
            sender=self.bot_user,
            **fields,
        )
        self._messages[chat["id"]][msg.message_id] = msg
        self._live_drafts.pop(chat["id"], None)  # a normal message replaces the draft
        return self._message_dict(msg, chat)

    def _send_message_draft(self, params: dict) -> bool:
        """A partial message streamed to a private chat: kept as a StoredDraft, not a message."""
        if self.drafts_refused:
            raise bad_request(DRAFT_PEER_INVALID)
        chat = self._chat(params)
        if chat["type"] != "private":
            raise bad_request(DRAFT_PEER_INVALID)
        draft_id = params.get("draft_id")
        if not isinstance(draft_id, int) or isinstance(draft_id, bool) or draft_id == 0:
            raise bad_request(DRAFT_ID_INVALID)
        text = params.get("text")
        plain, entities = format_text(
            "" if text is None else str(text),
            params.get("parse_mode"),
            params.get("entities"),
            strict_ampersand=self.strict_ampersand,
            allow_empty=True,  # an empty draft shows "Thinking..."
        )
        thread = params.get("message_thread_id")
        draft = StoredDraft(
            chat_id=chat["id"],
            draft_id=draft_id,
            text=plain,
            sent_text=None if text is None else str(text),
            parse_mode=params.get("parse_mode"),
            time=self.clock(),
            entities=entities,
            message_thread_id=thread if isinstance(thread, int) else None,
        )
        self._drafts.append(draft)
        self._live_drafts[chat["id"]] = draft
        return True

    def _send_document(self, params: dict) -> dict:
        """A file uploaded by the bot (multipart), kept like a user's upload so a test can read it back."""
        chat = self._chat(params)
        upload = params.get("_uploads", {}).get("document")
        if upload is None:
            raise bad_request("there is no document in the request")  # a file_id or URL: not served here
        name, data = upload
        if not data:
            raise bad_request("file must be non-empty")
        if len(data) > 50 * 1024 * 1024:
            raise ApiError(413, "Request Entity Too Large")
        stored = self._store_file(data, "documents", Path(name or "").suffix, "document", None)
        caption = params.get("caption")
        plain, entities = (
            format_text(str(caption), params.get("parse_mode"), params.get("caption_entities"),
                        strict_ampersand=self.strict_ampersand)
            if caption else (None, [])
        )  # fmt: skip
        extra: dict[str, Any] = {}
        if plain:
            extra["caption"] = plain
            if entities:
                extra["caption_entities"] = entities
        return self._bot_message(
            chat, text=None, reply_markup=self._markup(params), extra=extra,
            document={"file_id": stored.file_id, "file_unique_id": stored.file_unique_id,
                      "file_name": name, "file_size": stored.file_size},
        )  # fmt: skip

    def _message_to_edit(self, params: dict) -> tuple[dict, StoredMessage]:
        if params.get("inline_message_id"):
            raise bad_request("message to edit not found")  # the stand-in keeps no inline messages
        chat = self._chat(params)
        message_id = params.get("message_id")
        if message_id in (None, ""):
            raise bad_request("message identifier is not specified")
        msg = self._messages[chat["id"]].get(message_id) if isinstance(message_id, int) else None
        if msg is None or msg.deleted:
            raise bad_request("message to edit not found")
        if not msg.from_bot:
            raise bad_request("message can't be edited")
        return chat, msg

    def _edit_message_text(self, params: dict) -> dict:
        chat, msg = self._message_to_edit(params)
        markup = self._markup(params)
        plain, entities = self._text(params)
        if msg.text is None:
            raise bad_request("there is no text in the message to edit")
        if plain == msg.text and entities == msg.entities and markup == msg.reply_markup:
            raise bad_request(NOT_MODIFIED)
        msg.history.append(msg.text)
        msg.text, msg.entities, msg.reply_markup = plain, entities, markup
        msg.sent_text, msg.parse_mode = str(params["text"]), params.get("parse_mode")
        if "link_preview_options" in params:
            msg.link_preview_options = params["link_preview_options"]
        msg.edit_date = int(time.time())
        return self._message_dict(msg, chat)

    def _edit_message_reply_markup(self, params: dict) -> dict:
        chat, msg = self._message_to_edit(params)
        markup = self._markup(params)
        if markup == msg.reply_markup:
            raise bad_request(NOT_MODIFIED)
        msg.reply_markup = markup
        msg.edit_date = int(time.time())
        return self._message_dict(msg, chat)

    def _delete_message(self, params: dict) -> bool:
        chat = self._chat(params)
        msg = self._messages[chat["id"]].get(params.get("message_id"))
        if msg is None or msg.deleted:
            raise bad_request("message to delete not found")
        msg.deleted = True
        return True

    def _answer_callback_query(self, params: dict) -> bool:
        qid = str(params.get("callback_query_id") or "")
        q = self._callbacks.get(qid)
        expired = (
            q is not None
            and self.callback_expiry_s is not None
            and time.monotonic() - q.created > self.callback_expiry_s
        )
        if q is None or q.answered or expired:
            raise bad_request(QUERY_TOO_OLD)
        text = params.get("text")
        if text is not None and len(str(text)) > MAX_CALLBACK_ANSWER_TEXT:
            raise bad_request("MESSAGE_TOO_LONG")
        q.answered = True
        q.answered_at = time.monotonic()
        q.answer = {
            "text": text,
            "show_alert": bool(params.get("show_alert", False)),
            "url": params.get("url"),
            "cache_time": params.get("cache_time"),
        }
        return True

    def _send_chat_action(self, params: dict) -> bool:
        chat = self._chat(params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise bad_request("wrong parameter action in request")
        self._chat_actions.append(ChatAction(chat["id"], action, time.monotonic()))
        return True

    @staticmethod
    def _commands_key(scope: dict | None, language_code: str | None) -> str:
        return json.dumps([scope or {"type": "default"}, language_code or ""], sort_keys=True)

    def _set_my_commands(self, params: dict) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise bad_request("can't parse commands JSON object")
        if len(commands) > 100:
            raise bad_request("too many commands")
        for command in commands:
            if not isinstance(command, dict) or not COMMAND_RE.match(str(command.get("command", ""))):
                raise bad_request("BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description", "")).strip()) <= 256:
                raise bad_request("command description must be non-empty")
        key = self._commands_key(params.get("scope"), params.get("language_code"))
        self._commands[key] = [{"command": c["command"], "description": c["description"]} for c in commands]
        return True

    def _get_my_commands(self, params: dict) -> list[dict]:
        return list(
            self._commands.get(self._commands_key(params.get("scope"), params.get("language_code")), [])
        )

    def _delete_my_commands(self, params: dict) -> bool:
        self._commands.pop(self._commands_key(params.get("scope"), params.get("language_code")), None)
        return True

    def _get_file(self, params: dict) -> dict:
        stored = self._files.get(str(params.get("file_id") or ""))
        if stored is None:
            raise bad_request("invalid file_id")
        if stored.file_size > MAX_DOWNLOAD_BYTES:
            raise bad_request("file is too big")
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size,
            "file_path": stored.file_path,
        }


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _default_description(status: int) -> str:
    return {
        0: "connection dropped",
        400: "Bad Request",
        403: "Forbidden: bot was blocked by the user",
        409: "Conflict",
        500: "Internal Server Error",
        502: "Bad Gateway",
    }.get(status, "Error")


_HANDLERS: dict[str, Callable[[FakeTelegram, dict], Any]] = {
    "getme": FakeTelegram._get_me,
    "deletewebhook": FakeTelegram._delete_webhook,
    "setwebhook": FakeTelegram._set_webhook,
    "sendmessage": FakeTelegram._send_message,
    "sendmessagedraft": FakeTelegram._send_message_draft,
    "senddocument": FakeTelegram._send_document,
    "editmessagetext": FakeTelegram._edit_message_text,
    "editmessagereplymarkup": FakeTelegram._edit_message_reply_markup,
    "deletemessage": FakeTelegram._delete_message,
    "answercallbackquery": FakeTelegram._answer_callback_query,
    "sendchataction": FakeTelegram._send_chat_action,
    "setmycommands": FakeTelegram._set_my_commands,
    "getmycommands": FakeTelegram._get_my_commands,
    "deletemycommands": FakeTelegram._delete_my_commands,
    "getfile": FakeTelegram._get_file,
}


async def serve(fake: FakeTelegram) -> web.AppRunner:
    """Serve ``fake`` on a free port of 127.0.0.1 in the running loop; sets its base URLs."""
    runner, port = await serve_app(fake.app(), shutdown_timeout=2.0)
    fake.base_url = f"http://127.0.0.1:{port}/bot"
    fake.base_file_url = f"http://127.0.0.1:{port}/file/bot"
    return runner


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
