"""Votes from the command line: kb feedback as a table and as a regression set (--json), its --help, and
/good and /bad in the kb> chat on a terminal."""

import json
import re

from knowledge.answer.reply import Citation, Reply, Route
from knowledge.conversation.store import Conversations
from knowledge.feedback.record import BAD, GOOD, rated
from knowledge.feedback.store import Feedback
from knowledge.words.catalog import Words
from tests.conftest import ingest_texts, make_settings, subprocess_env
from tests.fake_llm import FakeLLM, ThreadedFakeLLM
from tests.terminal import Terminal
from tests.test_converse import DOCS, FIRST, FOLLOW, REWRITES, scripted
from tests.test_terminal_session import prompts


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


def said_after(screen: str, line: str) -> str:
    """What the chat printed after the last ``line`` typed, up to the next prompt."""
    return re.split(r"^kb>", screen.rsplit(f"kb> {line}", 1)[1], maxsplit=1, flags=re.MULTILINE)[0]


def test_the_chat_rates_the_last_answer_with_good_then_bad_and_says_how_to_search_the_web(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), DOCS)
    words = Words("zh-Hant")  # the owner's chat, in Traditional Chinese
    with ThreadedFakeLLM(FakeLLM(responder=scripted)) as fake:
        env = subprocess_env(KB_LLM_URL=fake.base_url, KB_WEB_SEARCH="off", KB_LANGUAGE="zh-Hant")
        with Terminal(home, "chat", env=env) as term:
            said = []
            for n, line in enumerate(["/good", FIRST["zh"], FOLLOW["zh"], "/good", "/bad", "/bad"], 2):
                term.type(line)
                said.append(said_after(term.wait_for(prompts(n)), line))
            term.type("/quit")
            assert term.finish() == 0
    nothing, _, _, good, bad, again = said
    assert words.tr("There is no answer to rate yet: ask a question first, then /good or /bad.") in nothing
    assert "還沒有可以評分的回答" in nothing
    assert words.tr("Noted: {vote} for the last answer.", vote="👍") in good
    assert words.tr("Changed to {vote} for the last answer.", vote="👎") in bad
    assert f"/search {REWRITES[FOLLOW['zh']]}" in bad  # the question searched, ready to type
    assert words.tr("To search the web for it: /search {question}", question=REWRITES[FOLLOW["zh"]]) in bad
    assert words.tr("Already noted: {vote} for the last answer.", vote="👎") in again
    [vote] = json.loads(run_kb("--home", str(home), "feedback", "--json").stdout)  # one answer, one vote
    assert (vote["question"], vote["standalone"], vote["vote"]) == (
        FOLLOW["zh"],
        REWRITES[FOLLOW["zh"]],
        "bad",
    )
    assert vote["chat"].startswith("chat:") and vote["door"] == "local"
    assert [c["title"] for c in vote["rejected"]] == ["港口放行檢查表"]
    assert "terminal" in run_kb("--home", str(home), "feedback").stdout.splitlines()[1]


def test_kb_feedback_votes_on_the_last_answer_of_a_kb_ask_conversation(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), DOCS)
    words = Words("zh-Hant")
    with ThreadedFakeLLM(FakeLLM(responder=scripted)) as fake:
        env = {"KB_LLM_URL": fake.base_url, "KB_WEB_SEARCH": "off", "KB_LANGUAGE": "zh-Hant"}
        before = run_kb("--home", str(home), "feedback", "good", "--conversation", "harbor", env=env)
        assert before.returncode == 1 and not make_settings(home).conversations_path.exists()  # none made
        for question in (FIRST["zh"], FOLLOW["zh"]):
            asked = run_kb("--home", str(home), "ask", "--conversation", "harbor", question, env=env)
            assert asked.returncode == 0, asked.stderr
    assert before.stdout.strip() == words.tr(
        "The conversation {name} has no answer to rate yet: ask in it first (kb ask --conversation {name} QUESTION).",
        name="harbor",
    )
    bad = run_kb("--home", str(home), "feedback", "bad", "--conversation", "harbor", env=env)
    assert bad.returncode == 0, bad.stderr
    assert bad.stdout.splitlines() == [
        words.tr("Noted: {vote} for the last answer.", vote="👎"),
        words.tr("To search the web for it: kb websearch {question}", question=REWRITES[FOLLOW["zh"]]),
    ]
    good = run_kb("--home", str(home), "feedback", "good", "--conversation", "harbor", env=env)
    assert good.stdout.strip() == words.tr("Changed to {vote} for the last answer.", vote="👍")
    other = run_kb("--home", str(home), "feedback", "good", "--conversation", "kettle", env=env)
    assert other.returncode == 1 and "kettle" in other.stdout
    unnamed = run_kb("--home", str(home), "feedback", "good")
    assert unnamed.returncode == 2 and "--conversation NAME" in unnamed.stderr
    [vote] = json.loads(run_kb("--home", str(home), "feedback", "--json").stdout)  # the last answer only
    assert (vote["question"], vote["standalone"], vote["vote"], vote["chat"]) == (
        FOLLOW["zh"], REWRITES[FOLLOW["zh"]], "good", "cli:harbor"
    )  # fmt: skip
    assert [c["title"] for c in vote["expected"]] == ["港口放行檢查表"]
    assert "cli" in run_kb("--home", str(home), "feedback").stdout.splitlines()[1]
