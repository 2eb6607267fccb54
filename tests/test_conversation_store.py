"""The conversation file: turns per key, idle and /new, bounds, anchors, migrations, file mode."""

import sqlite3
import stat

from knowledge.conversation.store import FORGET_S, MAX_TURNS, Conversations, KeptForward
from tests.conftest import at_once


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def store(tmp_path, clock=None, idle_s=1800.0) -> Conversations:
    return Conversations(tmp_path / "runs" / "conversations.sqlite3", idle_s=idle_s, clock=clock or Clock())


def add(s: Conversations, key: str, message: str, **kw) -> int:
    conversation = s.current(key)
    return s.add_turn(conversation.id, message=message, standalone=message, answer=f"answer to {message}",
                      cited=kw.pop("cited", ["doc-a-chunk-0001"]), titles=["A"], **kw)  # fmt: skip


def test_turns_are_kept_per_key_across_a_reopening_and_the_file_is_the_owners_alone(tmp_path):
    clock = Clock()
    s = store(tmp_path, clock)
    add(s, "tg:42", "first")
    add(s, "tg:42", "second", question_message_id=7)
    add(s, "cli:notes", "elsewhere")
    again = store(tmp_path, clock)  # a restart of the bot
    turns = again.current("tg:42").turns
    assert [t.message for t in turns] == ["first", "second"] and turns[1].question_message_id == 7
    assert turns[0].cited == ("doc-a-chunk-0001",) and turns[0].titles == ("A",)
    assert [t.message for t in again.current("cli:notes").turns] == ["elsewhere"]
    assert stat.S_IMODE((tmp_path / "runs" / "conversations.sqlite3").stat().st_mode) == 0o600


def test_idle_and_new_end_a_conversation_and_the_next_one_is_fresh(tmp_path):
    clock = Clock()
    s = store(tmp_path, clock, idle_s=1800)
    add(s, "tg:42", "first")
    clock.t += 1799
    assert s.current("tg:42").turns and not s.current("tg:42").fresh
    clock.t += 1800
    after_idle = s.current("tg:42")
    assert after_idle.turns == () and after_idle.fresh
    assert not s.current("tg:42").fresh  # said once
    add(s, "tg:42", "second")
    assert s.end("tg:42") is True
    assert s.current("tg:42").fresh and s.current("tg:42").turns == ()
    assert s.end("tg:42") is False  # nothing said since


def test_a_conversation_keeps_its_last_turns_and_idle_ones_are_forgotten(tmp_path):
    clock = Clock()
    s = store(tmp_path, clock, idle_s=10 * FORGET_S)
    for n in range(MAX_TURNS + 5):
        add(s, "tg:42", f"m{n}")
    assert [t.message for t in s.current("tg:42").turns] == [f"m{n}" for n in range(5, MAX_TURNS + 5)]
    add(s, "tg:7", "old")
    clock.t += FORGET_S + 1
    s.current("tg:42")  # any use purges
    with sqlite3.connect(tmp_path / "runs" / "conversations.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM turns").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM conversations WHERE key = 'tg:7'").fetchone()[0] == 0


def test_anchors_lead_back_to_a_turn_or_a_document(tmp_path):
    s = store(tmp_path)
    first = add(s, "tg:42", "first")
    add(s, "tg:42", "second")
    s.anchor("tg:42", [11, 12], turn_id=first)
    s.anchor("tg:42", [20], document_id="doc-b", document_title="Receipt")
    assert s.anchored("tg:42", 12).turn.message == "first"
    assert s.anchored("tg:42", 11).turn.reply_message_id == 11
    doc = s.anchored("tg:42", 20)
    assert doc.turn is None and (doc.document_id, doc.document_title) == ("doc-b", "Receipt")
    assert s.anchored("tg:42", 99) is None and s.anchored("tg:7", 12) is None  # another chat's


def test_the_document_just_sent_belongs_to_the_running_conversation(tmp_path):
    s = store(tmp_path)
    s.about("tg:42", "doc-r", "Receipt 2026-11-30")
    current = s.current("tg:42")
    assert (current.document_id, current.document_title) == ("doc-r", "Receipt 2026-11-30")
    s.end("tg:42")
    assert s.current("tg:42").document_id is None


def test_migrations_are_applied_once_and_recorded(tmp_path):
    add(store(tmp_path), "tg:42", "first")
    add(store(tmp_path), "tg:42", "second")
    with sqlite3.connect(tmp_path / "runs" / "conversations.sqlite3") as db:
        assert db.execute("SELECT n, name FROM migrations").fetchall() == [
            (1, "_m001_start"),
            (2, "_m002_chat_languages"),
            (3, "_m003_forwards"),
            (4, "_m004_digests"),
            (5, "_m005_feedback"),
        ]


def test_forget_removes_everything_of_a_key(tmp_path):
    s = store(tmp_path)
    turn = add(s, "tg:42", "secret")
    s.anchor("tg:42", [5], turn_id=turn)
    s.keep_forwards("tg:42", ["channel:-100:7"], KeptForward("inbox/forward.md", "ab" * 32, "A post"))
    assert s.kept_forwards("tg:42", ["channel:-100:7", "channel:-100:8"]) == {
        "channel:-100:7": KeptForward("inbox/forward.md", "ab" * 32, "A post")
    }
    assert s.kept_forwards("tg:7", ["channel:-100:7"]) == {}  # another chat's forwards are its own
    s.forget("tg:42")
    assert s.current("tg:42").turns == () and s.anchored("tg:42", 5) is None
    assert s.kept_forwards("tg:42", ["channel:-100:7"]) == {}


def test_a_fresh_file_opened_by_several_threads_at_once_is_migrated_once(tmp_path):
    path = tmp_path / "runs" / "conversations.sqlite3"
    path.parent.mkdir()
    assert at_once(lambda: Conversations(path).language("tg:42"), threads=8) == []
    with sqlite3.connect(path) as db:
        assert [n for (n,) in db.execute("SELECT n FROM migrations ORDER BY n")] == [1, 2, 3, 4, 5]
