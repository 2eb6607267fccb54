"""kb sources as the owner types it (in process): add, list, --json, one source's files left out with
their reasons, rescan, rm; refusals with the reason; kb.toml kept; kb ingest of a source's file."""

import json
from pathlib import Path

import pytest

from knowledge.config import load_settings
from knowledge.sources.registry import Source, read_sources, replace_sources
from tests.conftest import SAFE_ENV


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "kb"
    home.mkdir()
    (home / "kb.toml").write_text("# my settings\nsearch_k = 7\n", encoding="utf-8")
    return home


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "Vault"
    (root / ".obsidian").mkdir(parents=True)
    (root / ".obsidian" / "app.json").write_text("{}")
    (root / "Templates").mkdir()
    (root / "Templates" / "day.md").write_text("# {{date}}\n")
    (root / "owl.md").write_text("# Owls\n\nThe barn owl hunts at dusk over the meadow.\n")
    (root / "icon.svg.bin").write_bytes(b"\x7fELF" + bytes(100))
    (tmp_path / "secret.md").write_text("The safe combination is 4-8-15.\n")
    (root / "linked secret.md").symlink_to(tmp_path / "secret.md")
    return root


def kb(run_kb, home: Path, *args: str):
    return run_kb("--home", str(home), *args)


def test_a_folder_is_added_listed_searched_rescanned_and_removed(run_kb, home, vault):
    added = kb(run_kb, home, "sources", "add", str(vault), "--name", "vault", "--exclude", "Templates/")
    assert added.returncode == 0, added.stderr
    assert "added the source vault" in added.stdout and "vault: 1 indexed" in added.stdout
    text = (home / "kb.toml").read_text()
    assert text.startswith("# my settings\nsearch_k = 7\n") and "[[sources]]" in text
    assert load_settings(SAFE_ENV, home=home).search_k == 7  # the settings still read, [[sources]] aside
    assert read_sources(home / "kb.toml") == [Source("vault", vault, (), ("Templates/",))]

    found = kb(run_kb, home, "search", "when does the barn owl hunt", "--json")
    top = json.loads(found.stdout)[0]
    assert (top["source"], top["path"], top["start_line"], top["end_line"]) == ("vault", "owl.md", 1, 3)

    table = kb(run_kb, home, "sources")
    assert "vault" in table.stdout and "1 indexed, 0 waiting, 4 skipped, 0 failed" in table.stdout
    one = kb(run_kb, home, "sources", "vault").stdout
    assert "linked secret.md: a link leading outside the source" in one
    assert "Templates/: left out by the source's rule Templates/" in one
    assert ".obsidian/: a hidden file or folder" in one
    assert "icon.svg.bin: kb cannot read it" in one
    listed = json.loads(kb(run_kb, home, "sources", "--json").stdout)
    assert listed[0]["counts"] == {"indexed": 1, "waiting": 0, "skipped": 4, "failed": 0}
    assert {i["path"]: i["reason"] for i in listed[0]["items"]} == {
        ".obsidian/": "hidden", "Templates/": "excluded", "icon.svg.bin": "binary", "linked secret.md": "link-out",
    }  # fmt: skip

    (vault / "heron.md").write_text("# Herons\n\nThe grey heron fishes at the pond at dawn.\n")
    waiting = json.loads(kb(run_kb, home, "sources", "--json").stdout)[0]["counts"]
    assert waiting["waiting"] == 1
    rescanned = kb(run_kb, home, "sources", "rescan", "vault")
    assert "vault: 1 indexed, 0 moved, 0 forgotten, 2 unchanged" in rescanned.stdout

    (vault / "Birds").mkdir()
    (vault / "Birds" / "owl.md").write_text("# Owls\n\nThe tawny owl calls at night.\n")
    kb(run_kb, home, "sources", "rescan", "vault")
    listed = kb(run_kb, home, "ls").stdout  # two notes named owl.md told apart, found by their folder
    assert "Owls  (vault:owl.md)" in listed and "Owls  (vault:Birds/owl.md)" in listed
    assert kb(run_kb, home, "ls", "birds").stdout.count("\n") == 1
    (vault / "Birds" / "owl.md").unlink()
    kb(run_kb, home, "sources", "rescan", "vault")

    status = json.loads(kb(run_kb, home, "status", "--json").stdout)
    assert status["sources"] == [{"name": "vault", "path": str(vault), "present": True, "indexed": 2,
                                  "skipped": 1, "failed": 0}]  # fmt: skip
    removed = kb(run_kb, home, "sources", "rm", "vault")
    assert removed.returncode == 0 and "forgot 2 documents" in removed.stdout
    assert json.loads(kb(run_kb, home, "search", "barn owl", "--json").stdout or "[]") == []
    assert (vault / "owl.md").is_file() and read_sources(home / "kb.toml") == []
    assert (home / "kb.toml").read_text() == "# my settings\nsearch_k = 7\n"


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("missing", "does not exist"),
        ("file", "is a file; a source is a folder"),
        ("in-home", "is inside kb's home"),
        ("holds-home", "holds kb's home"),
        ("inside-other", "overlaps the source vault"),
    ],
)
def test_a_source_that_cannot_be_added_is_refused_with_the_reason(run_kb, home, vault, tmp_path, where, said):
    assert kb(run_kb, home, "sources", "add", str(vault), "--name", "vault").returncode == 0
    path = {
        "missing": tmp_path / "nowhere",
        "file": vault / "owl.md",
        "in-home": home / "knowledge",
        "holds-home": tmp_path,
        "inside-other": vault / "Templates",
    }[where]
    (home / "knowledge").mkdir(exist_ok=True)
    refused = kb(run_kb, home, "sources", "add", str(path), "--name", "other")
    assert refused.returncode == 1 and said in refused.stderr
    assert [s.name for s in read_sources(home / "kb.toml")] == ["vault"]


