"""A note's front matter: metadata, never text. Its title, aliases, description and tags, read as YAML.

The block between a note's opening ``---`` line and the next ``---`` (or ``...``) line is cut from the
body whatever it holds. What it says is read by PyYAML's safe loader (no Python objects; an alias is a
reference, never a copy, so a "billion laughs" of anchors stays as small as it is written; libyaml
refuses deep nesting) and only these keys are kept, each only when it has the expected shape:

- ``title``: text (a number or a date is taken as written);
- ``aliases`` (or ``alias``): a list of texts, or one text with commas between names;
- ``description``: text;
- ``tags`` (or ``tag``): a list of tags, or one text of tags separated by commas or spaces, with or
  without ``#``; a tag is letters, digits, ``_ - /`` of any script (knowledge.text.tag_name).

Every other key (dates, ``cssclasses``, a plugin's settings) stays out. A block over
FRONT_MATTER_MAX_CHARS, one that is not YAML or not a mapping, and values of the wrong shape are
ignored, each named by a problem code for the caller's log: the note's body is indexed all the same.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import yaml

from knowledge.text import distinct_tags, shorten, tag_name

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# The opening line, the block (possibly empty), the closing line: anchored, one pass over the text.
FRONT_MATTER = re.compile(r"\A---\n(?:(.*?)\n)?(?:---|\.\.\.)\n", re.DOTALL)
FRONT_MATTER_MAX_CHARS = 64 * 1024
ALIASES_MAX = 20
ALIAS_MAX_CHARS = 120
DESCRIPTION_MAX_CHARS = 500
TAGS_MAX = 100
_TAG_SEPARATORS = re.compile(r"[,\s]+")
_ALIAS_SEPARATOR = re.compile(",")


@dataclass(frozen=True)
class FrontMatter:
    """What a note's front matter says of it, and why any of it was left out (``problems``: codes)."""

    title: str = ""
    aliases: tuple[str, ...] = ()
    description: str = ""
    tags: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def split_front_matter(text: str) -> tuple[FrontMatter | None, str]:
    """A note's front matter (None when it has none) and its body after it (normalised newlines in)."""
    m = FRONT_MATTER.match(text)
    if m is None:
        return None, text
    return read_front_matter(m.group(1) or ""), text[m.end() :]


def read_front_matter(block: str) -> FrontMatter:
    """The kept keys of a front matter block (the text between its ``---`` lines)."""
    if len(block) > FRONT_MATTER_MAX_CHARS:
        return FrontMatter(problems=("too-large",))
    try:
        data = yaml.load(block, Loader=_Loader)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return FrontMatter(problems=("not-yaml",))
    if data is None:
        return FrontMatter()
    if not isinstance(data, dict):
        return FrontMatter(problems=("not-a-mapping",))
    problems: list[str] = []
    title = _scalar(_first(data, "title"), "title", problems)
    description = _scalar(_first(data, "description"), "description", problems)
    aliases = _names(_first(data, "aliases", "alias"), problems)
    tags = _tags(_first(data, "tags", "tag"), problems)
    return FrontMatter(
        title=shorten(title, ALIAS_MAX_CHARS) if title else "",
        aliases=aliases,
        description=shorten(description, DESCRIPTION_MAX_CHARS) if description else "",
        tags=tags,
        problems=tuple(dict.fromkeys(problems)),
    )


def _first(data: dict[Any, Any], *keys: str) -> Any:
    """The value of the first of these keys the mapping has (None when none)."""
    for key in keys:
        if key in data:
            return data[key]
    return None


def _scalar(value: Any, key: str, problems: list[str]) -> str:
    """A text value on one line; a number or a date as written; '' (and a problem) for anything else."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float | dt.date):
        problems.append(f"{key}-not-text")
        return ""
    return " ".join(str(value).split())


def _items(value: Any, key: str, problems: list[str], *, split: re.Pattern[str]) -> list[str]:
    """The texts of a list (each as it is) or of one text (split); a problem for each other item."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in split.split(value) if part.strip()]
    if not isinstance(value, list):
        problems.append(f"{key}-not-text")
        return []
    texts = []
    for item in value[: TAGS_MAX * 2]:  # an anchor may make the list long: a bounded look at it
        if isinstance(item, str):
            texts.append(item)
        elif item is not None:
            problems.append(f"{key}-not-text")
    return texts


def _names(value: Any, problems: list[str]) -> tuple[str, ...]:
    """Aliases: distinct names on one line, at most ALIASES_MAX of ALIAS_MAX_CHARS each."""
    names = (" ".join(t.split()) for t in _items(value, "aliases", problems, split=_ALIAS_SEPARATOR))
    kept = [shorten(n, ALIAS_MAX_CHARS) for n in names if n]
    return tuple(dict.fromkeys(kept))[:ALIASES_MAX]


def _tags(value: Any, problems: list[str]) -> tuple[str, ...]:
    """Tags as written, without '#', distinct, at most TAGS_MAX; a problem for one that is no tag."""
    found: list[str] = []
    for text in _items(value, "tags", problems, split=_TAG_SEPARATORS):
        for part in _TAG_SEPARATORS.split(text.strip()) if "," in text else [text.strip()]:
            name = tag_name(part) if part else None
            if name is not None:
                found.append(name)
            elif part:
                problems.append("tag-invalid")
    return distinct_tags(found)[:TAGS_MAX]
