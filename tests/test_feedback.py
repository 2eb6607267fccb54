"""Votes on answers in the conversation file: the migration that adds them to an existing file, one
vote per answer (a second one changes it), tokens reached only from their own conversation, unvoted
answers forgotten and votes kept, the regression set, and its replay's figures."""

import sqlite3

import pytest

from knowledge.answer.reply import Citation, Reply, Route
from knowledge.conversation.store import FORGET_S, MIGRATIONS, Conversations
from knowledge.feedback.record import BAD, GOOD, rated, regression_set
from knowledge.feedback.replay import replay
from knowledge.feedback.store import Feedback, FeedbackRefused
from knowledge.store.migrations import migrate
from tests.test_conversation_store import Clock, add

HARBOR = "doc-0123456789abcdef"


def harbor_reply(mode: str = "local", door: str = "local") -> Reply:
    cited = [
        Citation(1, "Harbor release checklist", "raw/harbor-1a2b3c4d.md", 3, 9, None, f"{HARBOR}-chunk-0001")
    ]
    return Reply("A signed manifest [1].", mode, cited, route=Route(door, "retrieval", "relevant"))


def feedback(tmp_path, clock=None) -> Feedback:
    path = tmp_path / "runs" / "conversations.sqlite3"
    return Feedback(Conversations(path, clock=clock or Clock()))


def test_a_file_from_before_feedback_gains_its_table_and_keeps_its_conversations(tmp_path):
    path = tmp_path / "runs" / "conversations.sqlite3"
    path.parent.mkdir()
    with sqlite3.connect(path, isolation_level=None) as db:
        migrate(db, MIGRATIONS[:4])  # a file kb wrote before votes existed
    old = Conversations(path, clock=Clock())
    add(old, "tg:42", "What does the checklist require?")
    votes = Feedback(Conversations(path, clock=Clock()))
    token = votes.offer("tg:42", rated("What does the checklist require?", "", harbor_reply()))
    votes.cast("tg:42", token, GOOD)
    assert [t.message for t in Conversations(path).current("tg:42").turns] == [
        "What does the checklist require?"
    ]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT n, name FROM migrations WHERE n = 5").fetchall() == [(5, "_m005_feedback")]


def test_a_second_vote_changes_the_first_never_adds_another(tmp_path):
    clock = Clock()
    votes = feedback(tmp_path, clock)
    token = votes.offer("tg:42", rated("What about the manifest?", "What does the checklist say of the manifest?",
                                       harbor_reply()))  # fmt: skip
    assert votes.votes() == []  # offered, not voted on
    clock.t += 60
    first = votes.cast("tg:42", token, GOOD)
    assert first.previous is None and not first.is_change and first.vote.voted_at == clock.t
    clock.t += 60
    again = votes.cast("tg:42", token, GOOD)
    assert again.previous == GOOD and not again.is_change and again.vote.voted_at == first.vote.voted_at
    clock.t += 60
    changed = votes.cast("tg:42", token, BAD)
    assert changed.is_change and changed.previous == GOOD
    [kept] = votes.votes()
    assert kept.vote == BAD and kept.voted_at == clock.t and kept.key == "tg:42"
    assert kept.rated.standalone == "What does the checklist say of the manifest?"
    assert [(c.document_id, c.chunk_id, c.title, c.path, c.lines) for c in kept.rated.cited] == [
        (HARBOR, f"{HARBOR}-chunk-0001", "Harbor release checklist", "raw/harbor-1a2b3c4d.md", "3-9")
    ]
    with pytest.raises(ValueError):
        votes.cast("tg:42", token, 0)


def test_a_token_is_reached_only_from_its_own_conversation(tmp_path):
    votes = feedback(tmp_path)
    token = votes.offer("tg:42", rated("q", "q", harbor_reply()))
    with pytest.raises(FeedbackRefused) as foreign:
        votes.cast("tg:7", token, GOOD)
    with pytest.raises(FeedbackRefused) as unknown:
        votes.cast("tg:42", "A" * 12, GOOD)
    assert (foreign.value.reason, unknown.value.reason) == ("other-chat", "expired")
    assert votes.votes() == [] and votes.get("tg:42", token).vote is None


