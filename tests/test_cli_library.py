"""kb ls, kb rm and kb restore as a user runs them: real files, and a real daemon process beside them."""

import json
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.store.index import Index
from tests.conftest import make_settings, subprocess_env
from tests.test_daemon import wait_for

T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def log_records(home: Path) -> list[dict]:
    path = home / "runs" / "logs" / "kb.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def library(tmp_path, run_kb):
    """A knowledge base with three documents indexed a minute apart; (home, ids by title)."""
    home = tmp_path / "kb"
    settings = make_settings(home)
    files = {
        "heron.md": "# Heron survey\n\nThe heron count at pond 6 was 42 birds in March.\n",
        "otter.md": "# Otters of the weir\n\nOtters at the weir hold hands while they sleep.\n",
        "kettle.html": "<html><head><title>Kettle descaling</title></head><body><p>Citric acid removes"
        " limescale from a kettle in ten minutes.</p></body></html>",
    }
    minutes = iter(range(100))
    settings.inbox.mkdir(parents=True)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(
            settings, index, ApproxCounter(), clock=lambda: T0 + timedelta(minutes=next(minutes))
        )
        for name, text in files.items():
            (settings.inbox / name).write_text(text)
            assert ingestor.ingest(settings.inbox / name).status == "indexed"
    listed = json.loads(run_kb("--home", str(home), "ls", "--json").stdout)
    return home, {d["title"]: d["id"] for d in listed}


def test_ls_lists_newest_first_filters_by_words_and_prints_json(library, run_kb):
    home, ids = library
    out = run_kb("--home", str(home), "ls")
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.strip().splitlines()
    assert [line.split("  ")[2] for line in lines] == [
        "Kettle descaling",
        "Otters of the weir",
        "Heron survey",
    ]
    assert re.fullmatch(r"doc-[0-9a-f]{16}  2025-03-01 09:\d\d  Kettle descaling  \(kettle\.html\)", lines[0])

    data = json.loads(run_kb("--home", str(home), "ls", "--json").stdout)
    assert list(data[0]) == ["id", "title", "indexed_at", "source_name", "source_url", "raw_path", "chunks"]
    assert [d["source_name"] for d in data] == ["kettle.html", "otter.md", "heron.md"]
    assert data[2]["raw_path"].startswith("raw/heron-") and data[2]["chunks"] == 1

    assert [d["title"] for d in json.loads(run_kb("--home", str(home), "ls", "--json", "WEIR").stdout)] == [
        "Otters of the weir"
    ]
    assert [
        d["title"] for d in json.loads(run_kb("--home", str(home), "ls", "--json", "heron.md").stdout)
    ] == ["Heron survey"]
    assert (
        json.loads(run_kb("--home", str(home), "ls", "--json", "heron", "otter").stdout) == []
    )  # every word must match
    assert run_kb("--home", str(home), "ls", "zebra").stdout.strip() == "no documents match"

    limited = run_kb("--home", str(home), "ls", "--limit", "1").stdout.strip().splitlines()
    assert len(limited) == 2 and "Kettle descaling" in limited[0] and limited[1].startswith("… 2 more")
    assert run_kb("--home", str(tmp_home := home.parent / "empty"), "ls").stdout.startswith(
        "no documents yet"
    )
    assert not (tmp_home / "knowledge" / "index").exists()  # listing never creates an index


def test_rm_then_restore_from_the_terminal(library, run_kb):
    home, ids = library
    removed = run_kb("--home", str(home), "rm", ids["Heron survey"])
    assert removed.returncode == 0, removed.stderr
    match = re.fullmatch(
        rf"removed  {ids['Heron survey']}  'Heron survey' → trash (\S+); undo with: kb restore (\S+)\n",
        removed.stdout,
    )
    assert match and match.group(1) == match.group(2)
    trash_id = match.group(1)
    again = run_kb("--home", str(home), "rm", ids["Heron survey"])  # removed twice: where it went is said
    assert again.returncode == 1
    assert f"{ids['Heron survey']} was removed already; kb restore {trash_id} brings it back" in again.stderr
    assert "Heron survey" not in run_kb("--home", str(home), "ls").stdout
    assert "42 birds" not in run_kb("--home", str(home), "search", "heron count at pond 6").stdout

    listed = run_kb("--home", str(home), "restore")
    assert listed.returncode == 0
    assert re.match(
        rf"{trash_id}  removed \d{{4}}-\d\d-\d\d \d\d:\d\d  Heron survey  \({ids['Heron survey']}, kept until ",
        listed.stdout,
    )
    assert listed.stdout.strip().endswith("restore one with: kb restore TRASH_ID")

    back = run_kb("--home", str(home), "restore", trash_id)
    assert back.returncode == 0, back.stderr
    assert back.stdout == f"restored  {ids['Heron survey']}  'Heron survey'\n"
    assert "42 birds" in run_kb("--home", str(home), "search", "heron count at pond 6").stdout
    assert run_kb("--home", str(home), "restore").stdout.strip() == "the trash is empty"


