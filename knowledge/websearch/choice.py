"""A typed choice among the web candidates on show: 「我選 web-2，請匯入」, 「第二個」, "import web-1", "the
second one", "เลือก web-2".

While a chat has a live candidate list, a message that only names one of them (by its id or by its
place, with a verb of choosing and polite filler around it) is the owner's explicit choice: it is
imported exactly as a tap would be, never searched as a question. Recognised by patterns per
language, never guessed: a message that clearly chooses but not clearly which (「匯入那個」 while
several are on show, "web-7", two ids) asks which one. A question about a candidate ("what is
web-2?", 「第二個是什麼網站？」) is not a choice; neither is 「那第二點呢？」 (a point of the answer).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

_ID = re.compile(r"(?<![a-z])web\s*[-‐‑–—_ ]?\s*(\d{1,2})(?![\d.])", re.IGNORECASE)
_NUMBERS = {
    "一": 1, "二": 2, "兩": 2, "两": 2, "三": 3, "四": 4, "五": 5,
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5,
    "1st": 1, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5,
    "หนึ่ง": 1, "แรก": 1, "สอง": 2, "สาม": 3, "สี่": 4, "ห้า": 5,
}  # fmt: skip
_ORDINAL = re.compile(
    r"第\s*(?P<zh>[一二兩两三四五]|\d)\s*(?:個|个|筆|笔|項|项|則|则|條|条|篇|份|筆結果|個結果|个结果|個連結|个链接|個網站|个网站|個網頁|个网页)"
    r"|(?:the\s+)?(?P<en>first|second|third|fourth|fifth|1st|2nd|3rd|4th|5th|last)\s*(?:one|result|link|page|site|source)?"
    r"|(?:number|no\.|option|result|#)\s*(?P<num>\d)"
    r"|(?:อัน|ลิงก์|ลิงค์|รายการ|เว็บ)(?:ที่)?\s*(?P<th>หนึ่ง|แรก|สอง|สาม|สี่|ห้า|\d)",
    re.IGNORECASE,
)
# What may surround a choice: verbs of choosing and importing, polite filler, punctuation.
_FILLER = re.compile(
    r"我|要|選|选|挑|用|就|匯入|汇入|導入|导入|載入|载入|下載|下载|收錄|收录|存|請|请|幫我|帮我|麻煩|麻烦|吧|好了|好|謝謝|谢谢|"
    r"那|這|这|個|个|筆|笔|的|一下|和|或|還是|还是|"
    r"\b(?:i'll|i'd|i|and|or|will|would|like|want|choose|chose|pick|take|select|import|use|go|with|get|save|add|"
    r"please|thanks|thank|you|ok|okay|the|one|that|let's|lets|me|it)\b|"
    r"ขอ|เลือก|นำเข้า|เอา|ใช้|หน่อย|ครับ|ค่ะ|คะ|นะ|ด้วย|อัน|ลิงก์|ลิงค์|รายการ|ที่|นี้|นั้น|"
    r"[\s,，、.。!！:：;；~～…]+",
    re.IGNORECASE,
)
_CHOOSING = re.compile(
    r"選|选|挑|匯入|汇入|導入|导入|\b(?:choose|pick|take|select|import)\b|เลือก|นำเข้า", re.IGNORECASE
)
_QUESTION = re.compile(
    r"[?？]|什麼|什么|哪|嗎|吗|呢|\b(?:what|which|why|how|is|does)\b|อะไร|ไหม|ล่ะ", re.IGNORECASE
)


@dataclass(frozen=True)
class Typed:
    """A typed choice: the candidate chosen, or None when the message chooses but not clearly which."""

    source_id: str | None


def typed_choice(message: str, ids: Sequence[str]) -> Typed | None:
    """The owner's typed choice among the candidates ``ids`` on show (web-1…), or None for a message that
    is not a choice (a question, anything else)."""
    if not ids:
        return None
    text = unicodedata.normalize("NFKC", message).strip()
    if len(text) > 60:
        return None
    named = {f"web-{int(n)}" for n in _ID.findall(text)}
    rest = _ID.sub(" ", text)
    places = [_place(m) for m in _ORDINAL.finditer(rest)]
    rest = _ORDINAL.sub(" ", rest)
    if _QUESTION.search(rest):
        return None
    leftover = _FILLER.sub("", rest)
    if named:
        if leftover:
            return None
        return Typed(next(iter(named))) if len(named) == 1 and named <= set(ids) else Typed(None)
    if places:
        if leftover:
            return None
        chosen = {len(ids) if n == -1 else n for n in places}
        if len(chosen) == 1 and 1 <= (n := chosen.pop()) <= len(ids):
            return Typed(ids[n - 1])
        return Typed(None)
    if _CHOOSING.search(text) and not leftover:
        return Typed(ids[0]) if len(ids) == 1 else Typed(None)  # "import it": clear with one on show
    return None


def _place(match: re.Match[str]) -> int:
    """The place an ordinal names (1…), -1 for "last"."""
    word = next(g for g in match.groups() if g is not None).lower()
    if word == "last":
        return -1
    return int(word) if word.isdigit() else _NUMBERS[word]
