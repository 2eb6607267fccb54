"""The updates the stand-in hands out: users' messages, button taps, files, forwards and replies."""

from __future__ import annotations

import json
import mimetypes
import re
import time
from typing import Any

from tests.fake_telegram.records import CallbackQuery
from tests.fake_telegram.text import clip_entities, utf16_len

# A command in a user's text, as clients and the server mark it: "/cmd" or "/cmd@botname".
BOT_COMMAND_RE = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?")
URL_RE = re.compile(r"https?://[^\s<>\"']+")
# The sender push_reply gives a replied message the stand-in does not know.
OLD_MESSAGE_SENDER = {"id": 9000002, "is_bot": False, "first_name": "Someone", "username": "someone"}
# The entity types Telegram keeps in a reply's quote (Bot API, TextQuote.entities).
QUOTE_ENTITY_TYPES = frozenset({"bold", "italic", "underline", "strikethrough", "spoiler", "custom_emoji"})


def _marked(kind: str, pattern: re.Pattern[str], text: str) -> list[dict]:
    """An entity of ``kind`` for every match of ``pattern`` in ``text`` (UTF-16 offsets)."""
    return [
        {"type": kind, "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
        for m in pattern.finditer(text)
    ]


def _extension(file_name: str, default: str) -> str:
    """The ".ext" of ``file_name``, ``default`` when it has none."""
    return "." + file_name.rsplit(".", 1)[1] if "." in file_name else default


class Updates:
    """FakeTelegram's test side, updates in: chats and users, and what they send the bot."""

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

    def _enqueue(self, update: dict) -> int:
        with self._lock:
            if "update_id" not in update:
                update = {"update_id": self._next_update_id, **update}
            self._next_update_id = max(self._next_update_id, update["update_id"] + 1)
            self._updates.append(update)
            self._updates.sort(key=lambda u: u["update_id"])
        self._wake_pollers()
        return update["update_id"]

    def _user_message(
        self,
        chat: dict,
        user: dict,
        text: str | None,
        *,
        entities: list[dict] | None = None,
        extra: dict,
        date: int | None = None,
    ) -> dict:
        """A user's message in ``chat``, kept; the Message its update carries (call with the lock held)."""
        msg = self._add_message(
            chat,
            date=date,
            from_bot=False,
            sender=user,
            text=text,
            sent_text=text,
            entities=entities or [],
            extra=extra,
        )
        return self._message_dict(msg, chat)

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
            entities = _marked("bot_command", BOT_COMMAND_RE, text) + _marked("url", URL_RE, text)
            entities.sort(key=lambda e: e["offset"])
            extra: dict[str, Any] = {}
            if forward_from_bot:
                extra["forward_origin"] = self.origin(
                    "user", date=now - 60, name="Other", username="other_bot", user_id=5000000001, is_bot=True
                )
            if via_bot:
                extra["via_bot"] = {
                    "id": 5000000002,
                    "is_bot": True,
                    "first_name": "Inline",
                    "username": "inline_bot",
                }
            payload = self._user_message(chat, user, text, entities=entities, extra=extra, date=now)
        return self._enqueue({"message": payload})

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
            msg = self._live_message(chat_id, message_id)
            if msg is None:
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

    def _document(self, file_name: str, data: bytes, mime_type: str, ext: str, file_size: int | None) -> dict:
        """A Document for ``data``, kept for getFile."""
        with self._lock:
            stored = self._store_file(data, "documents", ext, "Document", file_size)
        return {"file_name": file_name, "mime_type": mime_type, **stored.fields()}

    def _voice(self, data: bytes, duration: int, mime_type: str, file_size: int | None) -> dict:
        """A Voice for ``data``, kept for getFile."""
        with self._lock:
            stored = self._store_file(data, "voice", ".oga", "Voice", file_size)
        return stored.fields(duration=duration, mime_type=mime_type)

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
        ext = _extension(file_name, mimetypes.guess_extension(mime_type) or "")
        document = self._document(file_name, data, mime_type, ext, file_size)
        return self._push_media(
            chat_id, user_id, "document", document, caption, username, chat_type=chat_type
        )

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
            payload = self._user_message(chat, user, None, extra=extra)
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
            thumb.fields(width=max(1, round(width * scale)), height=max(1, round(height * scale))),
            full.fields(width=width, height=height),
        ]
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
        voice = self._voice(data, duration, mime_type, file_size)
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
        with self._lock:
            stored = self._store_file(data, "music", _extension(file_name, ""), "Audio", None)
        audio = stored.fields(duration=duration, file_name=file_name, mime_type=mime_type)
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
                extra["photo"] = [full.fields(width=width, height=height)]
            if voice is not None:
                extra["voice"] = self._voice(voice[0], voice[1], "audio/ogg", None)
            if document is not None:
                name, data, mime = document
                extra["document"] = self._document(name, data, mime, "." + name.rsplit(".", 1)[-1], None)
            user = self._user(user_id, None, None)
            chat = self._ensure_chat(chat_id, "private", user)
            payload = self._user_message(chat, user, text, entities=entities, extra=extra)
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
            target = self._live_message(chat_id, reply_to)
            if target is not None:
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
            extra: dict[str, Any] = {"reply_to_message": original}
            if quote is not None:
                extra["quote"] = self._text_quote(original, quote)
            entities = _marked("bot_command", BOT_COMMAND_RE, text)
            payload = self._user_message(chat, user, text, entities=entities, extra=extra)
        return self._enqueue({"message": payload})

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
            inside = clip_entities(source_entities, position, position + utf16_len(quote))
            kept = [e for e in inside if e["type"] in QUOTE_ENTITY_TYPES]
            if kept:
                out["entities"] = kept
        return out

    def push_raw(self, update: dict) -> int:
        """Any update dict (channel_post, edited_message, my_chat_member…); update_id is added
        when missing. Returns the update_id."""
        return self._enqueue(json.loads(json.dumps(update)))
