"""Votes on answers, kept in the conversation file (its ``feedback`` table, made by migration 5 of
knowledge.conversation.store).

An answer is *offered* when a front end shows it: its question, standalone question, door and cited
passages are written with a random token and no vote; the token is what a button (or the terminal's
``/good``) names. A vote is the owner's on that row: a second one changes it, never adds another.
A token is reached only from the conversation key it was made for: another chat's, an unknown one or
one forgotten (unvoted after 30 days) is refused with a reason (``other-chat``, ``expired``).
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from knowledge.conversation.store import Conversations
from knowledge.errors import KbError
from knowledge.feedback.record import VOTE_NAMES, Rated, Vote, cited_from_json

log = structlog.get_logger()

_COLUMNS = "id, key, question, standalone, door, mode, cited, answered_at, vote, voted_at"


class FeedbackRefused(KbError):
    """A vote that cannot be cast: ``reason`` ``expired`` (no such answer, or forgotten) or
    ``other-chat`` (the answer was given in another conversation)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Cast:
    """A vote cast: the answer as it now stands and the vote it had before (None: the first)."""

    vote: Vote
    previous: int | None

    @property
    def is_change(self) -> bool:
        """The owner changed an earlier vote."""
        return self.previous is not None and self.previous != self.vote.vote


class Feedback:
    """The votes in one conversation file (``conversations``: its store, which owns the schema)."""

    def __init__(
        self, conversations: Conversations, *, token: Callable[[], str] = lambda: secrets.token_urlsafe(9)
    ) -> None:
        self.conversations = conversations
        self.token = token  # 12 URL-safe characters: a button's callback data holds it

    def offer(self, key: str, rated: Rated) -> str:
        """Keep an answer shown in ``key``'s conversation, not voted on yet; the token naming it."""
        token = self.token()

        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO feedback (token, key, question, standalone, door, mode, cited, answered_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (token, key, rated.question, rated.standalone, rated.door, rated.mode, rated.cited_json(),
                 self.conversations.clock()),
            )  # fmt: skip

        self.conversations.transaction(work)
        return token

    def get(self, key: str, token: str) -> Vote:
        """The answer ``token`` names, when it was offered in ``key``'s conversation (FeedbackRefused)."""
        return self.conversations.transaction(lambda db: _owned(db, key, token))  # type: ignore[return-value]

    def cast(self, key: str, token: str, vote: int) -> Cast:
        """The owner's vote (GOOD or BAD) on the answer ``token`` names: recorded, or changed when one
        was cast before (FeedbackRefused when the answer is not this conversation's)."""
        if vote not in VOTE_NAMES:
            raise ValueError(f"a vote is GOOD (1) or BAD (-1), not {vote!r}")

        def work(db: sqlite3.Connection) -> Cast:
            before = _owned(db, key, token)
            if before.vote == vote:  # the same tap again: nothing changes, not even the time
                return Cast(before, before.vote)
            now = self.conversations.clock()
            db.execute("UPDATE feedback SET vote = ?, voted_at = ? WHERE id = ?", (vote, now, before.id))
            return Cast(_vote(db.execute(f"SELECT {_COLUMNS} FROM feedback WHERE id = ?", (before.id,)).fetchone()),
                        before.vote)  # fmt: skip

        cast: Cast = self.conversations.transaction(work)  # type: ignore[assignment]
        log.info(
            "feedback.vote",
            vote=VOTE_NAMES[vote],
            previous=VOTE_NAMES.get(cast.previous) if cast.previous is not None else None,
            door=cast.vote.rated.door,
            mode=cast.vote.rated.mode,
            cited=len(cast.vote.rated.cited),
            chat=key,
        )
        return cast

    def last(self, key: str) -> tuple[str, Rated] | None:
        """The token and the answer of ``key``'s last answer offered to be voted on (None: none is kept)."""

        def work(db: sqlite3.Connection) -> tuple[str, Rated] | None:
            row = db.execute(
                f"SELECT token, {_COLUMNS} FROM feedback WHERE key = ? ORDER BY answered_at DESC, id DESC LIMIT 1",
                (key,),
            ).fetchone()
            return (row[0], _vote(row[1:]).rated) if row is not None else None

        return self.conversations.transaction(work)  # type: ignore[return-value]

    def votes(self, *, limit: int | None = None) -> list[Vote]:
        """The answers voted on, newest vote first (``limit``: at most that many)."""

        def work(db: sqlite3.Connection) -> list[Vote]:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM feedback WHERE vote IS NOT NULL ORDER BY voted_at DESC, id DESC"
                + (" LIMIT ?" if limit is not None else ""),
                (limit,) if limit is not None else (),
            )
            return [_vote(r) for r in rows]

        return self.conversations.transaction(work)  # type: ignore[return-value]


def _owned(db: sqlite3.Connection, key: str, token: str) -> Vote:
    row = db.execute(f"SELECT {_COLUMNS} FROM feedback WHERE token = ?", (token,)).fetchone()
    if row is None:
        log.info("feedback.refused", reason="expired", chat=key)
        raise FeedbackRefused("no answer to vote on by that token: it has expired", "expired")
    if row[1] != key:
        log.warning("feedback.refused", reason="other-chat", chat=key)
        raise FeedbackRefused("that answer was given in another conversation", "other-chat")
    return _vote(row)


def _vote(row: tuple) -> Vote:
    rated = Rated(row[2], row[3], row[4], row[5], cited_from_json(row[6]))
    return Vote(row[0], row[1], rated, row[7], row[8], row[9])
