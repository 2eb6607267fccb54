"""The kb command line as a user runs it: real files, exit codes and output (in process; a process where one is the point)."""

import argparse
import json
import re
import select
import subprocess
import sys

import pytest

from tests import pdfs
from tests.conftest import flagged_until_reindexed, subprocess_env
from tests.fake_llm import FakeLLM, ThreadedFakeLLM, answer, free_port
from tests.test_daemon import wait_for


@pytest.fixture
def sources(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "panthers.md").write_text("# Panthers\n\nThe Panthers defense gave up just 308 points.\n")
    (src / "sub" / "oxygen.html").write_text(
        "<html><head><title>Oxygen</title></head><body><p>Oxygen was discovered by Scheele in Uppsala.</p></body></html>"
    )
    (src / "sub" / "黑豹.txt").write_text("黑豹队的防守只丢了 308分，在联赛中排名第六。", encoding="utf-8")
    (src / ".hidden.md").write_text("# hidden\n\nnot ingested\n")
    return src


def test_ingest_then_search_then_status(tmp_path, sources, run_kb):
    home = tmp_path / "kb"
    done = run_kb("--home", str(home), "ingest", str(sources))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # piped: no progress bar, no log lines
    lines = done.stdout.strip().split("\n")
    assert len(lines) == 4 and lines[-1].startswith("3 indexed in ")
    assert all(line.startswith("indexed") for line in lines[:3])
    assert (sources / "panthers.md").exists()  # copied from outside the inbox, never moved

    found = run_kb("--home", str(home), "search", "--json", "-k", "2", "How", "many", "points?")
    assert found.returncode == 0
    results = json.loads(found.stdout)
    assert results[0]["source_name"] == "panthers.md" and "308 points" in results[0]["text"]
    assert list(results[0]) == ["rank", "score", "chunk_id", "document_id", "title", "source_name", "source_url",
                                "start_line", "end_line", "text", "relevance", "tags", "answerable", "translations"]  # fmt: skip
    assert 0.5 <= results[0]["relevance"] <= 1 and all(r["answerable"] is True for r in results)
    off_topic = json.loads(
        run_kb("--home", str(home), "search", "--json", "Who painted the Sistine Chapel ceiling?").stdout
    )
    assert all(r["answerable"] is False and r["relevance"] < 0.5 for r in off_topic)

    human = run_kb("--home", str(home), "search", "黑豹队丢了多少分")
    assert human.returncode == 0 and "raw/" in human.stdout and "308分" in human.stdout
    assert "verdict: the documents answer it: the best passage is relevant" in human.stdout

    dead = {"KB_LLM_URL": f"http://127.0.0.1:{free_port()}/v1"}
    status = json.loads(run_kb("--home", str(home), "status", "--json", env=dead).stdout)
    assert {"documents", "chunks", "tokenizer", "inbox", "processed", "failed", "last_ingests"} <= set(status)
    assert status["documents"] == 3 and status["processed"] == 3 and status["failed"] == 0
    assert status["tokenizer"] == "approx-v1" and len(status["last_ingests"]) == 3
    assert status["model_server"]["reachable"] is False and status["web_search"]["on"] is True
    assert status["token_counter"] == {
        "name": "approx-v1",
        "exact": False,
        "why": status["token_counter"]["why"],
    }
    human = run_kb("--home", str(home), "status", env=dead).stdout.splitlines()
    assert human[0] == f"knowledge base  {home}: 3 documents, 3 chunks (search by words only: KB_EMBED=off)"
    assert (
        human[1].startswith("model server    not reachable at http://127.0.0.1:")
        and "mlx_lm.server" in human[1]
    )
    assert human[2].startswith("tokenizer       approximate (approx-v1)")
    assert human[4] == f"inbox           {home / 'knowledge' / 'inbox'} (drop files here to add them)"
    assert "files           0 waiting, 3 processed, 0 failed" in human


