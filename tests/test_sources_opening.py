"""Where a folder source's document is opened: an Obsidian vault's note by its obsidian:// link (the vault
named by its folder), a plain folder's file by its path; a document of raw/ by neither. kb search --json
says it too."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from knowledge.sources.opening import Opening, obsidian_url, opening, read_only
from knowledge.sources.registry import Source
from tests.test_scope import kb_with


@pytest.mark.parametrize(
    ("vault", "path", "url"),
    [
        ("Vault", "note.md", "obsidian://open?vault=Vault&file=note.md"),
        ("My Vault", "Projects/NAS upgrade.md", "obsidian://open?vault=My%20Vault&file=Projects%2FNAS%20upgrade.md"),
        ("筆記", "租屋/押金.md", "obsidian://open?vault=%E7%AD%86%E8%A8%98&file=%E7%A7%9F%E5%B1%8B%2F%E6%8A%BC%E9%87%91.md"),
        ("a&b", "x?y#z=1.md", "obsidian://open?vault=a%26b&file=x%3Fy%23z%3D1.md"),
    ],
)  # fmt: skip
def test_the_obsidian_link_encodes_the_vault_and_the_path(vault, path, url):
    assert obsidian_url(vault, path) == url


def test_a_vault_gives_its_link_a_plain_folder_its_path_anything_else_nothing(tmp_path):
    vault, plain = tmp_path / "My Vault", tmp_path / "papers"
    (vault / ".obsidian").mkdir(parents=True)
    plain.mkdir()
    sources = [Source("vault", vault), Source("papers", plain)]
    assert opening(sources, "vault:Projects/NAS upgrade.md") == Opening(
        "vault", "Projects/NAS upgrade.md", vault / "Projects" / "NAS upgrade.md", vault,
        "obsidian://open?vault=My%20Vault&file=Projects%2FNAS%20upgrade.md",
    )  # fmt: skip
    found = opening(sources, "papers:lease/rent.pdf")
    assert found is not None and found.obsidian_url is None
    assert found.target == str(plain / "lease" / "rent.pdf")
    assert opening(sources, "raw/lake-quillan-1a2b3c4d.md") is None  # an inbox file: kb keeps its original
    assert opening(sources, "gone:note.md") is None  # a source no longer registered
    linked = tmp_path / "Vault link"
    linked.symlink_to(vault)  # the vault is named by its folder, as Obsidian names it
    there = opening([Source("vault", linked)], "vault:a.md")
    assert there is not None and there.obsidian_url == "obsidian://open?vault=My%20Vault&file=a.md"
    assert there.file == linked / "a.md"


def test_the_file_is_read_only_through_real_folders(tmp_path):
    root = tmp_path / "papers"
    (root / "lease").mkdir(parents=True)
    (root / "lease" / "rent.txt").write_text("deposit")
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", root / "linked.txt")
    sources = [Source("papers", root)]
    with read_only(opening(sources, "papers:lease/rent.txt")) as fh:
        assert fh.read() == b"deposit"
    for rel in ("linked.txt", "gone.txt"):
        with pytest.raises(OSError):
            read_only(opening(sources, f"papers:{rel}"))


def test_kb_search_json_says_what_opens_a_source_passage(tmp_path: Path, run_kb):
    home = kb_with(tmp_path, run_kb, {"inbox.md": "# Herons\n\nHerons nest by the river.\n"},
                   {"vault": {"Birds/heron.md": "# Heron notes\n\nThe grey heron nests by the river.\n"}})  # fmt: skip
    (tmp_path / "vault" / ".obsidian").mkdir()
    done = run_kb("--home", str(home), "search", "--json", "heron nests river")
    assert done.returncode == 0, done.stderr
    results = {r["title"]: r for r in json.loads(done.stdout)}
    assert results["Heron notes"]["open"] == "obsidian://open?vault=vault&file=Birds%2Fheron.md"
    assert results["Heron notes"]["source"] == "vault" and results["Heron notes"]["path"] == "Birds/heron.md"
    assert "open" not in results["Herons"]
