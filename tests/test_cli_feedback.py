"""Votes from the command line: kb feedback as a table and as a regression set (--json), its --help, and
/good and /bad in the kb> chat on a terminal."""

import json
import re

from knowledge.answer.assistant import Citation, Reply, Route
from knowledge.conversation.store import Conversations
from knowledge.feedback.record import BAD, GOOD, rated
from knowledge.feedback.store import Feedback
from tests.conftest import make_settings


def checklist_reply() -> Reply:
    cited = [
        Citation(1, "Harbor release checklist", "raw/harbor-1a2b3c4d.md", 3, 9, None, "doc-0a1b-chunk-0002")
    ]
    return Reply("A signed manifest [1].", "local", cited, route=Route("local", "retrieval", "relevant"))


def test_kb_feedback_lists_the_votes_newest_first_and_exports_a_regression_set(tmp_path, run_kb):
    home = tmp_path / "kb"
    votes = Feedback(Conversations(make_settings(home).conversations_path))
    first = votes.offer(
        "tg:42", rated("What does the harbor release checklist require?", "", checklist_reply())
    )
    second = votes.offer(
        "chat:0a1b", rated("那第二點呢？", "港口放行檢查表的第二點是什麼？", checklist_reply())
    )
    votes.offer("tg:42", rated("never voted on", "", checklist_reply()))
    votes.cast("tg:42", first, GOOD)
    votes.cast("chat:0a1b", second, BAD)

    table = run_kb("--home", str(home), "feedback")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["when", "vote", "door", "from", "cited", "question"]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d  bad   local  terminal      1  那第二點呢？  \(searched as: 港口放行檢查表的第二點是什麼？\)",
        lines[1],
    )
    assert lines[2].endswith("good  local  telegram      1  What does the harbor release checklist require?")
    assert lines[3] == "2 votes: 1 good, 1 bad (kb feedback --json exports them as a regression set)"
    assert "never voted on" not in table.stdout
    assert run_kb("--home", str(home), "feedback", "--limit", "1").stdout.count("\n") == 3

    exported = json.loads(run_kb("--home", str(home), "feedback", "--json").stdout)
    assert [(i["question"], i["vote"]) for i in exported] == [
        ("What does the harbor release checklist require?", "good"),
        ("那第二點呢？", "bad"),
    ]
    assert exported[0]["expected"][0]["chunk_id"] == "doc-0a1b-chunk-0002" and exported[0]["rejected"] == []
    assert exported[1]["rejected"][0]["document_id"] == "doc-0a1b" and exported[1]["expected"] == []


def test_kb_feedback_without_votes_says_how_to_vote_and_makes_no_file(tmp_path, run_kb):
    home = tmp_path / "kb"
    empty = run_kb("--home", str(home), "feedback")
    assert empty.returncode == 0 and "no votes yet" in empty.stdout and "/good" in empty.stdout
    assert run_kb("--home", str(home), "feedback", "--json").stdout.strip() == "[]"
    assert not make_settings(home).conversations_path.exists()
    assert run_kb("--home", str(home), "feedback", "--limit", "-1").returncode == 2
    helped = run_kb("feedback", "--help").stdout
    for said in ("regression set", "--json", "expected", "rejected", "bench/feedback_replay.py", "/good"):
        assert said in " ".join(helped.split()), said
    assert "feedback" in run_kb("--help").stdout
