"""Who may talk to the bot: the owner's numeric user ids, in a private chat, in person."""

from __future__ import annotations

from collections.abc import Collection

from telegram import Update


def refusal(update: Update, allowed_users: Collection[int]) -> str | None:
    """Why this update must be ignored, or None when it comes from an allowed user in a private chat.

    Keyed on the numeric user id (a username can change hands); groups, channels, updates
    with no user, messages relayed through another bot and forwards of a bot's messages are
    all refused.
    """
    user = update.effective_user
    chat = update.effective_chat
    if user is None:
        return "no user (channel post or service update)"
    if user.id not in allowed_users:
        return "user not allowed"
    if chat is None or chat.type != "private":
        return "not a private chat"
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
