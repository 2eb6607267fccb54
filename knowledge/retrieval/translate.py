"""The question in the other languages the index holds, from the local model, for search.

A question in one language about a page in another is found best when it is also asked in the
page's language: its words then match, and its vector lands beside the page's. One short call
to the model gives those translations; search weighs each below the original question
(knowledge.retrieval.search.TRANSLATION_WEIGHT).

The call is made only when it can help:

* the index holds text in a language group other than the question's (counted per group);
* the evidence is not already strong: the best passage found without translations is in the
  question's own script, came from its words, and holds at least ``STRONG_COVERAGE`` of
  the question's idf mass (its rare words); or it is in another script and the second embedder
  (knowledge.retrieval.second) gives it a cosine of at least ``STRONG_AGREEMENT``, or, found by
  meaning (it has a vector), its score leads the next passage's by ``STRONG_LEAD`` (a follow-up's
  scores add other queries': it has no lead, knowledge.retrieval.search.Found). On
  XQuAD the words alone skip 89 % of the questions asked in the language of their page. (At 0.6
  they skipped 44 %: more recall across languages, but where the same page is indexed in several
  languages, its translations then often put the question's page in another language first:
  bench/translation_asks.py and bench/retrieval.py measure both.)

One call, temperature 0, a short JSON answer checked strictly (the keys asked for, strings in
the script asked for, bounded lengths), a timeout; any failure leaves search as it is without
translations. Translations are remembered per question text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import structlog

from knowledge.retrieval.sufficiency import Evidence
from knowledge.text import language_group

log = structlog.get_logger()

# Language group → (the code shown, the language asked for). A CJK index is taken as Chinese
# in traditional characters (the owner's); Latin script as English.
LANGUAGES: dict[str, tuple[str, str]] = {
    "other": ("en", "English"),
    "cjk": ("zh-Hant", "Traditional Chinese"),
    "thai": ("th", "Thai"),
}
STRONG_COVERAGE = 0.3
# The second embedder's cosine (knowledge.retrieval.second) above which the best passage in another
# script needs no translation to be found: on XQuAD 5-6 % of the questions across scripts, their best
# passage the answer .91 (tuning half) / .88 (held-out half) of the time (see bench/crossing.py; at
# 0.45: 13-15 %, but .90 / .85, and a question whose best passage answers it at .46 was no longer
# translated).
STRONG_AGREEMENT = 0.5
# The lead of the best passage's score (in another script) over the next passage's above which the
# translation is not asked for either: a question's answer found that far ahead stays first once it is
# translated. Chosen on half of XQuAD's articles (bench/translation_asks.py: 0.2, 0.25, 0.3; the
# fewest calls with no pair found less well at rank 1 or 5), checked on the other half: a Chinese
# question about an English page translated .93 → .75 of the time, every question .62 → .59,
# r@1/r@5 unchanged in every pair.
STRONG_LEAD = 0.25
MAX_QUESTION_CHARS = 500  # longer questions are not translated (a pasted text, not a question)
MAX_OUTPUT_TOKENS = 256
DEFAULT_TIMEOUT_S = 8.0
CACHE_SIZE = 512
PAUSE_S = 60.0  # a model that is down or too slow is not asked again before this

# (messages, max_tokens) → (the reply's text, prompt tokens, output tokens); the model client's chat.
Chat = Callable[[list[dict[str, str]], int], Awaitable[tuple[str, int | None, int | None]]]


# (question, language groups) → its translations: a Translator, or the reference ones of a benchmark.
Translate = Callable[[str, Sequence[str]], Awaitable[list["Translation"]]]


class TranslationError(ValueError):
    """The model's reply is not the translations asked for."""


@dataclass(frozen=True)
class Translation:
    """The question in one other language."""

    language: str  # a code of LANGUAGES (en, zh-Hant, th)
    text: str

    def to_json(self) -> dict[str, str]:
        return {"language": self.language, "text": self.text}


def targets(question: str, groups: Mapping[str, int]) -> list[str]:
    """The language groups (with passages in the index) the question should also be asked in."""
    own = language_group(question)
    return [g for g in LANGUAGES if g != own and groups.get(g, 0) > 0]


def is_strong(best: Evidence | None, lead: float | None = None, *, coverage: float = STRONG_COVERAGE) -> bool:
    """Whether the question's own words already found a passage in its own script, or a passage in
    another script found by meaning has the second embedder's strong agreement or a clear ``lead``
    over the next passage (see the module)."""
    if best is None:
        return False
    if not best.same_script:
        if best.agreement is not None and best.agreement >= STRONG_AGREEMENT:
            return True
        return best.standout is not None and lead is not None and lead >= STRONG_LEAD
    return best.lexical > 0 and best.coverage >= coverage


