"""Who may talk to the bot: the owner's numeric user ids, in their own private chat with it, in person.

Served update types are listed, not excluded: a new kind Telegram adds (business messages,
guest messages…) is refused until someone decides to serve it.
"""

from __future__ import annotations

from collections.abc import Collection

from telegram import Update

# Messages and button taps; edits are let through only to be told they are not answered again.
SERVED_KINDS = ("message", "edited_message", "callback_query")


def update_kind(update: Update) -> str:
    """Which field of the update is set (message, business_message, callback_query…)."""
    for name in Update.__slots__:
        if not name.startswith("_") and name != "update_id" and getattr(update, name, None) is not None:
            return name
    return "unknown"


def refusal(update: Update, allowed_users: Collection[int]) -> str | None:
    """Why this update must be ignored, or None when it comes from an allowed user in a private chat.

    Keyed on the numeric user id (a username can change hands); groups, channels, updates
    with no user, messages relayed through another bot and forwards of a bot's messages are
    all refused.
    """
    kind = update_kind(update)
    if kind not in SERVED_KINDS:
        return f"{kind} updates are not served"
    user = update.effective_user
    chat = update.effective_chat
    if user is None:
        return "no user (channel post or service update)"
    if user.id not in allowed_users:
        return "user not allowed"
    if chat is None or chat.type != "private":
        return "not a private chat"
    if chat.id != user.id:  # the owner's own chat with the bot has the owner's id, no other chat does
        return "not the owner's own chat with the bot"
    message = update.effective_message
    if message is not None:
        if message.via_bot is not None:
            return "sent through another bot"
        origin = message.forward_origin
        sender = getattr(origin, "sender_user", None) if origin is not None else None
        if sender is not None and sender.is_bot:
            return "forwarded from a bot"
        if message.sender_chat is not None:
            return "sent on behalf of a chat"
    return None
