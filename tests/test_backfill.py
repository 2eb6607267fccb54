"""Vectors made by the daemon after the lexical commit: found by words at once, by meaning soon after,
nothing lost to a kill, re-made for a new model; and a Thai file answering an English question."""

from __future__ import annotations

import json
import signal

from daemon.main import background
from knowledge.errors import IndexError_
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.backfill import coverage
from knowledge.retrieval.search import search
from knowledge.retrieval.second import USE_MODEL
from knowledge.retrieval.vectors import stored_background
from knowledge.store.index import Index
from tests.conftest import make_settings
from tests.fake_embeddings import FakeEmbeddings, threaded
from tests.fake_llm import FakeLLM, ThreadedFakeLLM, answer
from tests.test_daemon import running_daemon, wait_for

NOTES = {
    f"note-{n}.md": f"# Note {n}\n\nField note {n}: the heron count at pond {n} was {n * 7} birds.\n"
    for n in range(1, 13)
}


def second_vectors(settings) -> int:
    """The second embedder's vectors stored (its model's), 0 while the index is not there."""
    try:
        with Index(settings.index_path, readonly=True) as index:
            return index.use_vector_count(USE_MODEL)
    except IndexError_:
        return 0


def vectors_of(settings, model: str) -> tuple[int, int]:
    try:
        with Index(settings.index_path, readonly=True) as index:
            cov = coverage(index, model)
            return cov.vectors, cov.chunks
    except IndexError_:  # not there yet, or being created right now
        return 0, -1


def drop(settings, docs: dict[str, str]) -> None:
    settings.inbox.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (settings.inbox / name).write_text(text, encoding="utf-8")


def test_the_daemon_indexes_words_first_then_fills_in_vectors(tmp_path):
    fake = FakeEmbeddings(delay_s=0.3)
    with threaded(fake):
        settings = make_settings(
            tmp_path / "kb",
            KB_SETTLE_S="0.1",
            KB_EMBED="url",
            KB_EMBED_URL=fake.base_url,
            KB_EMBED_MODEL="bow",
        )
        with background(settings, ApproxCounter()):
            drop(settings, {"heron.md": NOTES["note-3.md"]})
            # searchable by its words while its vector is still being made (the server takes 0.3 s)
            wait_for(lambda: vectors_of(settings, "url:bow")[1] == 1, what="the lexical commit")
            with Index(settings.index_path, readonly=True) as index:
                assert search(index, "heron count pond", k=1)[0].title == "Note 3"
            wait_for(lambda: vectors_of(settings, "url:bow") == (1, 1), what="the vector")
    assert fake.requests and all(r["input_type"] == "passage" for r in fake.requests)


def test_kill_during_embedding_loses_nothing_and_a_new_model_is_embedded_again(tmp_path):
    home = tmp_path / "kb"
    settings = make_settings(home)
    fake = FakeEmbeddings(delay_s=0.4)
    with threaded(fake):
        env = {"KB_EMBED": "url", "KB_EMBED_URL": fake.base_url, "KB_EMBED_BATCH": "1"}
        drop(settings, NOTES)
        with running_daemon(home, KB_EMBED_MODEL="model-a", **env) as first:
            wait_for(lambda: vectors_of(settings, "url:model-a")[0] >= 2, timeout_s=60, what="some vectors")
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        done, total = vectors_of(settings, "url:model-a")
        assert total == len(NOTES) and done < total  # killed half-way through the backfill
        fake.delay_s = 0.0
        for model in ("model-a", "model-b"):  # a restart finishes; a new model re-embeds everything
            with running_daemon(home, KB_EMBED_MODEL=model, **env) as again:
                wait_for(lambda m=model: vectors_of(settings, f"url:{m}") == (total, total), timeout_s=60,
                         what=f"full coverage with {model}")  # fmt: skip
                again.send_signal(signal.SIGTERM)
                assert again.wait(timeout=30) == 0
    with Index(settings.index_path) as index:
        assert index.integrity_errors() == []
        models = {m for (m,) in index.conn.execute("SELECT model FROM chunk_vectors")}
        assert models == {"url:model-b"}


def test_status_shows_coverage_and_a_dead_embedder_leaves_search_by_words(tmp_path, run_kb):
    home = tmp_path / "kb"
    settings = make_settings(home)
    drop(settings, {"heron.md": NOTES["note-5.md"]})
    env = {"KB_EMBED": "url", "KB_EMBED_URL": "http://127.0.0.1:9/v1", "KB_EMBED_MODEL": "bow"}
    ingest = run_kb("--home", str(home), "ingest", str(settings.inbox), env=env)
    assert ingest.returncode == 0, ingest.stderr  # the file is indexed; only its vector is missing
    assert "indexed" in ingest.stdout and "cannot reach the embeddings server" in ingest.stdout
    status = json.loads(run_kb("--home", str(home), "status", "--json", env=env).stdout)
    assert status["vectors"] == {"model": "url:bow", "vectors": 0, "chunks": 1}
    human = run_kb("--home", str(home), "status", env=env).stdout
    assert "1 document, 1 chunk (0 with vectors, url:bow)" in human
    found = run_kb("--home", str(home), "search", "--json", "heron count", env=env)
    assert found.returncode == 0 and json.loads(found.stdout)[0]["title"] == "Note 5"
    assert "0 of 1 passages have vectors" in found.stderr


