"""What a front end remembers of its conversations: one SQLite file under ``runs/``, never the index.

A conversation belongs to a key (``tg:<chat id>`` for a Telegram chat, ``cli:<name>`` for
``kb ask --conversation NAME``, ``chat:<run id>`` for a ``kb>`` run). It holds its turns (the
message as written, the standalone question searched, the answer, the passages it cited and,
in Telegram, the message ids of the question and of the reply) and the document it is about
when the owner has just sent one. It ends after ``idle_s`` of silence or with ``/new``; the
next message starts another, and says so.

A chat's language, chosen with /lang, is kept too (until chosen again), and the forwarded messages
kept from it (each by its origin: where the note that holds it went), so one forwarded again is known.
So are the owner's votes on answers (👍 / 👎, the ``feedback`` table, read and written by
knowledge.feedback): an answer offered for a vote is forgotten with its conversation's key or after
``FORGET_S`` unvoted; a vote is kept until the owner deletes the file.

Anchors tie a chat's message ids to what they carry (an answer's turn, a document), so a reply
to an older message continues from there. Bounded: the last ``MAX_TURNS`` turns of a
conversation are kept, and conversations and anchors idle for ``FORGET_S`` are deleted.

The schema grows by small numbered migrations applied once, in order, and recorded. The file is
readable by its owner only (0600): it holds the owner's questions and kb's answers.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from knowledge.errors import KbError
from knowledge.store.connection import index_problem
from knowledge.store.migrations import Migration, migrate, statements

MAX_TURNS = 20
FORGET_S = 30 * 86400.0
DEFAULT_IDLE_S = 1800.0


class ConversationError(KbError):
    """The conversation file cannot be opened or written; ``reason``: ``disk-full``, ``busy``,
    ``damaged`` or ``io-error`` (as for the index)."""

    def __init__(self, message: str, reason: str = "io-error") -> None:
        super().__init__(message)
        self.reason = reason


def _failed(path: Path, doing: str, exc: BaseException) -> ConversationError:
    """The error for a conversation file that cannot be used, with why (a full disk above all)."""
    try:
        free: int | None = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    return ConversationError(
        f"the conversation file {path} cannot be {doing}: {exc}", index_problem(exc, free)
    )


@dataclass(frozen=True)
class Turn:
    """One exchange: what the owner wrote, what was searched, what kb answered and cited."""

    id: int
    message: str
    standalone: str
    answer: str
    cited: tuple[str, ...]  # chunk ids, in citation order
    at: float
    titles: tuple[str, ...] = ()  # of the cited passages
    question_message_id: int | None = None
    reply_message_id: int | None = None
    document_id: str | None = None  # the turn asked about this one document


@dataclass(frozen=True)
class Conversation:
    """A conversation's state as the engine needs it: its recent turns, oldest first, and the
    document it is about (one the owner has just sent), if any."""

    id: int
    key: str
    turns: tuple[Turn, ...]
    document_id: str | None
    document_title: str | None
    fresh: bool  # started because an earlier one ended (idle, /new): the answer says so
    document_at: float = 0.0  # when the owner sent that document


@dataclass(frozen=True)
class Anchor:
    """What a message in a chat carries: a turn (kb's answer) or a document."""

    message_id: int
    turn: Turn | None
    document_id: str | None
    document_title: str | None


def _m001_start(db: sqlite3.Connection) -> None:
    statements(
        db,
        """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL,
            started_at REAL NOT NULL,
            last_at REAL NOT NULL,
            ended INTEGER NOT NULL DEFAULT 0,
            document_id TEXT,
            document_title TEXT,
            document_at REAL NOT NULL DEFAULT 0
        );
        CREATE INDEX conversations_key ON conversations (key, id);
        CREATE TABLE turns (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            at REAL NOT NULL,
            message TEXT NOT NULL,
            standalone TEXT NOT NULL,
            answer TEXT NOT NULL,
            cited TEXT NOT NULL,
            titles TEXT NOT NULL DEFAULT '[]',
            question_message_id INTEGER,
            reply_message_id INTEGER,
            document_id TEXT
        );
        CREATE INDEX turns_conversation ON turns (conversation_id, id);
        CREATE TABLE anchors (
            key TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            at REAL NOT NULL,
            turn_id INTEGER REFERENCES turns (id) ON DELETE CASCADE,
            document_id TEXT,
            document_title TEXT,
            PRIMARY KEY (key, message_id)
        );
        """,
    )


def _m002_chat_languages(db: sqlite3.Connection) -> None:
    statements(
        db, "CREATE TABLE chat_languages (key TEXT PRIMARY KEY, language TEXT NOT NULL, at REAL NOT NULL)"
    )


def _m003_forwards(db: sqlite3.Connection) -> None:
    statements(
        db,
        """
        CREATE TABLE forwards (
            key TEXT NOT NULL,
            message TEXT NOT NULL,
            path TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            title TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (key, message)
        )
        """,
    )


def _m004_digests(db: sqlite3.Connection) -> None:
    statements(db, "CREATE TABLE digests (key TEXT PRIMARY KEY, sent_at REAL NOT NULL)")


def _m005_feedback(db: sqlite3.Connection) -> None:
    # A copy of what was asked and cited, not a link to the turn: turns go after MAX_TURNS and
    # conversations after FORGET_S, a vote stays (knowledge.feedback exports it as a regression set).
    statements(
        db,
        """
        CREATE TABLE feedback (
            id INTEGER PRIMARY KEY,
            token TEXT NOT NULL UNIQUE,
            key TEXT NOT NULL,
            question TEXT NOT NULL,
            standalone TEXT NOT NULL,
            door TEXT NOT NULL,
            mode TEXT NOT NULL,
            cited TEXT NOT NULL,
            answered_at REAL NOT NULL,
            vote INTEGER,
            voted_at REAL
        );
        CREATE INDEX feedback_voted ON feedback (vote, voted_at)
        """,
    )


MIGRATIONS: tuple[Migration, ...] = (
    _m001_start,
    _m002_chat_languages,
    _m003_forwards,
    _m004_digests,
    _m005_feedback,
)


@dataclass(frozen=True)
class KeptForward:
    """Where a forwarded message went: the note (inbox path and bytes' SHA-256) and its title."""

    path: str
    sha256: str
    title: str


class Conversations:
    """The conversation file of one front end (opened per call: the file is small and local)."""

    def __init__(
        self, path: Path, *, idle_s: float = DEFAULT_IDLE_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self.idle_s = idle_s
        self.clock = clock
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        try:
            if not self._ready:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
                os.chmod(self.path, 0o600)
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA busy_timeout = 10000")
            if not self._ready:
                migrate(db, MIGRATIONS)
                self._ready = True
            return db
        except (OSError, sqlite3.Error) as exc:
            raise _failed(self.path, "used", exc) from exc

    def transaction(self, work: Callable[[sqlite3.Connection], object]) -> object:
        """Run ``work`` in one write transaction on the file (for the rooms that keep a table of
        their own in it: knowledge.feedback); ConversationError when the file cannot be used."""
        return self._run(work)

    def _run(self, work: Callable[[sqlite3.Connection], object]) -> object:
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            out = work(db)
            db.execute("COMMIT")
            return out
        except sqlite3.Error as exc:
            raise _failed(self.path, "written", exc) from exc
        finally:
            db.close()

    def current(self, key: str) -> Conversation:
        """The key's conversation: the running one, or a new one when none runs or it has been idle
        for ``idle_s`` (``fresh`` then says an earlier one ended)."""
        return self._run(lambda db: self._current(db, key))  # type: ignore[return-value]

    def _current(self, db: sqlite3.Connection, key: str) -> Conversation:
        now = self.clock()
        _forget(db, now)
        row = db.execute(
            "SELECT id, last_at, ended, document_id, document_title, document_at FROM conversations "
            "WHERE key = ? ORDER BY id DESC LIMIT 1",
            (key,),
        ).fetchone()
        # a clock that went back is no reason to end a conversation, one far ahead is
        if row is not None and not row[2] and now - row[1] < self.idle_s:
            turns = _turns(db, row[0])
            return Conversation(row[0], key, turns, row[3], row[4], fresh=False, document_at=row[5])
        cid = db.execute(
            "INSERT INTO conversations (key, started_at, last_at) VALUES (?, ?, ?)", (key, now, now)
        ).lastrowid
        had_turns = (
            row is not None
            and db.execute("SELECT 1 FROM turns WHERE conversation_id = ?", (row[0],)).fetchone()
        )
        if row is not None:
            db.execute("UPDATE conversations SET ended = 1 WHERE id = ?", (row[0],))
        return Conversation(cid, key, (), None, None, fresh=bool(had_turns))

    def end(self, key: str) -> bool:
        """End the key's running conversation (/new); whether one with turns was running."""

        def work(db: sqlite3.Connection) -> bool:
            row = db.execute(
                "SELECT id FROM conversations WHERE key = ? AND ended = 0 ORDER BY id DESC LIMIT 1", (key,)
            ).fetchone()
            if row is None:
                return False
            db.execute("UPDATE conversations SET ended = 1 WHERE id = ?", (row[0],))
            return (
                db.execute("SELECT 1 FROM turns WHERE conversation_id = ?", (row[0],)).fetchone() is not None
            )

        return bool(self._run(work))

    def add_turn(
        self,
        conversation_id: int,
        *,
        message: str,
        standalone: str,
        answer: str,
        cited: Sequence[str],
        titles: Sequence[str] = (),
        question_message_id: int | None = None,
        document_id: str | None = None,
    ) -> int:
        """Record a turn (the oldest beyond MAX_TURNS go); its id."""

        def work(db: sqlite3.Connection) -> int:
            now = self.clock()
            tid = db.execute(
                "INSERT INTO turns (conversation_id, at, message, standalone, answer, cited, titles,"
                " question_message_id, document_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, now, message, standalone, answer, json.dumps(list(cited)),
                 json.dumps(list(titles), ensure_ascii=False), question_message_id, document_id),
            ).lastrowid  # fmt: skip
            db.execute(
                "DELETE FROM turns WHERE conversation_id = ? AND id NOT IN "
                "(SELECT id FROM turns WHERE conversation_id = ? ORDER BY id DESC LIMIT ?)",
                (conversation_id, conversation_id, MAX_TURNS),
            )
            db.execute("UPDATE conversations SET last_at = ? WHERE id = ?", (now, conversation_id))
            return int(tid)

        return int(self._run(work))  # type: ignore[arg-type]

    def about(self, key: str, document_id: str, title: str) -> None:
        """The owner has just sent a document: the running conversation is about it from now on."""

        def work(db: sqlite3.Connection) -> None:
            conversation = self._current(db, key)
            now = self.clock()
            db.execute(
                "UPDATE conversations SET document_id = ?, document_title = ?, document_at = ?, last_at = ? "
                "WHERE id = ?",
                (document_id, title, now, now, conversation.id),
            )

        self._run(work)

    def anchor(
        self,
        key: str,
        message_ids: Sequence[int],
        *,
        turn_id: int | None = None,
        document_id: str | None = None,
        document_title: str | None = None,
    ) -> None:
        """Remember what these messages of the chat carry (an answer's turn, or a document)."""

        def work(db: sqlite3.Connection) -> None:
            now = self.clock()
            if turn_id is not None and message_ids:
                db.execute("UPDATE turns SET reply_message_id = ? WHERE id = ?", (message_ids[0], turn_id))
            db.executemany(
                "INSERT OR REPLACE INTO anchors (key, message_id, at, turn_id, document_id, document_title) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(key, m, now, turn_id, document_id, document_title) for m in message_ids],
            )

        self._run(work)

    def anchored(self, key: str, message_id: int) -> Anchor | None:
        """What a message of the chat carries, if kb remembers it."""

        def work(db: sqlite3.Connection) -> Anchor | None:
            row = db.execute(
                "SELECT turn_id, document_id, document_title FROM anchors WHERE key = ? AND message_id = ?",
                (key, message_id),
            ).fetchone()
            if row is None:
                return None
            turn = None
            if row[0] is not None:
                found = db.execute(f"SELECT {_TURN_COLUMNS} FROM turns WHERE id = ?", (row[0],)).fetchone()
                turn = _turn(found) if found else None
            if turn is None and row[1] is None:
                return None
            return Anchor(message_id, turn, row[1], row[2])

        return self._run(work)  # type: ignore[return-value]

    def anchored_turn(self, turn_id: int) -> Turn | None:
        """One turn by id (an answer a message is anchored to)."""

        def work(db: sqlite3.Connection) -> Turn | None:
            found = db.execute(f"SELECT {_TURN_COLUMNS} FROM turns WHERE id = ?", (turn_id,)).fetchone()
            return _turn(found) if found else None

        return self._run(work)  # type: ignore[return-value]

    def language(self, key: str) -> str | None:
        """The language the owner chose for a chat (/lang), if any."""
        row = self._run(
            lambda db: db.execute("SELECT language FROM chat_languages WHERE key = ?", (key,)).fetchone()
        )
        return row[0] if row else None  # type: ignore[index]

    def last_chosen_language(self) -> str | None:
        """The language last chosen with /lang in any chat (the owner's, for what kb writes outside one)."""
        row = self._run(
            lambda db: db.execute("SELECT language FROM chat_languages ORDER BY at DESC LIMIT 1").fetchone()
        )
        return row[0] if row else None  # type: ignore[index]

    def choose_language(self, key: str, language: str) -> None:
        """Keep the owner's choice of language for a chat (it outlasts conversations and restarts)."""
        self._run(lambda db: db.execute(
            "INSERT OR REPLACE INTO chat_languages (key, language, at) VALUES (?, ?, ?)", (key, language, self.clock())
        ))  # fmt: skip

    def kept_forwards(self, key: str, messages: Sequence[str]) -> dict[str, KeptForward]:
        """Of these forwarded messages (their forward_key), the ones kept before in this chat."""

        def work(db: sqlite3.Connection) -> dict[str, KeptForward]:
            found = {}
            for message in dict.fromkeys(messages):
                row = db.execute(
                    "SELECT path, sha256, title FROM forwards WHERE key = ? AND message = ?", (key, message)
                ).fetchone()
                if row is not None:
                    found[message] = KeptForward(*row)
            return found

        return self._run(work)  # type: ignore[return-value]

    def keep_forwards(self, key: str, messages: Sequence[str], kept: KeptForward) -> None:
        """These forwarded messages went into ``kept`` (the latest keeping wins)."""

        def work(db: sqlite3.Connection) -> None:
            now = self.clock()
            for message in dict.fromkeys(messages):
                db.execute(
                    "INSERT OR REPLACE INTO forwards (key, message, path, sha256, title, at) VALUES (?, ?, ?, ?, ?, ?)",
                    (key, message, kept.path, kept.sha256, kept.title, now),
                )

        self._run(work)

    def unanswered(self, since: float, until: float, *, keys: str) -> list[str]:
        """The questions asked in [since, until) that no passage answered (their standalone form),
        oldest first, in the conversations whose key matches ``keys`` (a GLOB pattern: ``tg:123`` one
        chat's, ``cli:*`` the command line's): one person's questions are never shown to another. A
        question answered since (asked again, or answered from a web page the owner imported) is not."""

        def work(db: sqlite3.Connection) -> list[str]:
            rows = db.execute(
                "SELECT t.standalone FROM turns t JOIN conversations c ON c.id = t.conversation_id"
                " WHERE c.key GLOB ? AND t.at >= ? AND t.at < ? AND t.cited = '[]' AND t.document_id IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM turns a JOIN conversations ac ON ac.id = a.conversation_id"
                "  WHERE ac.key = c.key AND a.at >= t.at AND a.id != t.id"
                "  AND (a.cited != '[]' OR a.document_id IS NOT NULL)"
                "  AND (a.standalone = t.standalone OR a.message = t.standalone OR a.message = t.message))"
                " ORDER BY t.at, t.id",
                (keys, since, until),
            )
            return [r[0] for r in rows]

        return self._run(work)  # type: ignore[return-value]

    def last_digest(self, key: str) -> float | None:
        """When the last digest was sent to ``key`` (a chat, or the command line), if ever."""
        found = self._run(
            lambda db: db.execute("SELECT sent_at FROM digests WHERE key = ?", (key,)).fetchone()
        )
        return found[0] if found else None  # type: ignore[index]

    def digest_sent(self, key: str, at: float) -> None:
        """Remember that a digest up to ``at`` was sent to ``key``."""
        self._run(
            lambda db: db.execute(
                "INSERT INTO digests (key, sent_at) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET sent_at = excluded.sent_at",
                (key, at),
            )
        )

    def forget(self, key: str) -> None:
        """Delete everything remembered for a key (its conversations, turns, anchors, forwards and the
        answers offered for a vote and not voted on; a vote cast stays)."""

        def work(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM conversations WHERE key = ?", (key,))
            db.execute("DELETE FROM anchors WHERE key = ?", (key,))
            db.execute("DELETE FROM forwards WHERE key = ?", (key,))
            db.execute("DELETE FROM feedback WHERE key = ? AND vote IS NULL", (key,))

        self._run(work)


_TURN_COLUMNS = (
    "id, message, standalone, answer, cited, at, titles, question_message_id, reply_message_id, document_id"
)


def _turn(row: Sequence[object]) -> Turn:
    cited, titles = json.loads(row[4]), json.loads(row[6])  # type: ignore[arg-type]
    return Turn(row[0], row[1], row[2], row[3], tuple(cited), row[5], tuple(titles), *row[7:])  # type: ignore[arg-type]


def _turns(db: sqlite3.Connection, conversation_id: int) -> tuple[Turn, ...]:
    rows = db.execute(
        f"SELECT {_TURN_COLUMNS} FROM turns WHERE conversation_id = ? ORDER BY id", (conversation_id,)
    ).fetchall()
    return tuple(_turn(r) for r in rows)


def _forget(db: sqlite3.Connection, now: float) -> None:
    """Conversations, anchors and answers never voted on idle for FORGET_S go (a stamp from the future
    is kept: a clock that was ahead once must not delete today's conversation)."""
    cutoff = now - FORGET_S
    db.execute("DELETE FROM conversations WHERE last_at < ?", (cutoff,))
    db.execute("DELETE FROM anchors WHERE at < ?", (cutoff,))
    db.execute("DELETE FROM feedback WHERE vote IS NULL AND answered_at < ?", (cutoff,))
