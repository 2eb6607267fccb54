"""Whether kb's own words leak English into a Chinese or Thai reader's screen: the one place that decides
what an English fragment is, for the bot's messages and for the terminal's and the command line's lines.

What is not kb's words is taken out first: HTML tags and code, URLs, file names and paths, settings
(``KB_…``), kb's commands, and the quoted words of the documents themselves (``quoted``). What is left
is English when it holds a run of ``shortest`` English words or more: three for a chat message (where a
product name or a two-word title may stand in a sentence), one for the command line's lines, where every
word outside :data:`TECHNICAL` counts and so do kb's command-line tokens (flags, identifiers with
digits or symbols, ALL-CAPS arguments) taken out too.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

WORD = r"[A-Za-z][a-z'’]+"
# Names and units that stay as they are in every language (products, protocols, formats, units, commands)
TECHNICAL = frozenset(
    w.casefold()
    for w in (
        "kb", "SQLite", "FTS5", "e5", "Telegram", "MCP", "HTTP", "HTTPS", "OCR", "RapidOCR", "Apple", "Vision",
        "Mac", "macOS", "Linux", "ChatML", "OpenAI", "Ollama", "vLLM", "Bearer", "Authorization", "MB", "GiB",
        "MiB", "dpi", "PDF", "JSON", "URL", "ID", "hf", "pip", "make", "torch", "Whisper", "DuckDuckGo", "Lite", "Brave",
        "en", "th", "zh",  # language codes (KB_OCR_LANGS)
    )
)  # fmt: skip
# An ASCII run (between spaces or other scripts) that is a token of a command line, not a word: a flag or
# something else with digits, hyphens or symbols in it (a path, a version, an id, a host:port, a setting), ALL-CAPS
_TOKEN = re.compile(r"[\x21-\x7e]*[0-9_./@=<>\[\]{}\\|-][\x21-\x7e]*|\b[A-Z][A-Z_]+\b")
_ASCII_RUN = re.compile(r"[\x21-\x7e]+")
# kb, hf and pip with up to two sub-command words (kb sources rm, hf download, pip install)
_COMMAND = re.compile(r"\b(?:kb|hf|pip)(?:\s+[a-z][a-z-]*){0,2}\b")


def english_runs(text: str, *, quoted: Iterable[str] = (), shortest: int = 3) -> list[str]:
    """Runs of ``shortest`` or more English words in kb's own words (see the module's docstring)."""
    text = re.sub(r"<(code|pre)>.*?</\1>", " ", text, flags=re.DOTALL)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"https?://\S+", " ", text)
    for words in quoted:  # the documents' words
        text = text.replace(words, " ")
    if shortest == 1:  # a command line's tokens, then kb's commands with their sub-commands
        text = _COMMAND.sub(" ", _ASCII_RUN.sub(lambda run: _TOKEN.sub(" ", run.group()), text))
    text = re.sub(
        r"\S+\.(md|html|txt|pdf|jpg|json|exe|ogg)\b|/\w[\w/.-]*|\bKB_\w+(=\S+)?|\bkb \w+", " ", text
    )
    if shortest > 1:
        return re.findall(rf"\b{WORD}(?: {WORD}){{{shortest - 1},}}\b", text)
    return [w for w in re.findall(rf"\b{WORD}\b", text) if w.casefold() not in TECHNICAL]


def english_words(text: str, *, quoted: Iterable[str] = ()) -> list[str]:
    """Every English word in kb's own words on a terminal, names and units of :data:`TECHNICAL` apart."""
    return english_runs(text, quoted=quoted, shortest=1)
