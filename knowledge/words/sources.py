"""Folder sources in words: why a source is refused, why a file is left out, and the lines of
``kb sources`` (the reason codes are knowledge.sources'; the sentences are the reader's language)."""

from __future__ import annotations

from knowledge.words.catalog import N_, Words
from knowledge.words.reasons import FAILED

# Why a source cannot be added, removed or rescanned (knowledge.errors.SourceRefused reasons).
REFUSALS = {
    "bad-name": N_("{name} cannot name a source: use letters, digits, - _ or . (up to 40)"),
    "name-taken": N_("a source named {name} is already there ({path}); choose another name"),
    "missing": N_("{path} does not exist"),
    "not-folder": N_("{path} is a file; a source is a folder"),
    "unreadable": N_("{path} cannot be read (its permissions)"),
    "inside-home": N_("{path} is inside kb's home ({home}); kb's own files are never a source"),
    "contains-home": N_("{path} holds kb's home ({home}); choose a folder beside it"),
    "overlaps": N_("{path} overlaps the source {other} ({other_path}); one folder, one source"),
    "unknown": N_("there is no source named {name}; the sources are: {names}"),
    "unknown-tag": N_("no document carries the tag #{tag}; the tags used most are: {tags}"),
    "inside-source": N_("{path} is in the source {name}, which kb keeps in sync already; nothing was added"),
}

# Why a file of a source is not indexed (knowledge.sources.rules and knowledge.sources.sync reasons).
LEFT_OUT = {
    "hidden": N_("a hidden file or folder (an app's settings, trash or versions)"),
    "placeholder": N_("an iCloud placeholder: the file is not downloaded to this computer"),
    "system": N_("a system or tool folder"),
    "conflict": N_("a sync conflict copy"),
    "temporary": N_("a temporary or lock file"),
    "excluded": N_("left out by the source's rule {rule}"),
    "not-included": N_("not matched by the source's include rules"),
    "link-out": N_("a link leading outside the source"),
    "link": N_("a link; the file it leads to is indexed at its own path"),
    "not-regular": N_("not a regular file"),
    "too-deep": N_("a folder too deep: what is below it is left out"),
    "unreadable": N_("cannot be read now ({error}); tried again at the next rescan"),
    "changing": N_("it kept changing while being read; tried again at the next rescan"),
    "too-large": N_("larger than KB_MAX_SOURCE_MB"),
    "convert": N_("kb cannot read it: {error}"),
}

# What kb sources says it did.
SAID = {
    "added": N_("added the source {name}: {path}"),
    "removed": N_("removed the source {name}; its files stay where they are"),
    "daemon-forgets": N_("the running daemon forgets its documents now"),
    "daemon-indexes": N_("the running daemon indexes {name} now; follow it with: kb sources {name}"),
    "synced": N_(
        "{name}: {indexed} indexed, {moved} moved, {forgotten} forgotten, {unchanged} unchanged,"
        " {skipped} skipped, {failed} failed"
    ),
    "none": N_("no sources yet; add one with: kb sources add PATH --name NAME"),
    "absent": N_("(not there now: its documents are kept)"),
}

# Where a source's document is opened (knowledge.sources.opening), before its link or path.
OPENING = {
    "obsidian": N_("Open it in Obsidian:"),
    "file": N_("The file on your computer:"),
    "gone": N_("The file could not be read there now ({error})."),
}

STATES = {
    "indexed": N_("indexed"),
    "waiting": N_("waiting"),
    "skipped": N_("skipped"),
    "failed": N_("failed"),
}


def left_out(words: Words, reason: str, *, error: str = "", rule: str = "") -> str:
    """Why a file is left out, in the reader's language: a file kb cannot read by the converter's own
    (English) words for an English reader, by what its reason means for another."""
    message = LEFT_OUT.get(reason)
    if message is None and words.language != "en" and reason in FAILED:
        return words.tr(LEFT_OUT["convert"], error=words.tr(FAILED[reason]))
    return words.tr(message or LEFT_OUT["convert"], error=error or reason, rule=rule)


def counts_line(words: Words, counts: dict[str, int]) -> str:
    """``12 indexed, 3 waiting, 1 skipped, 0 failed``."""
    return ", ".join(f"{words.number(counts.get(k, 0))} {words.tr(STATES[k])}" for k in STATES)


def forgot(words: Words, n: int) -> str:
    """``forgot 12 documents``."""
    return words.ntr("forgot {n} document", "forgot {n} documents", n)