def test_unknown_ids_fail_with_a_clear_message(library, run_kb):
    home, ids = library
    missing = run_kb("--home", str(home), "rm", "doc-0000000000000000", ids["Otters of the weir"])
    assert missing.returncode == 1
    assert "no document 'doc-0000000000000000'" in missing.stderr and "kb ls" in missing.stderr
    assert missing.stdout.startswith(f"removed  {ids['Otters of the weir']}")  # the others are still done
    for bad in ("../../etc", "nope"):
        out = run_kb("--home", str(home), "restore", bad)
        assert out.returncode == 1 and out.stdout == ""
        assert ("no trash entry" in out.stderr) or ("not a document or trash id" in out.stderr)
    assert run_kb("--home", str(home), "rm").returncode == 2  # usage


def test_help_says_how_to_undo(tmp_path, run_kb):
    rm_help = " ".join(run_kb("--home", str(tmp_path), "rm", "--help").stdout.split())
    assert "kb restore TRASH_ID" in rm_help and "30 days" in rm_help
    assert "list the trash" in " ".join(run_kb("--home", str(tmp_path), "restore", "--help").stdout.split())
    assert "--limit N" in run_kb("--home", str(tmp_path), "ls", "--help").stdout


def test_rm_beside_a_running_daemon_is_done_by_the_daemon(library, run_kb):
    home, ids = library
    daemon = subprocess.Popen(
        [sys.executable, "-m", "cli", "--home", str(home), "daemon"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(KB_SETTLE_S="0.2"),
    )
    try:
        wait_for(lambda: any(r["event"] == "daemon.start" for r in log_records(home)), what="the daemon")
        # KB_LOCK_WAIT_S=0: kb rm could not wait for the lock; only the daemon can do it.
        removed = run_kb("--home", str(home), "rm", ids["Otters of the weir"], env={"KB_LOCK_WAIT_S": "0"})
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout.startswith(
            f"removed  {ids['Otters of the weir']}  'Otters of the weir' → trash "
        )
        trash_id = removed.stdout.split("kb restore ")[1].strip()
        done = [r for r in log_records(home) if r["event"] == "request.done"]
        assert done and done[0]["op"] == "remove" and done[0]["target"] == ids["Otters of the weir"]
        assert "Otters" not in run_kb("--home", str(home), "ls").stdout

        back = run_kb("--home", str(home), "restore", trash_id, env={"KB_LOCK_WAIT_S": "0"})
        assert back.returncode == 0 and "Otters of the weir" in back.stdout, back.stderr
        assert "hold hands" in run_kb("--home", str(home), "search", "otters hold hands").stdout
        events = [r["event"] for r in log_records(home)]
        assert events.count("trash.removed") == 1 and events.count("trash.restored") == 1
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=20)
        daemon.stderr.close()
    assert daemon.returncode == 0


def test_rm_while_no_daemon_runs_but_another_writer_holds_the_lock_waits_for_it(library, run_kb):
    from knowledge.ingest.lock import WriterLock

    home, ids = library
    with WriterLock(home / "knowledge" / "writer.lock", role="kb reindex"):
        refused = run_kb("--home", str(home), "rm", ids["Heron survey"], env={"KB_LOCK_WAIT_S": "0.2"})
    assert refused.returncode == 1 and "another kb process is writing" in refused.stderr
    assert "Heron survey" in run_kb("--home", str(home), "ls").stdout
