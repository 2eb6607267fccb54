"""Symbolic links in the inbox and in raw/: no file outside the knowledge base is ever read through one."""

import os
from pathlib import Path

from daemon.main import background
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.search import search
from knowledge.store.index import Index
from tests.conftest import make_settings
from tests.test_daemon import SETTLE, documents, idle, wait_for

SECRET = "PRIVATEKEYMATERIAL"


def private_folder(tmp_path: Path) -> Path:
    """A folder outside the knowledge base, like ~/.ssh, with files kb must never read."""
    keys = tmp_path / "private"
    keys.mkdir()
    (keys / "id_rsa.txt").write_text(f"{SECRET} do not index\n")
    (keys / "notes.md").write_text(f"# Keys\n\n{SECRET} in markdown\n")
    return keys


def package_with_links(where: Path, keys: Path) -> Path:
    """pkg/readme.md, pkg/keys -> private, pkg/deep/er/keys -> private: links at depth 1 and 3."""
    pkg = where / "pkg"
    (pkg / "deep" / "er").mkdir(parents=True)
    (pkg / "readme.md").write_text("# Package\n\nThe package readme mentions walruses.\n")
    (pkg / "keys").symlink_to(keys, target_is_directory=True)
    (pkg / "deep" / "er" / "keys").symlink_to(keys, target_is_directory=True)
    return pkg


def everything_under(folder: Path) -> str:
    """All bytes of all regular files under folder (not following links), as text."""
    out = []
    for here, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(here) / name
            if path.is_file() and not path.is_symlink():
                out.append(path.read_text(errors="replace"))
    return "\n".join(out)


def assert_nothing_leaked(settings, keys: Path) -> None:
    with Index(settings.index_path, readonly=True) as index:
        assert search(index, SECRET.lower(), k=5) == []
        assert all(SECRET not in d.title for d in index.documents())
    assert SECRET not in everything_under(settings.home / "knowledge")
    assert (keys / "id_rsa.txt").read_text().startswith(SECRET)  # untouched, never moved


def test_the_daemon_never_walks_through_a_folder_link_at_any_depth(tmp_path):
    keys = private_folder(tmp_path)
    settings = make_settings(tmp_path / "kb", KB_SETTLE_S=SETTLE, KB_RESCAN_S="1")
    staging = tmp_path / "staging"
    staging.mkdir()
    pkg = package_with_links(staging, keys)
    with background(settings, ApproxCounter()) as daemon:
        os.rename(pkg, settings.inbox / "pkg")  # moved in whole, links and all
        (settings.inbox / "top").symlink_to(keys, target_is_directory=True)
        wait_for(lambda: documents(settings), what="the package readme")
        walked = daemon.rescans
        wait_for(lambda: daemon.rescans >= walked + 2, what="two periodic rescans walking the inbox again")
        idle(daemon)
    assert [d.source_name for d in documents(settings)] == ["readme.md"]
    assert_nothing_leaked(settings, keys)
    assert not list(settings.failed.iterdir())


def test_kb_ingest_of_a_folder_skips_linked_folders_and_says_so(tmp_path, run_kb):
    keys = private_folder(tmp_path)
    pkg = package_with_links(tmp_path, keys)
    home = tmp_path / "kb"
    done = run_kb("--home", str(home), "ingest", str(pkg))
    assert done.returncode == 0, done.stderr
    assert "indexed    readme.md" in done.stdout
    assert done.stdout.count("skipped    keys: keys is a symbolic link") == 2
    settings = make_settings(home)
    assert_nothing_leaked(settings, keys)


def test_a_file_named_through_a_linked_folder_is_skipped(tmp_path):
    keys = private_folder(tmp_path)
    settings = make_settings(tmp_path / "kb")
    settings.inbox.mkdir(parents=True)
    package_with_links(settings.inbox, keys)
    (keys / "id_rsa.txt.source.json").write_text('{"source_url": "https://example.com/"}')
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, ApproxCounter())
        for path in (
            settings.inbox / "pkg" / "keys" / "id_rsa.txt",
            settings.inbox / "pkg" / "deep" / "er" / "keys" / "notes.md",
        ):
            outcome = ingestor.ingest(path)
            assert (outcome.status, outcome.reason) == ("skipped", "link")
    assert_nothing_leaked(settings, keys)


def test_links_in_raw_are_skipped_and_logged_by_reconcile_and_reindex(tmp_path):
    import structlog

    keys = private_folder(tmp_path)
    env_file = tmp_path / "kb.env"
    env_file.write_text(f"KB_TELEGRAM_TOKEN=123456:{SECRET}\n")
    settings = make_settings(tmp_path / "kb")
    settings.raw.mkdir(parents=True)
    (settings.raw / "good.md").write_text("# Good\n\nA raw note about narwhals.\n")
    (settings.raw / "env.md").symlink_to(env_file)
    (settings.raw / "keys.md").symlink_to(keys / "notes.md")
    with Index(settings.index_path) as index, structlog.testing.capture_logs() as logs:
        ingestor = Ingestor(settings, index, ApproxCounter())
        assert ingestor.reconcile_raw()["indexed"] == 1
        assert ingestor.sync_raw("env.md") == "unchanged"
        assert ingestor.reindex() == (1, 1)
        assert [d.title for d in index.documents()] == ["Good"]
    assert_nothing_leaked(settings, keys)
    skipped = {e["file"] for e in logs if e["event"] == "raw.skipped"}
    assert skipped == {"env.md", "keys.md"} and SECRET not in repr(logs)
