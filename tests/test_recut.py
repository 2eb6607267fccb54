"""An index whose passages were cut otherwise than kb cuts them now: kb doctor names it, kb ingest logs
it, and kb reindex cuts every passage again."""

from knowledge.store.index import Index
from tests.conftest import flagged_until_reindexed, make_settings

# Short lines (about 15 tokens each): a few 160-token passages, each repeating whole lines of the previous.
LINES = [f"Gauge {n} of the Varn valley read {300 + n} metres on day {n}." for n in range(1, 41)]


def chunks_of(home):
    with Index(home / "knowledge" / "index" / "kb.sqlite3") as index:
        rows = index.conn.execute("SELECT text FROM chunks ORDER BY document_id, seq").fetchall()
        return [t for (t,) in rows], index.meta("chunking")


def shared(first: str, second: str) -> bool:
    """Whether the second passage repeats the end of the first (the overlap: whole lines here)."""
    return first.splitlines()[-1] in second.splitlines()


def test_passages_cut_otherwise_are_flagged_until_kb_reindex_cuts_them_again(tmp_path, run_kb):
    home, sources = tmp_path / "kb", tmp_path / "src"
    sources.mkdir()
    (sources / "survey.md").write_text("# Varn valley survey\n\n" + "\n".join(LINES) + "\n", encoding="utf-8")
    now = make_settings(home).chunking
    assert (
        run_kb("--home", str(home), "ingest", str(sources), env={"KB_CHUNK_OVERLAP_TOKENS": "0"}).returncode
        == 0
    )
    before, cut = chunks_of(home)
    assert cut == "160/0" != now and len(before) >= 3
    assert not any(shared(a, b) for a, b in zip(before, before[1:], strict=False))

    warning = f"passages cut as 160/0 tokens (largest/overlap), kb now cuts {now}"
    changed = flagged_until_reindexed(run_kb, home, sources, warning=warning, event="index.chunking_changed")
    assert [(e["index"], e["current"], e["fix"]) for e in changed] == [("160/0", now, "kb reindex")]
    after, cut = chunks_of(home)
    assert cut == now
    assert all(shared(a, b) for a, b in zip(after, after[1:], strict=False))  # each repeats the previous end


def test_an_index_from_a_kb_that_did_not_record_its_cut_is_flagged_too(tmp_path, run_kb):
    home, sources = tmp_path / "kb", tmp_path / "src"
    sources.mkdir()
    (sources / "survey.md").write_text("\n".join(LINES[:3]) + "\n", encoding="utf-8")
    assert run_kb("--home", str(home), "ingest", str(sources)).returncode == 0
    with Index(home / "knowledge" / "index" / "kb.sqlite3") as index, index.write() as conn:
        conn.execute("DELETE FROM meta WHERE key = 'chunking'")  # as an index made by an older kb
    now = make_settings(home).chunking
    chinese = run_kb("--home", str(home), "doctor", env={"KB_LANGUAGE": "zh-Hant"}).stdout
    assert f"段落由較早版本的 kb 切分，kb 現在切成 {now} 個詞元（最大／重疊）" in chinese
    assert "kb reindex" in chinese
    warning = f"passages cut by an earlier kb, kb now cuts {now} tokens (largest/overlap)"
    changed = flagged_until_reindexed(run_kb, home, sources, warning=warning, event="index.chunking_changed")
    assert [(e["index"], e["current"]) for e in changed] == [(None, now)]
    assert chunks_of(home)[1] == now


