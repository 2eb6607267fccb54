"""The language the model is told to write in, and Simplified Chinese made Traditional for a Taiwanese reader.

The target is the question's language by its script: Thai for Thai, English for Latin letters, and
for Han characters the chat's Chinese (Traditional unless the chat is Simplified); a question that
mixes scripts gets the chat's language. Qwen models often answer a Traditional question in
Simplified characters: for a zh-Hant chat such an answer is converted with OpenCC (``s2twp``:
Taiwan's characters and words), leaving code, URLs and Latin names as they are; an answer already
in Traditional characters is left untouched.
"""

from __future__ import annotations

import re

from knowledge.text import is_simplified, language_group, opencc_converter

NAMES = {
    "en": "English",
    "zh-Hant": "Traditional Chinese (as written in Taiwan)",
    "zh-Hans": "Simplified Chinese",
    "th": "Thai",
}
_HAN = re.compile(r"[\u3400-\u9fff]")
_THAI = re.compile(r"[\u0e00-\u0e7f]")
_LATIN = re.compile(r"[A-Za-z]")
# Left as written: fenced and inline code, URLs.
_KEEP = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|https?://\S+", re.DOTALL)


def answer_language(question: str, chat: str) -> str:
    """The language (en, zh-Hant, zh-Hans, th) an answer to ``question`` is written in, in a chat in ``chat``."""
    group = language_group(question)
    scripts = sum(bool(p.search(question)) for p in (_HAN, _THAI, _LATIN))
    chinese = chat if chat in ("zh-Hant", "zh-Hans") else "zh-Hant"
    if group == "thai":
        return "th"
    if group == "cjk":
        return chinese
    if scripts > 1 and (_HAN.search(question) or _THAI.search(question)):  # mixed: the chat's language
        return chat
    return "en"


def traditional(text: str) -> str:
    """``text`` in Taiwan's Traditional characters and words, line by line where a line is written in
    Simplified characters (code and URLs kept); a line already Traditional is left as it is."""
    if not _HAN.search(text):
        return text
    convert = opencc_converter("s2twp")
    out, at = [], 0
    for kept in _KEEP.finditer(text):
        out.append(_lines(text[at : kept.start()], convert))
        out.append(kept.group(0))
        at = kept.end()
    out.append(_lines(text[at:], convert))
    return "".join(out)


def _lines(text: str, convert) -> str:
    return "".join(convert(line) if is_simplified(line) else line for line in text.splitlines(keepends=True))


def for_reader(text: str, language: str | None) -> str:
    """The model's text as a reader in ``language`` gets it (Simplified made Traditional for zh-Hant)."""
    return traditional(text) if language == "zh-Hant" else text