def test_batch_search_prints_one_line_per_query_in_order(tmp_path, sources, run_kb):
    home = tmp_path / "kb"
    run_kb("--home", str(home), "ingest", str(sources))
    batch = tmp_path / "queries.txt"
    batch.write_text('Uppsala oxygen\n"\n\n308分\nAND NEAR( *\n', encoding="utf-8")
    out = run_kb("--home", str(home), "search", "--batch", str(batch), "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.strip().split("\n")]
    assert [r["query"] for r in rows] == ["Uppsala oxygen", '"', "", "308分", "AND NEAR( *"]
    assert rows[0]["results"][0]["title"] == "Oxygen"
    assert rows[1]["results"] == [] and rows[2]["results"] == []
    assert rows[0]["answerable"] is True and rows[0]["verdict"]["basis"] == "words"
    assert rows[1]["answerable"] is False and rows[1]["verdict"]["why"] == "no passage matches the question"


def test_a_failed_file_makes_ingest_exit_1_and_is_reported(tmp_path, run_kb):
    home = tmp_path / "kb"
    bad = tmp_path / "locked.pdf"
    bad.write_bytes(pdfs.encrypted(pdfs.text_pdf([["secret"]]), user_password="pw"))
    good = tmp_path / "ok.md"
    good.write_text("# ok\n\nfine\n")
    out = run_kb("--home", str(home), "ingest", str(bad), str(good))
    assert out.returncode == 1
    assert "failed     locked.pdf: pdf-encrypted:" in out.stdout and "→ inbox/failed/locked.pdf" in out.stdout
    summary, recap = out.stdout.strip().split("\n")[-2:]
    assert summary.startswith("1 indexed, 1 failed in ") and summary.endswith(" s")
    assert recap.startswith("failed by reason: pdf-encrypted 1")
    assert (home / "knowledge" / "inbox" / "failed" / "locked.pdf.error.json").is_file()
    log = (home / "runs" / "logs" / "kb.jsonl").read_text().strip().split("\n")
    events = [json.loads(line)["event"] for line in log]
    assert "ingest.failed" in events and "ingest.done" in events


def test_reindex_is_deterministic(tmp_path, sources, run_kb):
    home = tmp_path / "kb"
    run_kb("--home", str(home), "ingest", str(sources))
    before = run_kb("--home", str(home), "search", "--json", "308").stdout
    out = run_kb("--home", str(home), "reindex")
    assert out.returncode == 0 and out.stdout.startswith("reindexed 3 documents")
    assert run_kb("--home", str(home), "search", "--json", "308").stdout == before


def test_bad_setting_is_named_and_exits_2(tmp_path, run_kb):
    out = run_kb("--home", str(tmp_path), "status", env={"KB_CHUNK_MAX_TOKENS": "lots"})
    assert out.returncode == 2
    assert "KB_CHUNK_MAX_TOKENS='lots'" in out.stderr and "whole number" in out.stderr


def test_usage_errors(tmp_path, run_kb):
    assert run_kb("--home", str(tmp_path), "search").returncode == 2
    missing = run_kb("--home", str(tmp_path), "ingest", str(tmp_path / "nope.md"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    empty = run_kb("--home", str(tmp_path), "search", "anything")
    assert empty.returncode == 1 and "kb ingest" in empty.stderr


def test_help_lists_commands_and_settings(tmp_path, run_kb):
    out = run_kb("--home", str(tmp_path), "--help")
    assert out.returncode == 0
    for word in ("ingest", "search", "reindex", "status", "run", "KB_CHUNK_MAX_TOKENS", "KB_HOME"):
        assert word in out.stdout
    assert '"query"' in run_kb("--home", str(tmp_path), "search", "--help").stdout
    from cli.main import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    bare = [name for name, p in commands.choices.items() if not (p.description or "").strip()]
    assert bare == []  # every command's own --help says what it does, not only its usage line


def test_config_shows_values_and_origins(tmp_path, run_kb):
    (tmp_path / ".env").write_text("KB_SEARCH_K=7\n")
    out = run_kb("--home", str(tmp_path), "config")
    assert out.returncode == 0
    line = next(line for line in out.stdout.split("\n") if line.startswith("KB_SEARCH_K"))
    assert " 7 " in line and ".env" in line


def test_run_starts_the_daemon_and_answers_searches(tmp_path, run_kb):
    home = tmp_path / "kb"
    inbox = home / "knowledge" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "note.md").write_text("# Note\n\nThe zebrafish sleeps at noon.\n")
    env = subprocess_env(KB_SETTLE_S="0.1", KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "--home", str(home), "run"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(
            lambda: json.loads(run_kb("--home", str(home), "status", "--json").stdout)["documents"] >= 1,
            what="the daemon to index the note",
        )
        out, err = proc.communicate("when does the zebrafish sleep\n/quit\n", timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    # No model server here: the chat degrades to the best passages, with their citations.
    assert "(model unavailable)" in out and "zebrafish sleeps at noon" in out and "raw/note-" in out


def test_a_path_that_is_not_there_is_said_and_the_others_are_ingested_all_the_same(tmp_path, run_kb):
    good = tmp_path / "ok.md"
    good.write_text("# ok\n\nThe boiler was serviced in March.\n")
    out = run_kb("--home", str(tmp_path / "kb"), "ingest", str(tmp_path / "typo.md"), str(good))
    assert out.returncode == 2 and f"no such file or folder: {tmp_path / 'typo.md'}" in out.stderr
    assert "1 indexed" in out.stdout
    assert "ok" in run_kb("--home", str(tmp_path / "kb"), "search", "boiler serviced").stdout


def test_ingest_waits_for_then_refuses_a_held_writer_lock(tmp_path, run_kb):
    from knowledge.ingest.lock import WriterLock

    home = tmp_path / "kb"
    note = tmp_path / "n.md"
    note.write_text("# n\n\ntext\n")
    with WriterLock(home / "knowledge" / "writer.lock", role="kb reindex"):  # a writer that is not the daemon
        out = run_kb("--home", str(home), "ingest", str(note), env={"KB_LOCK_WAIT_S": "0.5"})
    assert out.returncode == 1
    assert "another kb process is writing" in out.stderr and "kb reindex" in out.stderr


def test_logs_show_events_readably_and_follow(tmp_path, run_kb):
    home = tmp_path / "kb"
    note = tmp_path / "n.md"
    note.write_text("# n\n\ntext\n")
    run_kb("--home", str(home), "ingest", str(note))
    out = run_kb("--home", str(home), "logs", "--event", "ingest.")
    assert out.returncode == 0
    line = out.stdout.strip().split("\n")[-1]
    assert " ingest.done " in line and "file=n.md" in line and "chunks=1" in line
    assert "tokenizer.fallback" not in out.stdout
    env = subprocess_env()
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "--home",
            str(home),
            "logs",
            "-f",
            "-n",
            "0",
            "--event",
            "ingest.",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    followed = ""
    try:
        for n in range(10):  # the follower may start after the first write: keep writing until it sees one
            other = tmp_path / f"m{n}.md"
            other.write_text(f"# m{n}\n\nmore text {n}\n")
            run_kb("--home", str(home), "ingest", str(other))
            if select.select([follower.stdout], [], [], 2.0)[0]:
                followed = follower.stdout.readline()
                break
    finally:
        follower.kill()
        follower.wait()
        follower.stdout.close()
    assert " ingest.done " in followed and "file=m" in followed


def test_measure_dry_run_prints_exact_rows_without_a_server(tmp_path, sources, run_kb):
    home = tmp_path / "kb"
    run_kb("--home", str(home), "ingest", str(sources))
    out = run_kb(
        "--home",
        str(home),
        "measure",
        "--dry-run",
        "--evidence-tokens",
        "40",
        "160",
        "640",
        "How",
        "many",
        "points?",
    )
    assert out.returncode == 0, out.stderr
    share, *lines = out.stdout.strip().split("\n")
    assert (
        share.startswith("context 8192 tokens: 1024 kept for the answer")
        and "at most 768 for the conversation" in share
    )
    assert lines[0].split() == ["budget", "evidence", "input", "passages"]
    rows = [list(map(int, line.split())) for line in lines[1:]]
    assert [r[0] for r in rows] == [40, 160, 640]
    for budget, evidence, inputs, _passages in rows:
        assert evidence <= budget and inputs > evidence
    assert rows[-1][3] >= 1


def test_ask_and_measure_against_a_model_server(tmp_path, sources, run_kb):
    home = tmp_path / "kb"
    run_kb("--home", str(home), "ingest", str(sources))
    with ThreadedFakeLLM(FakeLLM(script=[answer("They gave up 308 points [1] [5].")])) as fake:
        out = run_kb(
            "--home",
            str(home),
            "ask",
            "--json",
            "How many points did the Panthers give up?",
            env={"KB_LLM_URL": fake.base_url},
        )
        measured = run_kb(
            "--home",
            str(home),
            "measure",
            "--evidence-tokens",
            "160",
            "640",
            "points",
            env={"KB_LLM_URL": fake.base_url},
        )
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["mode"] == "local" and reply["text"] == "They gave up 308 points [1]."
    assert (
        reply["citations"][0]["raw_path"].startswith("raw/panthers-") and reply["citations"][0]["number"] == 1
    )
    assert measured.returncode == 0, measured.stderr
    _, header, *rows = measured.stdout.strip().split("\n")
    assert header.split() == ["budget", "evidence", "input", "passages", "server", "output", "ms"]
    assert len(rows) == 2 and rows[0].split()[4] == "10"  # the scripted server reports 10 prompt tokens


def test_doctor_reports_what_is_wrong_and_how_to_fix_it(tmp_path, whisper_en, run_kb):
    port = free_port()
    out = run_kb(
        "--home",
        str(tmp_path),
        "doctor",
        env={"KB_LLM_URL": f"http://127.0.0.1:{port}/v1", "KB_TELEGRAM_TOKEN": "123:abc"},
    )
    assert out.returncode == 1
    assert "FAIL  model server" in out.stdout and "mlx_lm.server --model" in out.stdout
    assert "warn  tokenizer" in out.stdout and "KB_TOKENIZER" in out.stdout
    assert "FAIL  telegram" in out.stdout and "KB_TELEGRAM_ALLOWED_USERS" in out.stdout
    assert "warn  voice          mlx-community/whisper-large-v3-turbo is not downloaded yet" in out.stdout
    assert "hf download mlx-community/whisper-large-v3-turbo" in out.stdout
    with ThreadedFakeLLM(FakeLLM()) as fake:
        ok = run_kb(
            "--home",
            str(tmp_path),
            "doctor",
            env={"KB_LLM_URL": fake.base_url, "KB_WHISPER_MODEL": str(whisper_en)},
        )
    assert ok.returncode == 0 and "ok    model server" in ok.stdout and "ok    telegram" in ok.stdout
    assert f"ok    voice          {whisper_en}" in ok.stdout


def test_checkpoint_reports_failures_cleanly(tmp_path, run_kb):
    with ThreadedFakeLLM(FakeLLM(script=[answer("HACKED")])) as fake:
        out = run_kb("--home", str(tmp_path), "checkpoint", env={"KB_LLM_URL": fake.base_url})
    assert out.returncode == 1
    assert "FAIL  answers from the right document" in out.stdout and "/5 cases passed" in out.stdout
    assert "Traceback" not in out.stderr


def test_websearch_lists_candidates_explains_drops_and_stores_them(tmp_path, run_kb):
    from tests.fake_llm import ThreadedServer
    from tests.fake_search import FakeSearch, Result, ddg_results, start_fake_search

    search = FakeSearch()
    search.script["ddg"] = [
        ddg_results(
            "q",
            [
                Result(
                    "Warsaw population 2026", "https://stat.example.pl/warsaw", "Warsaw population statistics"
                ),
                Result("Sign in", "https://accounts.example.com/login", "warsaw population login"),
            ],
        )
    ]
    plan = '{"needsSearch": true, "queries": [{"query": "warsaw population", "freshness": null, "language": "en"}]}'
    llm = FakeLLM(script=[answer(plan), answer("1: YES"), answer("[1] Warsaw has about 1.8 million people.")])
    with ThreadedServer(search, start_fake_search) as s, ThreadedFakeLLM(llm) as fake:
        env = {"KB_LLM_URL": fake.base_url, "KB_DDG_URL": s.ddg_url}
        out = run_kb(
            "--home", str(tmp_path), "websearch", "--explain", "How many people live in Warsaw?", env=env
        )
    assert out.returncode == 0, out.stderr
    assert "plan (model): 'warsaw population' (en, any time)" in out.stdout
    assert "web-1  Warsaw population 2026\n       https://stat.example.pl/warsaw" in out.stdout
    assert (
        "Warsaw has about 1.8 million people. [web-1] [source: https://stat.example.pl/warsaw]" in out.stdout
    )
    assert "login or account page" in out.stdout and "https://accounts.example.com/login" in out.stdout
    stored = json.loads((tmp_path / "runs" / "web-search.json").read_text())
    assert stored["cli"]["candidates"][0]["url"] == "https://stat.example.pl/warsaw"


def test_websearch_exit_3_when_rate_limited(tmp_path, run_kb):
    from tests.fake_llm import ThreadedServer
    from tests.fake_search import FakeSearch, challenge, start_fake_search

    search = FakeSearch()
    search.script["ddg"] = [challenge(202)]
    with ThreadedServer(search, start_fake_search) as s:
        out = run_kb("--home", str(tmp_path), "websearch", "latest news", env={"KB_DDG_URL": s.ddg_url,
                                                            "KB_LLM_URL": f"http://127.0.0.1:{free_port()}/v1"})  # fmt: skip
    assert out.returncode == 3 and "rate-limit" in out.stderr.lower()


@pytest.mark.parametrize(("ddg", "status", "said"), [("challenge", 3, "rate-limit"), ("closed", 1, "failed")])
def test_ask_exits_as_websearch_does_when_the_web_search_it_went_to_fails(
    tmp_path, run_kb, ddg, status, said
):
    from tests.fake_llm import ThreadedServer
    from tests.fake_search import FakeSearch, challenge, start_fake_search

    search = FakeSearch()
    search.script["ddg"] = [challenge(202)]
    dead = f"http://127.0.0.1:{free_port()}"
    with ThreadedServer(search, start_fake_search) as s:
        url = s.ddg_url if ddg == "challenge" else dead
        out = run_kb("--home", str(tmp_path), "ask", "latest news about Lake Quillan",
                     env={"KB_DDG_URL": url, "KB_LLM_URL": f"{dead}/v1"})  # fmt: skip
    assert out.returncode == status, out.stdout + out.stderr
    assert said in out.stdout.lower(), out.stdout


def test_an_index_built_by_an_older_text_analysis_is_flagged_until_reindexed(tmp_path, run_kb):
    from knowledge.store.analysis import ANALYZER_VERSION
    from knowledge.store.index import Index

    home, sources = tmp_path / "kb", tmp_path / "src"
    sources.mkdir()
    (sources / "note.md").write_text("# Varn\n\nThe Varn valley holds Lake Quillan.\n", encoding="utf-8")
    assert run_kb("--home", str(home), "ingest", str(sources)).returncode == 0
    with Index(home / "knowledge" / "index" / "kb.sqlite3") as index:
        assert index.meta("analyzer") == ANALYZER_VERSION
        index.set_meta("analyzer", "ml-0")  # as an index made by an older kb
    warning = f"terms made by text analysis ml-0, kb now uses {ANALYZER_VERSION}"
    changed = flagged_until_reindexed(run_kb, home, sources, warning=warning, event="index.analyzer_changed")
    assert [e["current"] for e in changed] == [ANALYZER_VERSION]


def test_ask_says_which_door_it_took_and_lists_web_candidates_when_the_model_does_not_know(tmp_path, run_kb):
    from tests.fake_llm import FakeLLM, ThreadedFakeLLM, ThreadedServer, answer, web_step
    from tests.fake_search import FakeSearch, Result, ddg_results, start_fake_search

    home = tmp_path / "kb"
    notes = tmp_path / "quillan.md"
    notes.write_text("# Lake Quillan\n\nLake Quillan lies in the Varn valley and is loved by anglers.\n")
    assert run_kb("--home", str(home), "ingest", str(notes)).returncode == 0
    reply = web_step(
        "lake quillan depth", "1: YES\n2: YES", "[1] The depth of Lake Quillan.\n[2] Visiting the lake.",
        lambda body: answer("ไม่ทราบค่ะ"), language="th",
    )  # fmt: skip

    search = FakeSearch()
    search.script["ddg"] = [
        ddg_results("q", [Result("Lake Quillan depth", "https://lakes.example/quillan", "Lake Quillan is deep"),
                          Result("Lake Quillan visits", "https://travel.example/quillan", "Lake Quillan trips")])
    ]  # fmt: skip
    with ThreadedFakeLLM(FakeLLM(responder=reply)) as llm, ThreadedServer(search, start_fake_search):
        env = {"KB_LLM_URL": llm.base_url, "KB_DDG_URL": f"{search.base_url}/lite/"}
        shown = run_kb("--home", str(home), "ask", "How deep is Lake Quillan?", env=env)
        data = json.loads(
            run_kb("--home", str(home), "ask", "--json", "How deep is Lake Quillan?", env=env).stdout
        )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert (
        lines[0]
        == "Your documents do not answer this. From the web (nothing imported; pick one to import it):"
    )
    assert "web-1 · lakes.example — Lake Quillan depth" in shown.stdout
    assert "web-2 · travel.example — Lake Quillan visits" in shown.stdout
    assert lines[-1] == "Import one with: kb import web-N (nothing is imported until you do)"
    assert data["mode"] == "web" and data["door"]["taken"] == "web" and data["door"]["by"] == "model"
    assert "do not answer" in data["door"]["why"]
    assert [c["id"] for c in data["candidates"]] == ["web-1", "web-2"]
    assert data["candidates"][0]["url"] == "https://lakes.example/quillan"


def test_ingest_while_the_daemon_runs_hands_the_files_over_and_reports_their_results(tmp_path, run_kb):
    from daemon.main import background
    from knowledge.model.tokenizer import ApproxCounter
    from tests.conftest import make_settings

    home = tmp_path / "kb"
    settings = make_settings(home, KB_SETTLE_S="0.1")
    src = tmp_path / "src"
    src.mkdir()
    (src / "heron.md").write_text("# Heron\n\nThe heron count at pond 6 was 42 birds.\n")
    (src / "locked.pdf").write_bytes(pdfs.encrypted(pdfs.text_pdf([["secret"]]), user_password="pw"))
    with background(settings, ApproxCounter()):
        out = run_kb("--home", str(home), "ingest", str(src), env={"KB_SETTLE_S": "0.1"})
    assert out.returncode == 1, out.stderr  # one file failed, as when kb ingest indexes them itself
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("the daemon is running (pid ") and "handing 2 file(s) to its inbox" in lines[0]
    assert any(
        re.match(r"indexed    heron\.md → raw/heron-[0-9a-f]{8}\.md \(1 chunk, 'Heron'\)", x) for x in lines
    )
    assert any(
        x.startswith("failed     locked.pdf: pdf-encrypted: ") and "inbox/failed/locked.pdf" in x
        for x in lines
    )
    assert lines[-2].startswith("1 indexed, 1 failed in ") and lines[-1].startswith(
        "failed by reason: pdf-encrypted 1"
    )
    assert (src / "heron.md").exists()  # handed over, no wait for the lock; the original stays where it was
    assert "heron count" in run_kb("--home", str(home), "search", "heron count").stdout


def test_files_named_in_big5_or_tis_620_are_indexed_under_their_readable_names(tmp_path, run_kb):
    """Names from a Windows zip are not UTF-8: kb reads them in the charset they make sense in, and the batch goes on."""
    import os

    src = tmp_path / "src"
    src.mkdir()
    big5 = os.fsencode(src) + b"/" + "烏龍茶筆記.txt".encode("big5")
    thai = os.fsencode(src) + b"/" + "ต้มข่าไก่.txt".encode("tis-620")
    locked = os.fsencode(src) + b"/" + "鎖住.pdf".encode("big5")
    for path, data in ((big5, "高山烏龍茶用九十五度的水沖泡。".encode()), (thai, "ต้มข่าไก่ใช้ข่าสิบแว่น".encode()),
                       (locked, pdfs.encrypted(pdfs.text_pdf([["x"]]), user_password="pw"))):  # fmt: skip
        with open(path, "wb") as fh:
            fh.write(data)
    (src / "plain.md").write_text("# Plain\n\nan ordinary note\n")
    home = tmp_path / "kb"
    out = run_kb("--home", str(home), "ingest", str(src))
    assert out.returncode == 1, out.stderr  # the locked PDF; everything else went in
    assert (
        "indexed    烏龍茶筆記.txt → raw/烏龍茶筆記-" in out.stdout
        and "indexed    ต้มข่าไก่.txt → raw/ต้มข่าไก่-" in out.stdout
    )
    assert "failed     鎖住.pdf: pdf-encrypted" in out.stdout and "indexed    plain.md" in out.stdout
    assert "烏龍茶" in run_kb("--home", str(home), "search", "--json", "烏龍茶 沖泡").stdout
    raw = next((home / "knowledge" / "raw").glob("烏龍茶筆記-*.md")).read_text(encoding="utf-8")
    assert (
        'source_name: "烏龍茶筆記.txt"' in raw
        and (home / "knowledge" / "inbox" / "failed" / "鎖住.pdf").exists()
    )
    for line in (home / "runs" / "logs" / "kb.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line)  # every line written, and whole


def test_files_named_in_big5_are_handed_to_a_running_daemon_and_reported(tmp_path, run_kb):
    """The same names while the daemon runs: kb ingest hands them over and reports each by its readable name."""
    import os

    from daemon.main import background
    from knowledge.model.tokenizer import ApproxCounter
    from tests.conftest import make_settings

    src = tmp_path / "src"
    src.mkdir()
    for name, data in (("烏龍茶筆記.txt", "高山烏龍茶用九十五度的水沖泡。".encode()),
                       ("鎖住.pdf", pdfs.encrypted(pdfs.text_pdf([["x"]]), user_password="pw"))):  # fmt: skip
        with open(os.fsencode(src) + b"/" + name.encode("big5"), "wb") as fh:
            fh.write(data)
    home = tmp_path / "kb"
    settings = make_settings(home, KB_SETTLE_S="0.1")
    with background(settings, ApproxCounter()):
        out = run_kb("--home", str(home), "ingest", str(src), env={"KB_SETTLE_S": "0.1"})
    assert out.returncode == 1, out.stderr  # the locked PDF
    assert "handing 2 file(s) to its inbox" in out.stdout
    assert "indexed    烏龍茶筆記.txt → raw/烏龍茶筆記-" in out.stdout
    assert "failed     鎖住.pdf: pdf-encrypted" in out.stdout, out.stdout


def test_a_pdf_that_maps_a_glyph_to_a_lone_surrogate_is_indexed(tmp_path, run_kb):
    """U+D800 is no character and cannot be written as UTF-8: it becomes U+FFFD, and the rest of the page is kept."""
    (tmp_path / "abba.pdf").write_bytes(pdfs.lone_surrogate())
    home = tmp_path / "kb"
    out = run_kb("--home", str(home), "ingest", str(tmp_path / "abba.pdf"))
    assert out.returncode == 0 and "indexed    abba.pdf" in out.stdout, out.stdout + out.stderr
    found = json.loads(run_kb("--home", str(home), "search", "--json", "a fine band from Sweden").stdout)
    assert "\ufffdBB\ufffd was here, a fine band from Sweden" in found[0]["text"]


def test_kb_in_process_logs_what_a_process_logs_and_leaves_logging_as_it_was(tmp_path, run_kb):
    import logging

    import structlog

    note = tmp_path / "n.md"
    note.write_text("# n\n\ntext\n")
    locked = tmp_path / "locked.pdf"
    locked.write_bytes(pdfs.encrypted(pdfs.text_pdf([["secret"]]), user_password="pw"))
    handlers, config = list(logging.getLogger().handlers), structlog.get_config()
    ran = run_kb("--home", str(tmp_path / "a"), "ingest", str(note), str(locked))
    assert logging.getLogger().handlers == handlers and structlog.get_config() == config
    again = run_kb("--home", str(tmp_path / "a2"), "ingest", str(note), str(locked))  # nothing carried over
    started = subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(tmp_path / "b"), "ingest", str(note), str(locked)],
        capture_output=True, text=True, env=subprocess_env(), timeout=120,
    )  # fmt: skip

    def logged(home: str) -> list[tuple[str, list[str]]]:
        lines = (tmp_path / home / "runs" / "logs" / "kb.jsonl").read_text().splitlines()
        return [(r["event"], sorted(r)) for r in map(json.loads, lines)]

    assert logged("a") == logged("a2") == logged("b") and logged("b")
    assert (
        (ran.returncode, ran.stderr)
        == (again.returncode, again.stderr)
        == (started.returncode, started.stderr)
    )
    assert ran.stdout.splitlines()[:-2] == started.stdout.splitlines()[:-2]  # the last lines: times, reasons


@pytest.mark.parametrize("planner", ["model", "heuristic"])
def test_websearch_plans_a_traditional_chinese_question_for_taiwan(tmp_path, run_kb, planner):
    from tests.fake_llm import ThreadedServer
    from tests.fake_search import FakeSearch, ddg_results, start_fake_search

    search = FakeSearch()
    search.script["ddg"] = [ddg_results("q", [])]
    plan = (
        '{"needsSearch": true, "queries": [{"query": "奎蘭湖 深度", "freshness": null, "language": "zh-CN"}]}'
    )
    llm = FakeLLM(script=[answer(plan)])
    with ThreadedServer(search, start_fake_search) as s, ThreadedFakeLLM(llm) as fake:
        url = fake.base_url if planner == "model" else f"http://127.0.0.1:{free_port()}/v1"
        env = {"KB_LLM_URL": url, "KB_DDG_URL": s.ddg_url, "KB_LANGUAGE": "zh-Hant"}
        out = run_kb("--home", str(tmp_path), "websearch", "奎蘭湖有多深？", env=env)
    assert out.returncode == 0, out.stderr
    query = "奎蘭湖 深度" if planner == "model" else "奎蘭湖有多深"
    assert f"plan ({planner}): '{query}' (zh-TW, any time)" in out.stdout
    assert [seen.form["kl"] for seen in search.seen] == ["tw-tzh"]
