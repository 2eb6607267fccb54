"""The message catalog: every sentence kb writes to a person, in the reader's language.

Messages are written in English in the code, marked for extraction (``words.tr("Saved: {title}",
title=…)``, ``words.ntr("{n} passage", "{n} passages", n)``, and ``N_("…")`` for a constant), and
translated in gettext catalogs under ``knowledge/words/locale/<language>/LC_MESSAGES/kb.po``, kept
with Babel (``make catalog`` extracts the messages and updates the catalogs). Placeholders are
``{name}`` (python-brace-format); a message may hold Telegram's HTML tags, the same in every
language. Thai and Chinese have one plural form. Simplified Chinese is the Traditional catalog
converted by OpenCC (``tw2sp``: Taiwan words to mainland ones), never kept by hand. Dates and numbers
follow the reader's locale (Babel's CLDR data).

A catalog is read once per process and language; a message missing from it is shown in English.
"""

from __future__ import annotations

import gettext
import io
import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from pathlib import Path

from babel.dates import format_date, format_datetime
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_decimal

from knowledge.config import Settings
from knowledge.words.language import LANGUAGES, for_terminal

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "kb"
# gettext's folder of each language (zh-Hans has none: it is derived from zh-Hant)
FOLDERS = {"zh-Hant": "zh_Hant", "th": "th"}
BABEL_LOCALES = {"en": "en", "zh-Hant": "zh_Hant_TW", "zh-Hans": "zh_Hans_CN", "th": "th_TH"}


def N_(message: str) -> str:  # noqa: N802 - gettext's name for "mark for translation, translate later"
    """Mark a constant for extraction; it is translated where it is shown (``words.tr(CONSTANT)``)."""
    return message


@cache
def _translations(language: str) -> gettext.NullTranslations:
    """The compiled catalog of a language (English: none, the messages are English)."""
    if language == "zh-Hans":
        return _derived_simplified()
    folder = FOLDERS.get(language)
    if folder is None:
        return gettext.NullTranslations()
    path = LOCALE_DIR / folder / "LC_MESSAGES" / f"{DOMAIN}.po"
    with path.open("rb") as fh:
        catalog = read_po(fh, locale=folder, domain=DOMAIN)
    return _compiled(catalog)


def _compiled(catalog: object) -> gettext.GNUTranslations:
    buffer = io.BytesIO()
    write_mo(buffer, catalog)  # type: ignore[arg-type]
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


def _derived_simplified() -> gettext.GNUTranslations:
    """The Traditional catalog with every translation converted to Simplified Chinese (mainland words)."""
    import opencc

    path = LOCALE_DIR / FOLDERS["zh-Hant"] / "LC_MESSAGES" / f"{DOMAIN}.po"
    with path.open("rb") as fh:
        catalog = read_po(fh, locale="zh_Hans", domain=DOMAIN)
    convert = opencc.OpenCC("tw2sp").convert
    for message in catalog:
        if not message.id or not message.string:
            continue
        if isinstance(message.string, tuple | list):
            message.string = tuple(convert(s) for s in message.string)
        else:
            message.string = convert(message.string)
    return _compiled(catalog)


# The owner's computer, as messages name it ("kb logs on {computer} says why"): kb runs on it.
MAC = N_("the Mac")
COMPUTER = N_("the computer")
_COMPUTER = re.compile(r"\{computer\}")


def computer_of(platform: str) -> str:
    """What the owner's computer is called (a message) on ``platform`` (``sys.platform``'s value):
    the Mac on macOS, the computer anywhere else."""
    return MAC if platform == "darwin" else COMPUTER


def with_computer(text: str, word: str) -> str:
    """``text`` with ``{computer}`` replaced by ``word``, a space put between a Latin word and the
    Chinese or Thai letters beside it ("在 Mac 上", but "在電腦上") (pure)."""

    def spaced(m: re.Match[str]) -> str:
        before, after = text[m.start() - 1 : m.start()], text[m.end() : m.end() + 1]
        left = " " if word[:1].isascii() and _is_wide_letter(before) else ""
        right = " " if word[-1:].isascii() and _is_wide_letter(after) else ""
        return left + word + right

    return _COMPUTER.sub(spaced, text)


def _is_wide_letter(char: str) -> bool:
    return bool(char) and not char.isascii() and (char.isalpha() or unicodedata.category(char) == "Mn")


@dataclass(frozen=True)
class Words:
    """The catalog in one language: ``tr`` a message, ``ntr`` one with a count, dates and numbers.
    ``computer`` is what the messages call the owner's computer (see computer_of)."""

    language: str = "en"
    computer: str = COMPUTER

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"kb has no words in {self.language!r}; it speaks {', '.join(LANGUAGES)}")

    def tr(self, message: str, /, **facts: object) -> str:
        """``message`` in this language, its ``{placeholders}`` filled with ``facts`` (and
        ``{computer}`` with the owner's computer)."""
        text = _translations(self.language).gettext(message)
        if "{computer}" in text:
            text = with_computer(text, _translations(self.language).gettext(self.computer))
        return text.format(**facts) if facts else text

    def ntr(self, singular: str, plural: str, n: int, /, **facts: object) -> str:
        """The form of a message for ``n`` (``{n}`` is the count, shown in this language's digits)."""
        text = _translations(self.language).ngettext(singular, plural, n)
        return text.format(n=self.number(n), **facts)

    def number(self, n: float) -> str:
        """A number as this language writes it (``1,480``)."""
        return format_decimal(n, locale=BABEL_LOCALES[self.language])

    def date(self, value: date | datetime) -> str:
        """A date (a day) as this language writes it: ``Dec 2, 2026``, ``2026年12月2日``, ``2 ธ.ค. 2026``."""
        day = value.date() if isinstance(value, datetime) else value
        return format_date(day, format="medium", locale=BABEL_LOCALES[self.language])

    def when(self, value: datetime) -> str:
        """A date and time, short, as this language writes it."""
        return format_datetime(value, format="short", locale=BABEL_LOCALES[self.language])


ENGLISH = Words()
# A thing and what is said of it ("web-1: downloading"): Chinese writes the colon full-width.
LABELLED = N_("{name}: {what}")


def owner_words(language: str, settings: Settings) -> Words:
    """The words of ``language`` for the owner of this knowledge base (its computer named as it is)."""
    return Words(language, computer=computer_of(settings.platform))


def terminal_words(settings: Settings) -> Words:
    """The words of a terminal: KB_LANGUAGE's, else its locale's, else English."""
    return owner_words(for_terminal(settings.language, settings.locale), settings)
