"""Which files of a source kb takes: its default ignores (apps' settings, sync tools' leftovers,
temporary files) and the source's own include and exclude globs, in gitignore syntax (``pathspec``).

Pure: a relative path ('/'-separated) in, the reason it is left out (or None) out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pathspec

# Checked in order: the first group that matches names the reason.
DEFAULT_IGNORES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("placeholder", (".*.icloud",)),  # iCloud: the real file is not on disk yet
    ("conflict", ("*.sync-conflict-*", "*conflicted copy*", "*(Conflicted copy*")),
    (
        "temporary",
        (
            "~$*",
            ".~lock.*#",
            "*.swp",
            "*.swx",
            "*~",
            "*.tmp",
            "*.part",
            "*.crdownload",
            "*.download",
            "*.partial",
        ),
    ),  # fmt: skip
    # .obsidian/ .git/ .trash/ .stfolder/ .stversions/ .dropbox.cache .DS_Store and every other dot-name
    ("hidden", (".*",)),
    (
        "system",
        (
            "node_modules/",
            "@eaDir/",
            "__MACOSX/",
            "#recycle/",
            "$RECYCLE.BIN/",
            "System Volume Information/",
            "desktop.ini",
            "Thumbs.db",
            "Icon\r",
        ),
    ),  # fmt: skip
)


@dataclass(frozen=True)
class Verdict:
    """Why a path is left out: a reason code, and the source's own rule when it is one of its globs."""

    reason: str
    rule: str = ""


class Rules:
    """The default ignores plus one source's include and exclude globs."""

    def __init__(self, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> None:
        self._defaults = [
            (reason, pathspec.GitIgnoreSpec.from_lines(lines)) for reason, lines in DEFAULT_IGNORES
        ]
        self._exclude = pathspec.GitIgnoreSpec.from_lines(exclude)
        self._exclude_lines = list(exclude)
        self._include = pathspec.GitIgnoreSpec.from_lines(include) if include else None

    def folder(self, rel: str) -> Verdict | None:
        """Why kb does not enter this folder (relative, without a trailing '/'), or None."""
        return self._left_out(rel + "/")

    def file(self, rel: str) -> Verdict | None:
        """Why kb does not take this file, or None."""
        verdict = self._left_out(rel)
        if verdict is None and self._include is not None and not self._include.match_file(rel):
            return Verdict("not-included")
        return verdict

    def _left_out(self, rel: str) -> Verdict | None:
        for reason, spec in self._defaults:
            if spec.match_file(rel):
                return Verdict(reason)
        result = self._exclude.check_file(rel)
        if result.include:
            return Verdict("excluded", self._exclude_lines[result.index] if result.index is not None else "")
        return None
