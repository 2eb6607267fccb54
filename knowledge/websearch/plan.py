"""Planning a web search: at most two short queries with freshness and language, dates grounded.

The model planner sees only the question and today's date (never notes, history or
attachments) and must answer with compact JSON of an exact schema; anything else falls back
to the heuristic planner, so a search never stalls because planning failed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from datetime import date

from knowledge.errors import KbError
from knowledge.text import is_greeting, is_simplified

MAX_QUERY_CHARS = 300
FRESHNESS = ("day", "week", "month", "year")
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z]{2,4})?$")


class PlanError(KbError):
    """The model's plan is not the JSON asked for."""


@dataclass(frozen=True)
class PlannedQuery:
    """One search-engine query."""

    query: str
    freshness: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class Plan:
    """Whether to search, what, and who planned it (``model`` or ``heuristic``)."""

    needs_search: bool
    queries: list[PlannedQuery] = field(default_factory=list)
    planner: str = "heuristic"
    fallback_reason: str | None = None


def cut_query(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """At most ``limit`` characters, cut at a word boundary when there is one."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    return head.rsplit(" ", 1)[0] if " " in head else head


# -- the model planner ----------------------------------------------------------------------

PLANNER_PROMPT = """You plan web searches. Today is {today}.
Reply with JSON only, exactly this shape and nothing else:
{{"needsSearch": true, "queries": [{{"query": "...", "freshness": null, "language": "en"}}]}}
Rules:
- needsSearch is false for greetings, arithmetic and timeless general knowledge; otherwise true.
- At most 2 queries. Each is a short search-engine query (a few keywords), not the user's sentence.
- freshness is "day", "week", "month", "year" or null: how recent the results must be.
- Replace relative times with absolute ones using today's date: "this year" -> {year}, "last month" -> {last_month}.
  Thai Buddhist-era years are 543 years ahead: {be_year} means {year}.
- language is the language code of the query (en, zh-TW for Traditional characters, zh-CN for Simplified
  ones, th, ja, ...). When the authoritative
  sources are in another language than the question, make one query in that language and one in the user's."""


def planner_messages(question: str, today: date) -> list[dict[str, str]]:
    """The planner's prompt: the question and the date, nothing else."""
    system = PLANNER_PROMPT.format(
        today=today.isoformat(), year=today.year, be_year=today.year + 543, last_month=_last_month(today)
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": question.strip()[:2000]}]


def parse_plan(text: str) -> Plan:
    """A Plan from the model's reply, strictly: JSON only, the schema exactly, no unknown keys."""
    try:
        data = json.loads(text.strip())
    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: "[[[[…" nested past the parser
        raise PlanError(f"not JSON: {getattr(exc, 'msg', 'nested too deep')}") from exc
    if not isinstance(data, dict) or set(data) != {"needsSearch", "queries"}:
        raise PlanError("expected exactly the keys needsSearch and queries")
    needs, queries = data["needsSearch"], data["queries"]
    if not isinstance(needs, bool) or not isinstance(queries, list) or len(queries) > 2:
        raise PlanError("needsSearch must be a boolean and queries a list of at most 2")
    planned: list[PlannedQuery] = []
    for q in queries:
        if not isinstance(q, dict) or not set(q) <= {"query", "freshness", "language"} or "query" not in q:
            raise PlanError("each query is an object with query, freshness and language only")
        query, fresh, lang = q["query"], q.get("freshness"), q.get("language")
        if not isinstance(query, str) or not query.strip():
            raise PlanError("query must be a non-empty string")
        if fresh is not None and fresh not in FRESHNESS:
            raise PlanError(f"freshness must be one of {', '.join(FRESHNESS)} or null")
        if lang is not None and not (isinstance(lang, str) and _LANGUAGE.match(lang)):
            raise PlanError("language must be a language code such as en or zh-TW")
        planned.append(PlannedQuery(cut_query(query), fresh, lang))
    if needs and not planned:
        raise PlanError("needsSearch is true but there are no queries")
    return Plan(needs, planned if needs else [], planner="model")


# -- the heuristic planner ------------------------------------------------------------------

_INSTRUCTIONS = re.compile(
    r"(please\s+)?(search(\s+the\s+web)?(\s+for)?|look\s+up|google|find\s+me|find\s+out)\b|with\s+(sources|links)"
    r"|幫我查(一下)?|帮我查(一下)?|幫我搜(尋|索)?|帮我搜(索)?|請搜尋|请搜索|搜尋一下|搜索一下|附上來源|附上来源"
    r"|ช่วยค้นหา|ค้นหาให้หน่อย|ค้นหา|ช่วยหา",
    re.IGNORECASE,
)
_DAY = re.compile(
    r"\b(today|now|right now|just now|tonight)\b|今天|今日|現在|现在|刚刚|剛剛|目前|วันนี้|ตอนนี้", re.I
)
_WEEK = re.compile(r"\b(this week|past week)\b|本週|本周|這週|这周|สัปดาห์นี้", re.I)
_MONTH = re.compile(r"\b(recent|recently|latest|newest|this month)\b|最近|最新|近期|本月|ล่าสุด|เดือนนี้", re.I)
_VERSION = re.compile(
    r"\b(version|release|changelog|what'?s new|new features)\b|\bv?\d+\.\d+\b|版本|新功能|เวอร์ชัน", re.I
)
# Arithmetic is an optional lead word, then digits, operators, spaces and punctuation only: two linear
# checks (one pattern with \W* around a class of non-word characters backtracks in cubic time).
_ARITHMETIC_LEAD = re.compile(r"\W*+(?:(?:what\s+is|calculate|compute)\s+)?", re.I)
_ARITHMETIC_BODY = re.compile(r"[\d\W]*+")
_ARITHMETIC_CHARS = frozenset("0123456789 \t\n.,+-*/×÷^()=%")
_THAI = re.compile(r"[\u0e00-\u0e7f]")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def question_language(text: str) -> str:
    """en, th, zh-TW or zh-CN from the script of the question (Chinese: zh-CN only when its characters
    are Simplified; Traditional, or written the same in both, is Taiwan's)."""
    if _THAI.search(text):
        return "th"
    if _HAN.search(text):
        return "zh-CN" if is_simplified(text) else "zh-TW"
    return "en"


def settled(plan: Plan, question: str) -> Plan:
    """The plan with each Chinese query's language following its characters (and the question's): a
    Traditional question searched as zh-CN would go to the mainland's region and results."""
    queries = [
        dataclasses.replace(q, language=question_language(q.query + question))
        if q.language and q.language.lower().startswith("zh") and _HAN.search(q.query)
        else q
        for q in plan.queries
    ]
    return dataclasses.replace(plan, queries=queries)


def _last_month(today: date) -> str:
    year, month = (today.year, today.month - 1) if today.month > 1 else (today.year - 1, 12)
    return date(year, month, 1).strftime("%B %Y")


def ground_dates(text: str, today: date) -> str:
    """Relative times made absolute against today; Buddhist-era years (2400–2700) made Common Era."""
    y = today.year
    rules = [
        (r"\bthis year\b", str(y)),
        (r"\blast year\b", str(y - 1)),
        (r"\bnext year\b", str(y + 1)),
        (r"\blast month\b", _last_month(today)),
        (r"\bthis month\b", today.strftime("%B %Y")),
        (r"今年", f"{y} "),
        (r"去年", f"{y - 1} "),
        (r"明年", f"{y + 1} "),
        (r"上個月|上个月", f"{y}年{today.month - 1 or 12}月 " if today.month > 1 else f"{y - 1}年12月 "),
        (r"ปีนี้", f"{y} "),
        (r"ปีที่แล้ว|ปีก่อน", f"{y - 1} "),
    ]
    for pattern, repl in rules:
        text = re.sub(pattern, repl, text, flags=re.IGNORECASE)
    text = re.sub(r"(?<!\d)(2[45]\d\d)(?!\d)", lambda m: str(int(m.group(1)) - 543), text)
    return " ".join(text.split())


def freshness_of(question: str) -> str | None:
    """day, week or month from words such as today, this week, latest; None otherwise."""
    if _DAY.search(question):
        return "day"
    if _WEEK.search(question):
        return "week"
    if _MONTH.search(question):
        return "month"
    return None


def needs_search(question: str) -> bool:
    """False only for a plain greeting or arithmetic."""
    return not (is_greeting(question) or is_arithmetic(question))


def is_arithmetic(question: str) -> bool:
    """Nothing but a sum to work out ("what is 12 * 7?"), in time linear in the question's length."""
    lead = _ARITHMETIC_LEAD.match(question)
    rest = question[lead.end() :] if lead else question
    return bool(_ARITHMETIC_BODY.fullmatch(rest)) and any(c in _ARITHMETIC_CHARS for c in rest)


def heuristic_plan(question: str, today: date, *, reason: str | None = None) -> Plan:
    """Instruction words stripped, freshness from keywords, a release-notes variant for versions."""
    if not needs_search(question):
        return Plan(False, [], "heuristic", reason)
    query = _INSTRUCTIONS.sub(" ", question)
    query = re.sub(r"[?？!！。]+", " ", ground_dates(query, today)).strip(" ,:;，：")
    query = cut_query(query or question)
    language = question_language(question)
    fresh = freshness_of(question)
    queries = [PlannedQuery(query, fresh, language)]
    if _VERSION.search(question):
        variant = "release notes" if language == "en" else "更新說明" if language == "zh-TW" else "更新说明"
        variant = "release notes" if language == "th" else variant
        queries.append(PlannedQuery(cut_query(f"{query} {variant}"), fresh, language))
    return Plan(True, queries, "heuristic", reason)
