"""A note's text as it reads (Obsidian's conventions): links as their visible text, its inline #tags, the
notes it links to. Pure functions of the note's lines.

Links read as Obsidian shows them:

- ``[[Note]]`` → ``Note``; ``[[Note|shown text]]`` → ``shown text``;
- ``[[Note#Heading]]`` → ``Note > Heading``; ``[[#Heading]]`` (in the same note) → ``Heading``;
- ``[[Note^block]]``, ``[[Note#^block]]`` → ``Note`` (a block id says nothing);
- an embed, ``![[Note]]`` or ``![[photo.png|300]]``, is not inlined: its name stays (``Note``, ``photo.png``),
  so the embedded note is found once, as itself.

Every link's and embed's target (the note or file, without heading or block) is kept, in order.

A tag is ``#`` at the start of a line or after white space, then letters, marks or digits of any script,
``_``, ``-`` or ``/`` (``#押金``, ``#บ้าน``, ``#home/rent``), with at least one letter: never in fenced
code nor in a `code span`, never a heading (``# Title``: a space follows), never a URL's fragment or an
HTML entity (``page#part``, ``&#38;``: no space before). Lines are read one by one and keep their
number, so a passage's lines are still the file's lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from knowledge.text import distinct_tags, is_tag_char, tag_name

# One pass: the inside holds no bracket and no line break, so a scan stops at the next bracket.
_LINK = re.compile(r"(!?)\[\[([^\[\]\n]+)\]\]")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
LINKS_MAX = 1000


@dataclass(frozen=True)
class NoteText:
    """A note's lines as they read (links as their visible text), its inline tags (as written, without
    '#', each once) and the targets of its links and embeds (each once), in order."""

    lines: list[str]
    tags: tuple[str, ...]
    links: tuple[str, ...]


def read_note(lines: Sequence[str]) -> NoteText:
    """Read a Markdown note's lines (see the module's docstring); the same number of lines comes out."""
    out: list[str] = []
    tags: list[str] = []
    links: list[str] = []
    fence: str | None = None
    for line in lines:
        if fence is not None:  # inside fenced code: as written, until the same fence closes it
            if line.lstrip().startswith(fence):
                fence = None
            out.append(line)
            continue
        if m := _FENCE.match(line):
            fence = m.group(1)
            out.append(line)
            continue
        out.append(_read_line(line, tags, links))
    return NoteText(out, distinct_tags(tags), tuple(dict.fromkeys(links))[:LINKS_MAX])


def _read_line(line: str, tags: list[str], links: list[str]) -> str:
    """One line outside fenced code: its text between code spans read, the code spans as written."""
    if "[[" not in line and "#" not in line:
        return line
    parts = line.split("`")
    if len(parts) % 2 == 0:  # an odd backtick opens nothing: it and what follows are text
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    for n in range(0, len(parts), 2):  # even parts are text, odd ones code spans
        text = parts[n]
        tags += inline_tags(_LINK.sub(" ", text), at_line_start=n == 0)
        parts[n] = _LINK.sub(lambda m: _shown(m, links), text)
    return "`".join(parts)


def inline_tags(text: str, *, at_line_start: bool = True) -> list[str]:
    """The #tags in a piece of text (without '#'), in order; ``at_line_start``: the text begins a line
    (else a '#' at its very start follows something, and is no tag)."""
    found = []
    at = text.find("#")
    while at >= 0:
        before = text[at - 1] if at > 0 else None
        end = at + 1
        while end < len(text) and is_tag_char(text[end]):
            end += 1
        if (before.isspace() if before is not None else at_line_start) and (
            name := tag_name(text[at + 1 : end])
        ):
            found.append(name)
        at = text.find("#", max(end, at + 1))
    return found


def _shown(m: re.Match[str], links: list[str]) -> str:
    """A link's visible text (see the module's docstring); its target is added to ``links``."""
    is_embed = bool(m.group(1))
    target, bar, alias = m.group(2).partition("|")
    note, _, heading = target.partition("#")
    note = note.partition("^")[0].strip().rstrip("\\").strip()  # a table's \| leaves a backslash
    heading = heading.strip()
    if heading.startswith("^"):
        heading = ""
    if note:
        links.append(note)
    if bar and alias.strip() and not is_embed:  # an embed's "alias" is its size: |300
        return alias.strip()
    shown = f"{note} > {heading}" if note and heading else note or heading
    return shown or m.group(0)
