"""A note's front matter: metadata, never text. Its title, aliases, description and tags, read as YAML.

The block between a note's opening ``---`` line and the next ``---`` (or ``...``) line is cut from the
body whatever it holds. What it says is read by PyYAML's safe loader (no Python objects; an alias is a
reference, never a copy, so a "billion laughs" of anchors stays as small as it is written; libyaml
refuses deep nesting) and only these keys are kept, each only when it has the expected shape:

- ``title``: text (a number or a date is taken as written);
- ``aliases`` (or ``alias``): a list of texts, or one text with commas between names;
- ``description``: text;
- ``tags`` (or ``tag``): a list of tags, or one text of tags separated by commas or spaces, with or
  without ``#``; a tag is letters, digits, ``_ - /`` of any script (knowledge.text.tag_name);
- ``date``, ``created`` and ``updated`` (or ``modified``): a date (``2024-05-01``) or a date and time
  (``2024-05-01T10:30``, ``2024-05-01 10:30:00+08:00``), kept as ISO 8601 text (DATE_KEYS order).

Every other key (``cssclasses``, a plugin's settings) stays out. A block over
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

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


class _Loader(_SafeLoader):  # type: ignore[misc,valid-type]
    """The safe loader reading dates as text: a date kb cannot read (2024-13-01) is that key's problem,
    never the whole block's."""

    yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag != _TIMESTAMP]
        for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
    }


# The opening line, the block (possibly empty), the closing line: anchored, one pass over the text.
FRONT_MATTER = re.compile(r"\A---\n(?:(.*?)\n)?(?:---|\.\.\.)\n", re.DOTALL)
FRONT_MATTER_MAX_CHARS = 64 * 1024
ALIASES_MAX = 20
ALIAS_MAX_CHARS = 120
DESCRIPTION_MAX_CHARS = 500
TAGS_MAX = 100
_TAG_SEPARATORS = re.compile(r"[,\s]+")
_ALIAS_SEPARATOR = re.compile(",")
DATE_KEYS = {"date": ("date",), "created": ("created",), "updated": ("updated", "modified")}
DATE_MAX_CHARS = 40

Dates = tuple[tuple[str, str], ...]  # (key, ISO 8601 text) in DATE_KEYS order, the keys given only


@dataclass(frozen=True)
class FrontMatter:
    """What a note's front matter says of it, and why any of it was left out (``problems``: codes)."""

    title: str = ""
    aliases: tuple[str, ...] = ()
    description: str = ""
    tags: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    dates: Dates = ()


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
    dates = tuple(
        (key, day) for key, names in DATE_KEYS.items() if (day := _date(_first(data, *names), key, problems))
    )
    return FrontMatter(
        title=shorten(title, ALIAS_MAX_CHARS) if title else "",
        aliases=aliases,
        description=shorten(description, DESCRIPTION_MAX_CHARS) if description else "",
        tags=tags,
        dates=dates,
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


def _date(value: Any, key: str, problems: list[str]) -> str:
    """A date or a date and time as ISO 8601 text ('' when absent; '' and a problem when it is none)."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="minutes" if value.second == value.microsecond == 0 else "seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    text = value.strip() if isinstance(value, str) and len(value) <= DATE_MAX_CHARS else ""
    for parse in (dt.date.fromisoformat, dt.datetime.fromisoformat):
        try:
            return _date(parse(text), key, problems)
        except ValueError:
            continue
    problems.append(f"{key}-not-a-date")
    return ""
