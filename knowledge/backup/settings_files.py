"""Settings files without their secrets: ``.env`` and ``kb.toml`` as they go into a backup.

Pure functions of text. A line setting a secret (``KB_TELEGRAM_TOKEN``, ``HF_TOKEN``, any name
ending in ``_TOKEN``, ``_KEY``, ``_SECRET`` or ``_PASSWORD``, in either file's spelling) is dropped,
and so is any other line (a comment, a line kb cannot parse) that holds a secret's value, so the
token is nowhere in the copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SECRET_SUFFIXES = ("_TOKEN", "_KEY", "_SECRET", "_PASSWORD", "_PASSPHRASE")
SECRET_NAMES = frozenset({"KB_TELEGRAM_TOKEN", "HF_TOKEN", "TOKEN", "KEY", "SECRET", "PASSWORD"})
MIN_SECRET_CHARS = 6  # a shorter value is no secret worth hunting for (and would match everywhere)

_ENV_LINE = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)")
_TOML_LINE = re.compile(r"""\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_.-]+))\s*=(.*)""")


def is_secret_name(name: str) -> bool:
    """Is this setting (``KB_BRAVE_API_KEY``, or ``brave_api_key`` as kb.toml spells it) a secret?"""
    upper = name.strip().upper().replace("-", "_").rsplit(".", 1)[-1]
    return upper in SECRET_NAMES or upper.endswith(SECRET_SUFFIXES)


def _unquoted(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def secret_values(env_text: str, toml_text: str, known: Iterable[str] = ()) -> list[str]:
    """The secrets' values set in either file, and ``known`` ones (the running settings'), longest first."""
    found = {v for v in known if len(v) >= MIN_SECRET_CHARS}
    for line in env_text.splitlines():
        m = _ENV_LINE.fullmatch(line)
        if m and is_secret_name(m.group(1)):
            found.add(_unquoted(m.group(2).split(" #")[0]))
    for line in toml_text.splitlines():
        m = _TOML_LINE.fullmatch(line)
        if m and is_secret_name(next(g for g in m.groups()[:3] if g)):
            found.add(_unquoted(m.group(4).split(" #")[0]))
    return sorted((v for v in found if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)


def without_secrets(text: str, *, toml: bool, secrets: Iterable[str]) -> tuple[str, list[str]]:
    """The file's text with every secret line dropped, and what was dropped (setting names, or
    ``line N`` for a line that only held a secret's value)."""
    needles = [s for s in secrets if s]
    kept: list[str] = []
    dropped: list[str] = []
    in_multiline: str | None = None  # the closing quotes of a dropped TOML multi-line value
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        if in_multiline is not None:
            if in_multiline in line:
                in_multiline = None
            continue
        match = (_TOML_LINE if toml else _ENV_LINE).fullmatch(line.rstrip("\r\n"))
        name = (next(g for g in match.groups()[:3] if g) if toml else match.group(1)) if match else None
        if name is not None and is_secret_name(name):
            dropped.append(name)
            value = match.group(4 if toml else 2).strip() if match else ""
            for quotes in ('"""', "'''"):
                if toml and value.startswith(quotes) and value.count(quotes) == 1:
                    in_multiline = quotes
            continue
        if any(s in line for s in needles):
            dropped.append(f"line {n}")
            continue
        kept.append(line)
    return "".join(kept), dropped
