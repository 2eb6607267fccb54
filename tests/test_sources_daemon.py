"""The daemon keeps a folder source in sync from real watchdog events on a real folder: edits, a rename
across folders, deletes, a burst of edits, a source added and removed while it runs, a restart that
re-indexes nothing, kill -9 in the middle of a first scan, and the owner's folder left exactly as it was."""

import os
import signal
import sqlite3
from pathlib import Path

import pytest

from daemon.main import background
from knowledge.errors import IndexError_
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.sources import state
from knowledge.sources.registry import Source, config_file, write_sources
from knowledge.store.index import Index
from tests.conftest import make_settings
from tests.sources_vault import make_vault, snapshot
from tests.test_daemon import running_daemon, wait_for

ENV = {"KB_SETTLE_S": "0.2", "KB_RESCAN_S": "3600"}  # events alone keep it in sync: no rescan in a test


def paths(settings) -> dict[str, str]:
    """raw_path → document id, as a reader sees the index."""
    try:
        index = Index(settings.index_path, readonly=True)
    except IndexError_:
        return {}
    with index:
        return {d.raw_path: d.id for d in index.documents()}


def texts(settings, query: str) -> str:
    with Index(settings.index_path, readonly=True) as index:
        return " ".join(h.text for h in search(index, query, k=5))


def rowids(settings, raw_path: str) -> list[int]:
    with Index(settings.index_path, readonly=True) as index:
        doc_id = state.document_for(index.conn, raw_path)
        return [
            r
            for (r,) in index.conn.execute(
                "SELECT rowid FROM chunks WHERE document_id = ? ORDER BY rowid", (doc_id,)
            )
        ]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return make_vault(tmp_path / "Vault")


@pytest.fixture
def settings(tmp_path: Path, vault: Path):
    s = make_settings(tmp_path / "kb", **ENV)
    s.home.mkdir(parents=True)
    (s.home / "kb.toml").write_text('log_level = "info"\n', encoding="utf-8")
    write_sources(config_file(s.home), [Source("vault", vault)])
    return s


def test_edits_renames_and_deletes_are_followed_and_the_vault_is_never_written(settings, vault):
    with background(settings, ApproxCounter()) as daemon:
        wait_for(lambda: len(paths(settings)) == 4, what="the vault to be indexed")
        # an edit: the new text answers, the old never again
        (vault / "notes.txt").write_text(
            "The bicycle lock code is in the red folder now.\n", encoding="utf-8"
        )
        wait_for(lambda: "red folder" in texts(settings, "bicycle lock code"), what="the edit")
        assert "blue notebook" not in texts(settings, "bicycle lock code")
        # a rename across folders: the same document and the same chunk rows (so the same vectors)
        before = paths(settings)["vault:Recipes/bread.md"], rowids(settings, "vault:Recipes/bread.md")
        (vault / "Archive").mkdir()
        os.rename(vault / "Recipes" / "bread.md", vault / "Archive" / "sourdough.md")
        wait_for(lambda: "vault:Archive/sourdough.md" in paths(settings), what="the rename")
        assert "vault:Recipes/bread.md" not in paths(settings)
        assert (
            paths(settings)["vault:Archive/sourdough.md"],
            rowids(settings, "vault:Archive/sourdough.md"),
        ) == before
        # a delete: forgotten
        (vault / "Daily" / "2026-12-01.md").unlink()
        wait_for(lambda: "vault:Daily/2026-12-01.md" not in paths(settings), what="the delete")
        assert "plumber" not in texts(settings, "when does the plumber come")
        # a folder moved whole, then an app's settings folder and a temporary file: left out
        os.rename(vault / "Projects", vault / "Done")
        (vault / ".obsidian").mkdir()
        (vault / ".obsidian" / "workspace.json").write_text("{}")
        (vault / "draft.md.swp").write_text("half a draft")
        wait_for(lambda: "vault:Done/NAS upgrade.md" in paths(settings), what="the folder moved whole")
        after_changes = snapshot(vault)
        assert daemon.wait_idle(30)
        assert sorted(paths(settings)) == [
            "vault:Archive/sourdough.md",
            "vault:Done/NAS upgrade.md",
            "vault:notes.txt",
        ]
    assert snapshot(vault) == after_changes  # kb wrote, moved and touched nothing in the vault


