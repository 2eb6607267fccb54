"""Conversations through the command line: kb ask --conversation NAME, and the kb> chat streaming."""

import json
import re
import signal
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ingest_texts, make_settings, subprocess_env
from tests.fake_llm import FakeLLM, Step, ThreadedFakeLLM, answer
from tests.terminal import Terminal
from tests.test_converse import DOCS, FIRST, FOLLOW, REWRITES, SECOND, is_rewrite, scripted


def test_kb_ask_holds_a_named_conversation_and_says_what_it_searched(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), DOCS)
    with ThreadedFakeLLM(FakeLLM(responder=scripted)) as llm:
        env = {"KB_LLM_URL": llm.base_url, "KB_WEB_SEARCH": "off"}
        first = run_kb("--home", str(home), "ask", "--conversation", "harbor", FIRST["zh"], env=env)
        follow = json.loads(
            run_kb(
                "--home", str(home), "ask", "--json", "--conversation", "harbor", FOLLOW["zh"], env=env
            ).stdout
        )
        alone = json.loads(
            run_kb("--home", str(home), "ask", "--json", FOLLOW["zh"], env=env).stdout
        )  # no conversation
        again = run_kb("--home", str(home), "ask", "--conversation", "harbor", "--new", FOLLOW["zh"], env=env)
    assert first.returncode == 0, first.stderr
    assert follow["searched_as"] == [REWRITES[FOLLOW["zh"]], FOLLOW["zh"]]
    assert follow["mode"] == "local" and SECOND["zh"] in follow["text"]
    assert follow["citations"][0]["title"] == "港口放行檢查表" and follow["conversation"]["fresh"] is False
    top = follow["passages"][0]
    assert top["rank"] == 1 and top["title"] == "港口放行檢查表" and re.fullmatch(r"\d+-\d+", top["lines"])
    assert set(top) == {"rank", "chunk_id", "document_id", "source_name", "title", "lines"}
    assert alone["searched_as"] == [FOLLOW["zh"]]
    assert again.stdout.startswith("(A new conversation: earlier messages are not taken into account.)")
    assert (home / "runs" / "conversations.sqlite3").stat().st_mode & 0o777 == 0o600


def test_ask_json_lists_the_passages_ranked_also_when_the_question_goes_to_the_web(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), DOCS)
    with ThreadedFakeLLM(FakeLLM(script=[answer("I don't know.")])) as llm:
        data = json.loads(
            run_kb("--home", str(home), "ask", "--json", "What does the harbor release checklist require?",
               env={"KB_LLM_URL": llm.base_url, "KB_WEB_SEARCH": "off"}).stdout
        )  # fmt: skip
    assert data["door"]["by"] == "model" and data["door"]["taken"] == "none"
    assert data["passages"][0]["title"] == "Harbor release checklist"
    assert data["searched_as"] == ["What does the harbor release checklist require?"]


def prompts(n: int):
    return lambda screen: len(re.findall(r"^kb>", screen, re.MULTILINE)) >= n


@contextmanager
def chat_after(home: Path, language: str) -> Iterator[tuple[FakeLLM, Terminal]]:
    """A terminal kb chat over DOCS with the scripted model, once it has answered FIRST[language]:
    (the model, the terminal)."""
    ingest_texts(make_settings(home), DOCS)
    fake = FakeLLM(responder=scripted)
    with ThreadedFakeLLM(fake):
        env = subprocess_env(KB_LLM_URL=fake.base_url, KB_WEB_SEARCH="off")
        with Terminal(home, "chat", env=env) as term:
            term.wait_for(prompts(1))
            term.type(FIRST[language])
            term.wait_for(prompts(2))
            yield fake, term


def start_a_long_answer(fake: FakeLLM, term: Terminal) -> None:
    """Ask a question the model answers slowly and at length, and wait until the answer is streaming."""
    fake.responder = None
    fake.script = [Step(answer="word " * 400, tokens_per_s=20)]
    term.type("What does the harbor release checklist require?")
    term.wait_for(lambda s: s.count("word") >= 5)


def test_the_chat_streams_understands_a_follow_up_and_ctrl_c_stops_only_the_answer(tmp_path):
    with chat_after(tmp_path / "kb", "th") as (fake, term):
        term.type(FOLLOW["th"])
        screen = term.wait_for(prompts(3))
        assert SECOND["th"] in screen.split(FOLLOW["th"], 1)[1]
        assert f"(searched as: {REWRITES[FOLLOW['th']]})" in screen
        start_a_long_answer(fake, term)  # stopped half-way with Ctrl-C
        term.interrupt()
        screen = term.wait_for(prompts(4))
        assert "(stopped)" in screen  # the answer stopped; kb is still there
        term.type("/new")
        term.wait_for("A new conversation")
        term.type("/quit")
        assert term.finish() == 0


def test_a_lone_surrogate_in_the_answer_reaches_the_terminal_replaced_and_in_traditional(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), DOCS)

    def model(body: dict) -> Step:  # Simplified characters, and a lone surrogate the JSON carries as \ud800
        said = "离港时间须在潮汐窗口内 \ud800 [1]"
        return answer(said if "潮汐窗口" in body["messages"][-1]["content"] else "I don't know.")

    with ThreadedFakeLLM(FakeLLM(responder=model)) as llm:
        env = {"KB_LLM_URL": llm.base_url, "KB_WEB_SEARCH": "off", "KB_LANGUAGE": "zh-Hant"}
        asked = run_kb("--home", str(home), "ask", FIRST["zh"], env=env)
    assert asked.returncode == 0, asked.stderr
    assert "離港時間須在潮汐視窗內 \ufffd" in asked.stdout and asked.stdout.encode("utf-8")


@pytest.mark.parametrize("when", ["at the prompt", "while answering"])
def test_a_chat_whose_terminal_hangs_up_deletes_its_conversation(tmp_path, when):
    home = tmp_path / "kb"
    with chat_after(home, "en") as (fake, term):  # answered and remembered, for the run
        if when == "while answering":
            start_a_long_answer(fake, term)
        term.proc.send_signal(signal.SIGHUP)  # the terminal window is closed
        assert term.proc.wait(timeout=30) == 0
    db = sqlite3.connect(make_settings(home).conversations_path)
    assert db.execute("SELECT count(*) FROM conversations WHERE key GLOB 'chat:*'").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM turns").fetchone() == (0,)


def test_a_rewrite_that_opens_with_a_quoted_title_keeps_both_quote_marks(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), DOCS)
    quoted = "「港口放行檢查表」的第二點是什麼？"

    def rewrites_with_quotes(body: dict) -> Step:
        return answer(quoted) if is_rewrite(body) else scripted(body)

    with ThreadedFakeLLM(FakeLLM(responder=rewrites_with_quotes)) as llm:
        env = {"KB_LLM_URL": llm.base_url, "KB_WEB_SEARCH": "off", "KB_LANGUAGE": "zh-Hant"}
        run_kb("--home", str(home), "ask", "--conversation", "harbor", FIRST["zh"], env=env)
        follow = run_kb("--home", str(home), "ask", "--conversation", "harbor", FOLLOW["zh"], env=env)
    assert follow.returncode == 0, follow.stderr
    assert f"（以此搜尋：{quoted}）" in follow.stdout
