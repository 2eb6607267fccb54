"""The Bot API methods the stand-in answers (all but getUpdates), and the table that names them."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fake_telegram.errors import (
    DRAFT_ID_INVALID,
    DRAFT_PEER_INVALID,
    NOT_MODIFIED,
    QUERY_TOO_OLD,
    ApiError,
    bad_request,
)
from tests.fake_telegram.records import ChatAction, StoredDraft, StoredMessage, commands_key
from tests.fake_telegram.text import format_text

MAX_CALLBACK_DATA_BYTES = 64
MAX_CALLBACK_ANSWER_TEXT = 200
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024

COMMAND_RE = re.compile(r"^[a-z0-9_]{1,32}$")

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


class Methods:
    """FakeTelegram's answers to the bot: one method per Bot API method, called with the lock held."""

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

    def _format(
        self, params: dict, text: str, entities_field: str, *, allow_empty: bool = False
    ) -> tuple[str, list[dict]]:
        """``text`` with the call's parse_mode (or its ``entities_field``) as Telegram stores it."""
        return format_text(
            text,
            params.get("parse_mode"),
            params.get(entities_field),
            strict_ampersand=self.strict_ampersand,
            allow_empty=allow_empty,
            length_in_utf16=self.length_in_utf16,
        )

    def _text(self, params: dict) -> tuple[str, list[dict]]:
        text = params.get("text")
        if text is None or text == "":
            raise bad_request("message text is empty")
        return self._format(params, str(text), "entities")

    def _send_message(self, params: dict) -> dict:
        chat = self._chat(params)
        markup = self._markup(params)
        plain, entities = self._text(params)
        extra: dict[str, Any] = {}
        reply = params.get("reply_parameters")
        if reply is None and params.get("reply_to_message_id"):
            reply = {"message_id": params["reply_to_message_id"]}
        if reply:
            target = self._live_message(chat["id"], int(reply.get("message_id") or 0))
            if target is not None:
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
        msg = self._add_message(chat, from_bot=True, sender=self.bot_user, **fields)
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
        plain, entities = self._format(
            params,
            "" if text is None else str(text),
            "entities",
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
        plain, entities = self._format(params, str(caption), "caption_entities") if caption else (None, [])
        extra: dict[str, Any] = {}
        if plain:
            extra["caption"] = plain
            if entities:
                extra["caption_entities"] = entities
        return self._bot_message(
            chat,
            text=None,
            reply_markup=self._markup(params),
            extra=extra,
            document=stored.fields(file_name=name),
        )

    def _message_to_edit(self, params: dict) -> tuple[dict, StoredMessage]:
        if params.get("inline_message_id"):
            raise bad_request("message to edit not found")  # the stand-in keeps no inline messages
        chat = self._chat(params)
        message_id = params.get("message_id")
        if message_id in (None, ""):
            raise bad_request("message identifier is not specified")
        msg = self._live_message(chat["id"], message_id) if isinstance(message_id, int) else None
        if msg is None:
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
        msg = self._live_message(chat["id"], params.get("message_id"))
        if msg is None:
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
    def _commands_key(params: dict) -> str:
        return commands_key(params.get("scope"), params.get("language_code"))

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
        key = self._commands_key(params)
        self._commands[key] = [{"command": c["command"], "description": c["description"]} for c in commands]
        return True

    def _get_my_commands(self, params: dict) -> list[dict]:
        return list(self._commands.get(self._commands_key(params), []))

    def _delete_my_commands(self, params: dict) -> bool:
        self._commands.pop(self._commands_key(params), None)
        return True

    def _get_file(self, params: dict) -> dict:
        stored = self._files.get(str(params.get("file_id") or ""))
        if stored is None:
            raise bad_request("invalid file_id")
        if stored.file_size > MAX_DOWNLOAD_BYTES:
            raise bad_request("file is too big")
        return stored.fields(file_path=stored.file_path)


# The methods by lowercased name, as the server looks them up (getUpdates, which waits, is its own).
HANDLERS: dict[str, Callable[[Any, dict], Any]] = {
    "getme": Methods._get_me,
    "deletewebhook": Methods._delete_webhook,
    "setwebhook": Methods._set_webhook,
    "sendmessage": Methods._send_message,
    "sendmessagedraft": Methods._send_message_draft,
    "senddocument": Methods._send_document,
    "editmessagetext": Methods._edit_message_text,
    "editmessagereplymarkup": Methods._edit_message_reply_markup,
    "deletemessage": Methods._delete_message,
    "answercallbackquery": Methods._answer_callback_query,
    "sendchataction": Methods._send_chat_action,
    "setmycommands": Methods._set_my_commands,
    "getmycommands": Methods._get_my_commands,
    "deletemycommands": Methods._delete_my_commands,
    "getfile": Methods._get_file,
}
