"""Which language a person reads: a Telegram client's tag, a terminal's locale, the owner's setting.

kb speaks English (``en``), Traditional Chinese (``zh-Hant``), Simplified Chinese (``zh-Hans``) and
Thai (``th``). Telegram's ``language_code`` is an IETF tag as the client reports it, community
language packs included (``zh-hant-raw``, ``zh-hans-beta``, ``taiwan``); a terminal has its locale
(``zh_TW.UTF-8``). A bare or unknown Chinese tag takes the owner's Chinese (KB_LANGUAGE's, else
Traditional).
"""

from __future__ import annotations

import re

LANGUAGES = ("en", "zh-Hant", "zh-Hans", "th")
NAMES = {"en": "English", "zh-Hant": "繁體中文", "zh-Hans": "简体中文", "th": "ภาษาไทย"}
_HANT = ("hant", "tw", "hk", "mo", "taiwan")
_HANS = ("hans", "cn", "sg")


def normalise(tag: str | None, *, chinese: str = "zh-Hant") -> str | None:
    """kb's language for a language tag or locale name, or None when it names none of kb's languages.

    Any Chinese tag with ``hant``, ``tw``, ``hk`` or ``mo`` (and the ``taiwan`` pack) is Traditional,
    with ``hans``, ``cn`` or ``sg`` Simplified; a bare or unknown Chinese tag is ``chinese`` (the
    owner's); a tag starting ``th`` is Thai."""
    parts = [p for p in re.split(r"[-_.@\s]+", (tag or "").strip().lower()) if p]
    if not parts:
        return None
    head, rest = parts[0], parts[1:]
    if head == "taiwan" or (head == "zh" and any(p in _HANT for p in rest)):
        return "zh-Hant"
    if head == "zh":
        return "zh-Hans" if any(p in _HANS for p in rest) else chinese
    if head.startswith("th"):
        return "th"
    return "en" if head == "en" else None


def chinese_of(setting: str) -> str:
    """The owner's Chinese: KB_LANGUAGE's when it is a Chinese one, else Traditional."""
    return setting if setting in ("zh-Hant", "zh-Hans") else "zh-Hant"


def for_telegram(chosen: str | None, language_code: str | None, setting: str) -> str:
    """A chat's language: the owner's /lang choice, else the client's language, else KB_LANGUAGE, else English."""
    if chosen in LANGUAGES:
        return chosen
    found = normalise(language_code, chinese=chinese_of(setting))
    return found or (setting if setting in LANGUAGES else "en")


def for_terminal(setting: str, locale: str) -> str:
    """The terminal's language: KB_LANGUAGE, else the locale (the first of LC_ALL, LC_MESSAGES, LANG
    that is set, e.g. ``zh_TW.UTF-8``), else English."""
    if setting in LANGUAGES:
        return setting
    return normalise(locale) or "en" if locale not in ("C", "POSIX") else "en"


def for_owner(setting: str, chosen: str | None, locale: str) -> str:
    """The owner's language for what kb writes outside a chat (a new document's summary): KB_LANGUAGE,
    else the language last chosen with /lang, else the locale's (as a terminal's), else English."""
    if setting in LANGUAGES:
        return setting
    if chosen in LANGUAGES:
        return chosen  # type: ignore[return-value]
    return for_terminal("", locale)


def telegram_menu(language: str) -> str:
    """The two-letter code Telegram's command menus know (zh-Hant and zh-Hans are both ``zh``)."""
    return language.split("-")[0]
