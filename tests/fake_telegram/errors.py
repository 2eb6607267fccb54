"""Telegram's error answers: ApiError, bad_request and the wordings the stand-in answers with."""

from __future__ import annotations

from typing import Any

NOT_MODIFIED = (
    "message is not modified: specified new message content and reply markup are exactly the same "
    "as a current content and reply markup of the message"
)
QUERY_TOO_OLD = "query is too old and response timeout expired or query ID is invalid"
CONFLICT_OTHER_POLL = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
)
CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete "
    "the webhook first"
)
# sendMessageDraft into a group, supergroup or channel (drafts are for private chats only), and
# the answer to every draft while FakeTelegram.drafts_refused is set. Seen in public bug reports
# (e.g. nullclaw/nullclaw#626, a bot streaming into a private chat), not verified here.
DRAFT_PEER_INVALID = "TEXTDRAFT_PEER_INVALID"
DRAFT_ID_INVALID = "draft_id must be non-zero"  # the stand-in's own wording


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
