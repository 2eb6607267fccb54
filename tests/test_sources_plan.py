"""The pure parts of folder sources, as tables: which paths the rules leave out and why, what a walk
changes, which new paths are moved files, where a note's text begins in its file."""

import pytest

from knowledge.sources.plan import Known, first_line, match_moves, plan
from knowledge.sources.rules import Rules
from knowledge.sources.scan import Seen


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("Projects/NAS.md", None),
        ("notes.txt", None),
        (".obsidian/workspace.json", "hidden"),
        ("Daily/.DS_Store", "hidden"),
        ("Papers/.report.pdf.icloud", "placeholder"),
        ("bread.sync-conflict-20261201-120000-ABCDEFG.md", "conflict"),
        ("Budget (Conflicted copy 2026-12-01).xlsx", "conflict"),
        ("~$report.docx", "temporary"),
        (".~lock.report.odt#", "temporary"),
        ("draft.md.swp", "temporary"),
        ("download.pdf.part", "temporary"),
        ("web/node_modules/x/readme.md", "system"),
        ("Photos/@eaDir/thumb.jpg", "system"),
        ("__MACOSX/a.md", "system"),
        ("Templates/day.md", "excluded"),
        ("Archive/old.md", None),
        ("Archive/keep/secret.md", "excluded"),
    ],
)
def test_default_ignores_and_the_sources_globs(path, reason):
    rules = Rules(exclude=["Templates/", "Archive/keep/"])
    verdict = rules.file(path)
    assert (verdict.reason if verdict else None) == reason


def test_include_takes_only_matching_files_and_names_the_rule_that_excluded():
    rules = Rules(include=["*.md", "*.pdf"], exclude=["*.tmp.md", "Private/"])
    assert rules.file("a/b.md") is None and rules.file("paper.pdf") is None
    assert rules.file("photo.jpg").reason == "not-included"
    assert (rules.file("x.tmp.md").reason, rules.file("x.tmp.md").rule) == ("excluded", "*.tmp.md")
    assert rules.folder("Private").rule == "Private/"
    assert rules.folder("Projects") is None  # include globs never keep kb out of a folder


def known(path, size=10, mtime=1, sha="s", status="indexed", doc="d", reason=None):
    return Known(path, size, mtime, sha, status, doc, reason)


def test_a_walk_against_what_is_known():
    k = {
        "same.md": known("same.md", doc="d1"),
        "edited.md": known("edited.md", size=5, doc="d2"),
        "gone.md": known("gone.md", doc="d3"),
        "lost-doc.md": known("lost-doc.md", doc="d4"),  # its document went (a rebuild, a restore)
        "binary.bin": known("binary.bin", status="skipped", doc=None, reason="binary"),
        "locked.md": known("locked.md", status="failed", doc=None, reason="unreadable"),
    }
    seen = {
        p: Seen(10, 1) for p in ("same.md", "edited.md", "lost-doc.md", "binary.bin", "locked.md", "new.md")
    }
    steps = plan(k, seen, documents={"d1", "d2", "d3"})
    assert steps.unchanged == ["binary.bin", "same.md"]
    assert steps.to_read == ["edited.md", "locked.md", "lost-doc.md", "new.md"]
    assert steps.gone == ["gone.md"]


def test_moves_are_the_same_bytes_at_a_new_path_paired_in_order():
    gone = {"a/x.md": known("a/x.md", sha="1"), "a/y.md": known("a/y.md", sha="1"), "z.md": known("z.md", sha="2"),
            "bad.bin": known("bad.bin", sha="3", status="skipped")}  # fmt: skip
    new = {"b/x.md": "1", "b/y.md": "1", "c.md": "9", "d.bin": "3"}
    assert match_moves(new, gone) == {"b/x.md": "a/x.md", "b/y.md": "a/y.md"}


@pytest.mark.parametrize(
    ("original", "markdown", "line"),
    [
        ("# Title\n\nText.\n", "# Title\n\nText.\n", 1),
        ("---\ntitle: T\ntags: [a]\n---\n\n# T\n\nText.\n", "# T\n\nText.\n", 6),
        ("\n\n\n# Late start\r\nText.\r\n", "# Late start\nText.\n", 4),
        ("---\nunclosed front matter\n", "---\nunclosed front matter\n", 1),
        ("", "", 1),
    ],
)
def test_where_the_text_begins_in_the_file(original, markdown, line):
    assert first_line(original, markdown) == line
