"""What the stand-in keeps (calls, messages, drafts, callback queries, files) and the test's view of it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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

    def fields(self, **more: Any) -> dict:
        """The file as a Message carries it (file_id, file_unique_id, file_size), with ``more``."""
        return {
            "file_id": self.file_id,
            "file_unique_id": self.file_unique_id,
            "file_size": self.file_size,
            **more,
        }


def commands_key(scope: dict | None, language_code: str | None) -> str:
    """Where setMyCommands keeps a list: by scope (default when None) and language."""
    return json.dumps([scope or {"type": "default"}, language_code or ""], sort_keys=True)


class Records:
    """FakeTelegram's records and the test's queries on them (the stores are made in its __init__)."""

    # ---- keeping -----------------------------------------------------------------------------

    def _new_message_id(self, chat_id: int) -> int:
        n = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = n + 1
        return n

    def _add_message(self, chat: dict, *, date: int | None = None, **fields: Any) -> StoredMessage:
        """A new message in ``chat`` with the chat's next id, kept (call with the lock held)."""
        msg = StoredMessage(
            chat_id=chat["id"],
            message_id=self._new_message_id(chat["id"]),
            date=int(time.time()) if date is None else date,
            **fields,
        )
        self._messages[chat["id"]][msg.message_id] = msg
        return msg

    def _live_message(self, chat_id: int, message_id: Any) -> StoredMessage | None:
        """The message ``message_id`` of the chat, None when there is none or it was deleted."""
        msg = self._messages.get(chat_id, {}).get(message_id)
        return None if msg is None or msg.deleted else msg

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

    def _message_dict(self, msg: StoredMessage, chat: dict) -> dict:
        """``msg`` as a Message of the API (a copy: JSON in, JSON out)."""
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

    def _replied_dict(self, msg: StoredMessage, chat: dict) -> dict:
        """A message as a reply_to_message: Telegram leaves out its own reply_to_message (and quote)."""
        out = self._message_dict(msg, chat)
        out.pop("reply_to_message", None)
        out.pop("quote", None)
        return out

    # ---- test side: what happened ------------------------------------------------------------

    def calls(self, method: str | None = None) -> list[Call]:
        """Recorded requests, oldest first; only ``method``'s when given (case-insensitive)."""
        with self._lock:
            if method is None:
                return list(self._calls)
            return [c for c in self._calls if c.method.lower() == method.lower()]

    async def wait_for(self, predicate: Callable[[Call], bool] | str, timeout_s: float = 60.0) -> Call:
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

    async def wait_until(self, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
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
            found = self._commands.get(commands_key(scope, language_code))
            return [dict(c) for c in found] if found is not None else None

    def pending_updates(self) -> list[dict]:
        """Updates not yet confirmed by a getUpdates offset."""
        with self._lock:
            return [json.loads(json.dumps(u)) for u in self._updates]

    def file(self, file_id: str) -> StoredFile:
        with self._lock:
            return self._files[file_id]