def test_a_burst_of_a_thousand_edits_settles_on_the_last_text(settings, vault):
    with background(settings, ApproxCounter()) as daemon:
        wait_for(lambda: len(paths(settings)) == 4, what="the vault to be indexed")
        burst = vault / "burst"
        burst.mkdir()
        for round_ in range(10):
            for n in range(100):
                (burst / f"note-{n:03d}.md").write_text(f"# Note {n}\n\nversion{round_} of note {n}.\n")
        wait_for(lambda: len(paths(settings)) == 104, timeout_s=60, what="the hundred notes")
        assert daemon.wait_idle(60)
        with Index(settings.index_path, readonly=True) as index:
            bodies = [t for (t,) in index.conn.execute("SELECT text FROM chunks WHERE text LIKE '%version%'")]
        assert len(bodies) == 100 and all("version9" in b for b in bodies)


def test_a_source_added_and_removed_while_the_daemon_runs(settings, vault, tmp_path, run_kb):
    papers = tmp_path / "Papers"
    papers.mkdir()
    (papers / "owl.md").write_text("# Owls\n\nThe barn owl hunts at dusk over the meadow.\n")
    with background(settings, ApproxCounter()):
        wait_for(lambda: len(paths(settings)) == 4, what="the vault to be indexed")
        added = run_kb(
            "--home", str(settings.home), "sources", "add", str(papers), "--name", "papers", env=ENV
        )
        assert added.returncode == 0 and "the running daemon indexes papers now" in added.stdout
        wait_for(lambda: "papers:owl.md" in paths(settings), what="the added source")
        removed = run_kb("--home", str(settings.home), "sources", "rm", "vault", env=ENV)
        assert removed.returncode == 0, removed.stderr
        wait_for(lambda: sorted(paths(settings)) == ["papers:owl.md"], what="the removed source forgotten")
    assert (vault / "notes.txt").is_file() and (papers / "owl.md").is_file()
    assert 'log_level = "info"' in (settings.home / "kb.toml").read_text()  # the owner's settings kept


def test_a_restart_with_nothing_changed_indexes_nothing_again(settings, vault):
    with background(settings, ApproxCounter()) as daemon:
        wait_for(lambda: len(paths(settings)) == 4, what="the vault to be indexed")
        assert daemon.wait_idle(30)
    first = {p: rowids(settings, p) for p in paths(settings)}
    (vault / "Daily" / "2026-12-02.md").write_text("# Tuesday\n\nThe boiler was serviced.\n")  # while down
    with background(settings, ApproxCounter()) as daemon:
        wait_for(lambda: "vault:Daily/2026-12-02.md" in paths(settings), what="the note added while down")
        assert daemon.wait_idle(30)
    again = {p: rowids(settings, p) for p in paths(settings)}
    assert {p: again[p] for p in first} == first  # the same rows: nothing read, chunked or embedded again


def test_a_kill_during_the_first_scan_then_a_restart_indexes_every_note_once(tmp_path):
    vault = tmp_path / "Big"
    for n in range(600):
        folder = vault / f"Area {n % 30}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note {n}.md").write_text(f"# Note {n}\n\nThe word marker{n} is in note {n} only.\n")
    settings = make_settings(tmp_path / "kb", **ENV)
    settings.home.mkdir(parents=True)
    write_sources(config_file(settings.home), [Source("big", vault)])
    before = snapshot(vault)

    def indexed() -> int:
        try:
            with Index(settings.index_path, readonly=True) as index:
                return index.conn.execute(
                    "SELECT count(*) FROM source_files WHERE status = 'indexed'"
                ).fetchone()[0]
        except (IndexError_, sqlite3.Error):
            return 0

    with running_daemon(settings.home, KB_RESCAN_S="3600") as first:
        wait_for(lambda: indexed() > 100, timeout_s=60, what="the first scan under way")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    assert 0 < indexed() < 600
    with running_daemon(settings.home, KB_RESCAN_S="3600") as second:
        wait_for(lambda: indexed() == 600, timeout_s=120, what="every note indexed")
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    with Index(settings.index_path) as index:  # the daemon has stopped; FTS5's check writes
        docs = index.documents()
        assert len(docs) == 600 and {d.raw_path for d in docs} == {
            f"big:Area {n % 30}/note {n}.md" for n in range(600)
        }  # each note once: nothing lost, nothing twice
        assert index.chunk_count() == 600 and index.integrity_errors() == []
        assert "note 7.md" in search(index, "marker7", k=1)[0].raw_path
    assert snapshot(vault) == before