def test_unvoted_answers_are_forgotten_with_their_conversation_or_a_month_later_votes_stay(tmp_path):
    clock = Clock()
    votes = feedback(tmp_path, clock)
    store = votes.conversations
    voted, unvoted = (votes.offer("chat:run1", rated(q, q, harbor_reply())) for q in ("kept", "dropped"))
    votes.cast("chat:run1", voted, BAD)
    store.forget("chat:run1")  # the terminal run ends
    with pytest.raises(FeedbackRefused):
        votes.get("chat:run1", unvoted)
    assert [v.rated.question for v in votes.votes()] == ["kept"]
    old = votes.offer("tg:42", rated("old", "old", harbor_reply()))
    clock.t += FORGET_S + 1
    store.current("tg:42")  # a new message: what has been idle for a month goes
    with pytest.raises(FeedbackRefused):
        votes.get("tg:42", old)
    assert [v.rated.question for v in votes.votes()] == ["kept"]


def test_the_regression_set_gives_expected_passages_for_good_and_rejected_for_bad(tmp_path):
    clock = Clock()
    votes = feedback(tmp_path, clock)
    good = votes.offer("tg:42", rated("那第二點呢？", "港口放行檢查表的第二點是什麼？", harbor_reply()))
    bad = votes.offer("chat:run1", rated("How deep is Lake Quillan?", "", harbor_reply("degraded")))
    web = votes.offer(
        "tg:42", rated("Weather today?", "", Reply("", "web", route=Route("web", "retrieval", "-")))
    )
    votes.offer("tg:42", rated("never voted", "", harbor_reply()))
    for token, vote in ((good, GOOD), (bad, BAD), (web, BAD)):
        clock.t += 1
        votes.cast("chat:run1" if token == bad else "tg:42", token, vote)
    items = regression_set(votes.votes())
    assert [(i["question"], i["vote"], i["door"], i["chat"]) for i in items] == [
        ("那第二點呢？", "good", "local", "tg:42"),
        ("How deep is Lake Quillan?", "bad", "local", "chat:run1"),
        ("Weather today?", "bad", "web", "tg:42"),
    ]
    assert items[0]["standalone"] == "港口放行檢查表的第二點是什麼？" and items[0]["rejected"] == []
    assert items[0]["expected"] == [{"document_id": HARBOR, "chunk_id": f"{HARBOR}-chunk-0001",
                                     "title": "Harbor release checklist", "path": "raw/harbor-1a2b3c4d.md",
                                     "lines": "3-9"}]  # fmt: skip
    assert items[1]["standalone"] == "How deep is Lake Quillan?" and items[1]["expected"] == []
    assert [c["chunk_id"] for c in items[1]["rejected"]] == [f"{HARBOR}-chunk-0001"]
    assert items[2]["rejected"] == [] and items[2]["at"].endswith("Z")


def test_a_replay_counts_hits_of_good_passages_and_bad_ones_still_first():
    def item(question, vote, chunk):
        return {"question": question, "standalone": question, "vote": vote,
                "expected": [{"chunk_id": chunk}] if vote == "good" else [],
                "rejected": [{"chunk_id": chunk}] if vote == "bad" else []}  # fmt: skip

    ranking = {"q1": ["a", "b", "c"], "q2": ["b", "a", "c"], "q3": ["c", "d", "e"], "q4": ["x", "y"],
               "q5": ["y", "x"]}  # fmt: skip
    items = [item("q1", "good", "a"), item("q2", "good", "a"), item("q3", "good", "a"), item("q4", "bad", "x"),
             item("q5", "bad", "x"), {"question": "web", "vote": "bad", "expected": [], "rejected": []}]  # fmt: skip
    figures = replay(items, lambda q: ranking[q])
    assert (figures.good, figures.hit1, figures.hit3, figures.misses) == (3, 1, 2, ["q3"])
    assert figures.not_first == ["q2", "q3"]
    assert (figures.bad, figures.bad_first, figures.bad_top3, figures.still_first) == (2, 1, 2, ["q4"])
    assert figures.skipped == 1 and figures.rate(1, 3) == pytest.approx(1 / 3) and figures.rate(0, 0) is None