def test_unknown_names_and_taken_names_are_refused(run_kb, home, vault, tmp_path):
    assert kb(run_kb, home, "sources", "add", str(vault), "--name", "vault").returncode == 0
    other = tmp_path / "Papers"
    other.mkdir()
    taken = kb(run_kb, home, "sources", "add", str(other), "--name", "vault")
    assert taken.returncode == 1 and "a source named vault is already there" in taken.stderr
    bad = kb(run_kb, home, "sources", "add", str(other), "--name", "../x")
    assert bad.returncode == 1 and "cannot name a source" in bad.stderr
    unknown = kb(run_kb, home, "sources", "rm", "papers")
    assert unknown.returncode == 1 and "no source named papers; the sources are: vault" in unknown.stderr


def test_kb_ingest_of_a_file_inside_a_source_says_so_and_adds_nothing(run_kb, home, vault):
    assert kb(run_kb, home, "sources", "add", str(vault), "--name", "vault").returncode == 0
    again = kb(run_kb, home, "ingest", str(vault / "owl.md"))
    assert again.returncode == 1 and "is in the source vault, which kb keeps in sync already" in again.stderr
    assert not any((home / "knowledge" / "raw").glob("*.md"))
    found = json.loads(kb(run_kb, home, "search", "barn owl", "--json").stdout)
    assert [(f["source"], f["path"]) for f in found] == [("vault", "owl.md")]  # once, from the source


def test_a_linked_source_folder_is_followed_once_and_named(run_kb, home, vault, tmp_path):
    link = tmp_path / "VaultLink"
    link.symlink_to(vault)
    added = kb(run_kb, home, "sources", "add", str(link), "--name", "vault")
    assert added.returncode == 0 and f"{link} → {vault}" in added.stdout
    assert f"{link} → {vault}" in kb(run_kb, home, "sources").stdout


def test_the_sources_tables_are_replaced_and_every_other_line_kept():
    text = 'search_k = 7\n\n[[sources]]\nname = "old"\npath = "/x"\n\n[[sources]]\nname = "b"\npath = "/y"\n'
    new = replace_sources(text, [Source("notes", Path('/home/me/My "Notes"'), ("*.md",))])
    assert (
        new
        == 'search_k = 7\n\n[[sources]]\nname = "notes"\npath = "/home/me/My \\"Notes\\""\ninclude = ["*.md"]\n'
    )
    assert replace_sources(new, []) == "search_k = 7\n"


def test_kb_rm_of_a_sources_document_is_refused_and_the_file_stays(run_kb, home, vault):
    assert kb(run_kb, home, "sources", "add", str(vault), "--name", "vault").returncode == 0
    doc_id = json.loads(kb(run_kb, home, "search", "barn owl", "--json").stdout)[0]["document_id"]
    refused = kb(run_kb, home, "rm", doc_id)
    assert (
        refused.returncode == 1
        and "vault:owl.md is a file of a folder source" in refused.stdout + refused.stderr
    )
    assert (vault / "owl.md").is_file()
    assert json.loads(kb(run_kb, home, "search", "barn owl", "--json").stdout)[0]["document_id"] == doc_id


def test_a_rescan_of_a_folder_that_is_not_there_says_so_and_keeps_its_notes(run_kb, home, vault, tmp_path):
    assert kb(run_kb, home, "sources", "add", str(vault), "--name", "vault").returncode == 0
    vault.rename(tmp_path / "unplugged")
    rescanned = kb(run_kb, home, "sources", "rescan", "vault")
    assert "vault: 0 indexed, 0 moved, 0 forgotten" in rescanned.stdout
    assert "(not there now: its documents are kept)" in rescanned.stdout
    found = json.loads(kb(run_kb, home, "search", "barn owl", "--json").stdout)
    assert found and found[0]["source"] == "vault"