def test_a_thai_file_in_the_inbox_answers_an_english_question(tmp_path, qwen_counter, run_kb):
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S="0.1", KB_EMBED="local")
    thai = "# ข้าวหอมมะลิ\n\nข้าวหอมมะลิปลูกมากในภาคตะวันออกเฉียงเหนือของประเทศไทย และมีกลิ่นหอมเป็นพิเศษเมื่อหุงสุก\n"
    other = {
        "monsoon.md": "# Monsoon\n\nThe monsoon brings heavy rain to Mumbai from June to September.\n",
        "quillan.md": "# Lake Quillan\n\nLake Quillan is 317 metres deep and never freezes.\n",
    }
    with background(settings, qwen_counter):
        drop(settings, {"jasmine-rice.md": thai, **other})
        wait_for(lambda: vectors_of(settings, "local:multilingual-e5-small-q4") == (3, 3)
                 and second_vectors(settings) == 3, timeout_s=120,
                 what="three documents embedded by both embedders")  # fmt: skip
    with ThreadedFakeLLM(
        FakeLLM(script=[answer("Jasmine rice is grown mostly in the north-east [1].")])
    ) as llm:
        env = {"KB_LLM_URL": llm.base_url, "KB_EMBED": "local", "KB_WEB_SEARCH": "off"}
        out = run_kb(
            "--home", str(settings.home), "ask", "--json", "Which rice smells fragrant in Thailand?", env=env
        )
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["mode"] == "local"
    [citation] = reply["citations"]
    assert citation["title"] == "ข้าวหอมมะลิ" and citation["raw_path"].startswith("raw/jasmine-rice-")
    # Retrieval is sure without the model's translation (the second embedder agrees): one call, the answer
    [answering] = llm.requests
    assert "translate" not in answering["messages"][0]["content"]
    evidence = answering["messages"][-1]["content"]
    assert "ข้าวหอมมะลิปลูกมาก" in evidence  # the Thai passage reached the model
    raw = (settings.home / "knowledge" / citation["raw_path"]).read_text().split("\n")
    assert "ภาคตะวันออกเฉียงเหนือ" in "\n".join(raw[citation["start_line"] - 1 : citation["end_line"]])


def test_a_search_after_an_ingest_without_vectors_finds_by_words_with_an_embedder_configured(
    tmp_path, run_kb
):
    home = tmp_path / "kb"
    settings = make_settings(home)
    drop(settings, {"heron.md": NOTES["note-5.md"]})
    ingest = run_kb("--home", str(home), "ingest", str(settings.inbox), env={"KB_EMBED": "off"})
    assert ingest.returncode == 0, ingest.stderr
    fake = FakeEmbeddings()
    with threaded(fake):
        env = {"KB_EMBED": "url", "KB_EMBED_URL": fake.base_url, "KB_EMBED_MODEL": "bow"}
        found = run_kb("--home", str(home), "search", "--json", "heron count", env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["title"] == "Note 5"
    assert "0 of 1 passages have vectors" in found.stderr and "Traceback" not in found.stderr


def test_kill_drill_a_daemon_killed_before_its_first_vector_leaves_search_and_ask_working_on_words(
    tmp_path, run_kb
):
    home = tmp_path / "kb"
    settings = make_settings(home)
    fake = FakeEmbeddings(held=lambda texts: any("heron count" in t for t in texts))  # the chunks' batch
    with threaded(fake):
        env = {"KB_EMBED": "url", "KB_EMBED_URL": fake.base_url, "KB_EMBED_MODEL": "bow"}
        drop(settings, NOTES)
        with running_daemon(home, **env) as daemon:
            try:  # killed once the background passages are stored and the first chunks are being embedded
                wait_for(lambda: any(fake.held(r["input"]) for r in fake.requests if isinstance(r["input"], list)),
                         timeout_s=60, what="the first batch of chunks")  # fmt: skip
                wait_for(
                    lambda: vectors_of(settings, "url:bow") == (0, len(NOTES)),
                    timeout_s=60,
                    what="every note",
                )
                daemon.send_signal(signal.SIGKILL)
                daemon.wait(timeout=10)
            finally:
                fake.released.set()
        assert vectors_of(settings, "url:bow") == (0, len(NOTES))
        with Index(settings.index_path, readonly=True) as index:
            assert stored_background(index, "url:bow") is not None  # the state that once crashed search
        with ThreadedFakeLLM(FakeLLM(script=[answer("Pond 5 had 35 herons [1].")])) as llm:
            found = run_kb("--home", str(home), "search", "--json", "heron count pond 5", env=env)
            asked = run_kb("--home", str(home), "ask", "--json", "How many herons at pond 5?",
                           env={**env, "KB_LLM_URL": llm.base_url, "KB_WEB_SEARCH": "off"})  # fmt: skip
    assert found.returncode == 0 and "Traceback" not in found.stderr, found.stderr
    assert json.loads(found.stdout)[0]["title"] == "Note 5"
    assert asked.returncode == 0 and "Traceback" not in asked.stderr, asked.stderr
    reply = json.loads(asked.stdout)
    assert reply["mode"] == "local" and reply["citations"][0]["title"] == "Note 5"
