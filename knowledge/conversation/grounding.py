"""Whether a follow-up's rewrite says only what the conversation and the message already say.

The rewrite of a follow-up is searched, judged and may go to the web: a model led astray (by a
document's title that reads like an order, or by its own invention) must not turn "And the tide
window?" into a question about something nobody wrote. A rewrite is kept when

* every name, number, address and link in it was written by the owner (their messages, the
  latest one) or by kb (its last answer); a passage title may supply names and words, never a
  link or an address (titles are data from documents);
* it keeps at least one of the message's own content words (a rewrite resolves the message, it
  does not replace it);
* it adds few plain words of its own (a question's frame: "what is", "does", "require").

Dates are the exception: the rewriter is told to make "last week" absolute, so day and month
numbers, years and month and weekday names may be new.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from knowledge.conversation.store import Turn

NEW_WORDS_SHARE = 0.5  # of a rewrite's plain Latin content words, at most this share new (a paraphrase)
STEM_CHARS = 4  # words compared by their first letters: "streaming" is "stream", "losses" is "loss"
MAX_NEW_CJK = 12  # CJK characters (not function characters) a rewrite may add: a translated title

# An address, a mail address, a host name. Each starts only where a run of its characters starts (the
# look-behinds): tried from every position inside a long run, the search would take time quadratic in it.
_LINK = re.compile(r"(?:https?://|www\.)\S+|(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
                   r"|(?<![\w.-])(?:[\w-]+\.)+[a-z]{2,}\b", re.IGNORECASE)  # fmt: skip
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+(?:[.,:/-]\d+)*", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_DATE = re.compile(r"\d{4}(?:[-/.]\d{1,2}(?:[-/.]\d{1,2})?)?|\d{1,2}(?:[-/.:]\d{1,2})?")
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday week month year".split()
)
# Words a question's frame is made of: never counted as new.
_FRAME = frozenset(
    """a an the of in on at to for from by with about into over under and or but not no is are was were be
    been being do does did done has have had will would can could should shall may might must what which
    who whom whose when where why how much many long often it its this that these those there their they
    them he she his her i me my we our you your any some all each every other another more most than then
    as if so also just only still yet again ever per via up down out off first second third last next
    one two three four five six seven eight nine ten please tell know mean means meant say says said
    need needs required require requires happen happens get got make made take takes use used find
    information info details detail steps step ways way kind kinds type types example examples list
    difference between rather instead given typically usually through having trouble cannot regarding
    related including case cases process possible specifically terms well""".split()
)
# Characters a Chinese question's frame is made of (particles, question words, measure words).
_CJK_FRAME = frozenset(
    "的了嗎吗呢吧啊是在有和與与及或也都就還还要會会能可以該该請请問问什麼么甚怎樣样哪那這这些個个幾几多少時时候"
    "為为何誰谁裡里嗎第一二三四五六七八九十次件位種种點点號号天月年日週周星期今明昨上下前後后再又把被給给對对"
)


def grounded(rewrite: str, message: str, turns: Sequence[Turn], titles: Sequence[str]) -> str | None:
    """The rewrite when it names nothing absent from the conversation and the message (and keeps the
    message's own words), else None."""
    said = " ".join([message, *(t.message for t in turns), *(t.answer for t in turns)])
    context = f"{said} {' '.join(titles)}"
    if not _links_from(rewrite, said):
        return None
    if not _keeps_the_message(rewrite, message):
        return None
    known = {_stem(w) for w in _WORD.findall(context)}
    new = [w for w in _WORD.findall(_LINK.sub(" ", rewrite)) if _stem(w) not in known]
    if any(_is_name_or_number(w) for w in new):
        return None
    content = _latin_content(rewrite)
    fresh = [w for w in content if _stem(w) not in known]
    if content and len(fresh) > max(1, NEW_WORDS_SHARE * len(content)):
        return None
    cjk_known = set(_CJK.findall(context))
    cjk_new = {c for c in _CJK.findall(rewrite) if c not in cjk_known and c not in _CJK_FRAME}
    return rewrite if len(cjk_new) <= MAX_NEW_CJK else None


def _links_from(rewrite: str, said: str) -> bool:
    """Every link or address in the rewrite was written by the owner or kb (never only by a title)."""
    known = {link.lower().rstrip(".,;:!?") for link in _LINK.findall(said)}
    return all(link.lower().rstrip(".,;:!?") in known for link in _LINK.findall(rewrite))


def _keeps_the_message(rewrite: str, message: str) -> bool:
    """The rewrite keeps one of the message's content words (or its stem), when it has any."""
    own = {_stem(w) for w in _latin_content(message)} | _cjk_content(message)
    return not own or bool(own & ({_stem(w) for w in _latin_content(rewrite)} | _cjk_content(rewrite)))


def _latin_content(text: str) -> list[str]:
    """The words of a text that are not a question's frame, lower case. Thai has no spaces between
    words (and CJK none either): their text is left to the other checks."""
    words = [w.lower() for w in _WORD.findall(text) if not _CJK.search(w) and not _is_thai(w)]
    return [w for w in words if w not in _FRAME and w not in _CALENDAR and not w[0].isdigit()]


def _cjk_content(text: str) -> set[str]:
    return {c for c in _CJK.findall(text) if c not in _CJK_FRAME}


def _stem(word: str) -> str:
    return word.lower()[:STEM_CHARS]


def _is_thai(word: str) -> bool:
    return any("\u0e00" <= ch <= "\u0e7f" for ch in word)


def _is_name_or_number(word: str) -> bool:
    """A capitalised word, or a number that is not part of a date."""
    if word[0].isdigit():
        return _DATE.fullmatch(word) is None
    return word[0].isupper() and word.lower() not in _CALENDAR and word.lower() not in _FRAME