def messages(question: str, groups: Sequence[str]) -> list[dict[str, str]]:
    """The translation prompt: the question as data, and the JSON shape asked for."""
    keys = ", ".join(f'"{LANGUAGES[g][0]}": "<the question in {LANGUAGES[g][1]}>"' for g in groups)
    system = (
        "You translate search questions. Translate the user's question faithfully; keep names, "
        "numbers and terms; do not answer it. Reply with JSON only, exactly this shape: {" + keys + "}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": question.strip()}]


def parse(text: str, question: str, groups: Sequence[str]) -> list[Translation]:
    """The translations in the model's reply, checked: exactly the keys asked for, each a
    non-empty string in its own script, at most three times the question's length (plus 60)."""
    reply = text.strip()
    if reply.startswith("```"):  # a fenced block: models add one unasked
        reply = reply.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(reply)
    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: "[[[[…" nested past the parser
        raise TranslationError(f"not JSON: {getattr(exc, 'msg', 'nested too deep')}") from exc
    wanted = {LANGUAGES[g][0]: g for g in groups}
    if not isinstance(data, dict) or set(data) != set(wanted):
        raise TranslationError(f"expected exactly the keys {', '.join(sorted(wanted))}")
    limit = 3 * len(question) + 60
    out: list[Translation] = []
    for code, group in wanted.items():
        value = data[code]
        if not isinstance(value, str) or not value.strip() or len(value) > limit:
            raise TranslationError(f"{code} is not a question of a sensible length")
        value = " ".join(value.split())
        if language_group(value) != group:
            raise TranslationError(f"{code} is not written in {LANGUAGES[group][1]}")
        out.append(Translation(code, value))
    return out


async def translations_for(
    translator: Translate | None,
    question: str,
    best: Evidence | None,
    groups: Mapping[str, int],
    lead: float | None = None,
) -> list[Translation]:
    """The translations search should add for a question, found without them with ``best`` as its
    best evidence (``lead`` ahead of the next passage), in an index holding ``groups`` (chunks per
    language group): none when the evidence is strong or the index has no other language; else the
    translator's."""
    if translator is None or is_strong(best, lead):
        return []
    wanted = targets(question, groups)
    return await translator(question, wanted) if wanted else []


class Searched(Protocol):
    """What a search returns, as far as translating is concerned: the evidence of its best passage
    and how far that passage leads the next."""

    best: Evidence | None
    lead: float | None


S = TypeVar("S", bound=Searched)


async def search_translated(
    search: Callable[[Sequence[str]], Awaitable[S]],
    translate: Translate | None,
    question: str,
    groups: Callable[[], Mapping[str, int]],
) -> tuple[S, list[Translation]]:
    """``search(translations)`` with the question as written, then again with its translations when
    they can help (translations_for, with ``groups()`` counted after the first search): the last
    search's result and the translations it used."""
    first = await search(())
    translations = await translations_for(translate, question, first.best, groups(), first.lead)
    if not translations:
        return first, []
    return await search([t.text for t in translations]), translations


class Translator:
    """The question in other languages through the model: one call per new question, remembered."""

    def __init__(
        self, chat: Chat, *, timeout_s: float = DEFAULT_TIMEOUT_S, cache_size: int = CACHE_SIZE
    ) -> None:
        self.chat = chat
        self.timeout_s = timeout_s
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, tuple[str, ...]], list[Translation]] = OrderedDict()
        self._paused_until = 0.0  # after a model that failed: not asked again for a while

    async def __call__(self, question: str, groups: Sequence[str]) -> list[Translation]:
        """The translations, or [] when the model is down, slow or answers something else."""
        question = question.strip()
        if not groups or not question or len(question) > MAX_QUESTION_CHARS:
            return []
        key = (question, tuple(groups))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        if time.monotonic() < self._paused_until:
            return []
        t0 = time.perf_counter()
        try:
            text, prompt_tokens, output_tokens = await asyncio.wait_for(
                self.chat(messages(question, groups), MAX_OUTPUT_TOKENS), self.timeout_s
            )
            found = parse(text, question, groups)
        except Exception as exc:  # a model down, slow or confused: search goes on without translations
            if not isinstance(exc, TranslationError):  # down or slow: the next questions do not wait on it
                self._paused_until = time.monotonic() + PAUSE_S
            log.info(
                "translate.failed",
                reason=f"{type(exc).__name__}: {exc}"[:300] if str(exc) else type(exc).__name__,
                ms=round((time.perf_counter() - t0) * 1000, 1),
            )
            return []
        log.info(
            "translate.done",
            languages=[t.language for t in found],
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            ms=round((time.perf_counter() - t0) * 1000, 1),
        )
        self._cache[key] = found
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return found