def test_kb_reindex_reads_a_folder_sources_notes_again_and_cuts_them_as_kb_cuts_them_now(tmp_path, run_kb):
    home, vault = tmp_path / "kb", tmp_path / "vault"
    vault.mkdir()
    (vault / "survey.md").write_text("# Varn valley survey\n\n" + "\n".join(LINES) + "\n", encoding="utf-8")
    old = {"KB_CHUNK_OVERLAP_TOKENS": "0"}
    assert (
        run_kb("--home", str(home), "sources", "add", str(vault), "--name", "vault", env=old).returncode == 0
    )
    with Index(home / "knowledge" / "index" / "kb.sqlite3") as index:
        (doc,) = index.documents()
    before, _ = chunks_of(home)
    assert len(before) >= 3 and not any(shared(a, b) for a, b in zip(before, before[1:], strict=False))

    reindexed = run_kb("--home", str(home), "reindex")
    assert reindexed.returncode == 0
    assert "vault: 1 indexed" in reindexed.stdout, reindexed.stdout
    after, cut = chunks_of(home)
    assert cut == make_settings(home).chunking
    assert all(shared(a, b) for a, b in zip(after, after[1:], strict=False))
    with Index(home / "knowledge" / "index" / "kb.sqlite3") as index:
        (again,) = index.documents()
    assert (again.id, again.raw_path) == (doc.id, doc.raw_path)  # the same note, cited as before
    assert (
        (vault / "survey.md").read_text(encoding="utf-8").startswith("# Varn valley survey")
    )  # never written
    assert "ok    index          1 documents" in run_kb("--home", str(home), "doctor").stdout


def test_a_reindex_that_cannot_read_a_source_again_keeps_its_notes_and_says_so(tmp_path, run_kb):
    home, vault = tmp_path / "kb", tmp_path / "vault"
    vault.mkdir()
    (vault / "survey.md").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    old = {"KB_CHUNK_OVERLAP_TOKENS": "0"}
    assert (
        run_kb("--home", str(home), "sources", "add", str(vault), "--name", "vault", env=old).returncode == 0
    )
    before, _ = chunks_of(home)

    too_small = run_kb("--home", str(home), "reindex", env={"KB_MAX_SOURCE_MB": "0.001"})  # the note: 2 KB
    assert too_small.returncode == 1
    assert "vault: 0 indexed" in too_small.stdout and "1 failed" in too_small.stdout
    assert "could not be read again" in too_small.stderr and "run kb reindex again" in too_small.stderr
    assert chunks_of(home) == (before, "160/0")  # the note as it was, and the index still says so
    assert "passages cut as 160/0 tokens" in run_kb("--home", str(home), "doctor").stdout

    vault.rename(tmp_path / "elsewhere")  # an unmounted disk
    gone = run_kb("--home", str(home), "reindex")
    assert gone.returncode == 1 and "could not be read again" in gone.stderr
    assert chunks_of(home) == (before, "160/0")

    (tmp_path / "elsewhere").rename(vault)
    assert run_kb("--home", str(home), "reindex").returncode == 0
    after, cut = chunks_of(home)
    assert cut == make_settings(home).chunking and after != before


def test_a_reindex_with_a_broken_sources_entry_rebuilds_the_rest_and_says_so(tmp_path, run_kb):
    home, sources = tmp_path / "kb", tmp_path / "src"
    sources.mkdir()
    (sources / "survey.md").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert run_kb("--home", str(home), "ingest", str(sources)).returncode == 0
    (home / "kb.toml").write_text('[[sources]]\nname = "my notes!"\npath = "/nowhere"\n', encoding="utf-8")
    broken = run_kb("--home", str(home), "reindex")
    assert broken.returncode == 1
    assert "reindexed 1 documents" in broken.stdout
    assert "kb: the folder sources were not read again:" in broken.stderr and "kb.toml" in broken.stderr


def test_the_daemon_says_at_its_start_that_the_index_was_cut_otherwise(tmp_path):
    import structlog

    from daemon.main import open_daemon
    from knowledge.model.tokenizer import ApproxCounter
    from tests.conftest import ingest_texts

    home = tmp_path / "kb"
    ingest_texts(
        make_settings(home, KB_CHUNK_OVERLAP_TOKENS="0", KB_EMBED="off"), {"survey.md": "\n".join(LINES)}
    )
    settings = make_settings(home, KB_EMBED="off", KB_SUMMARIES="off")
    with structlog.testing.capture_logs() as logs, open_daemon(settings, ApproxCounter()):
        pass
    changed = [e for e in logs if e["event"] == "index.chunking_changed"]
    assert [(e["index"], e["current"], e["fix"]) for e in changed] == [
        ("160/0", settings.chunking, "kb reindex")
    ]
