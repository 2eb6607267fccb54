from datetime import date

import pytest

from knowledge.websearch.plan import (
    PlanError,
    cut_query,
    freshness_of,
    ground_dates,
    heuristic_plan,
    needs_search,
    parse_plan,
    planner_messages,
    question_language,
    settled,
)

TODAY = date(2026, 11, 29)


@pytest.mark.parametrize(
    ("text", "grounded"),
    [
        ("今年下半年的颱風", "2026 下半年的颱風"),
        ("what happened last month", "what happened October 2026"),
        ("tax rules this year", "tax rules 2026"),
        ("ราคาทอง 2569", "ราคาทอง 2026"),
        ("ภาษีปีนี้", "ภาษี2026"),
        ("去年的冠軍", "2025 的冠軍"),
        ("no dates here", "no dates here"),
    ],
)
def test_ground_dates(text, grounded):
    assert ground_dates(text, TODAY) == grounded


@pytest.mark.parametrize(
    ("question", "fresh"),
    [
        ("weather today", "day"),
        ("what's happening now", "day"),
        ("今天的新聞", "day"),
        ("刚刚发生了什么", "day"),
        ("ข่าววันนี้", "day"),
        ("news this week", "week"),
        ("本週熱門", "week"),
        ("本周热点", "week"),
        ("latest iPhone", "month"),
        ("最新的手機", "month"),
        ("最近的消息", "month"),
        ("มือถือรุ่นล่าสุด", "month"),
        ("history of Rome", None),
    ],
)
def test_freshness_keywords(question, fresh):
    assert freshness_of(question) == fresh


@pytest.mark.parametrize(
    ("question", "query"),
    [
        ("Please search the web for Warsaw population with sources", "Warsaw population"),
        ("幫我查一下台北的天氣", "台北的天氣"),
        ("ช่วยค้นหาราคาทองวันนี้", "ราคาทองวันนี้"),
        ("look up the Rhine length?", "the Rhine length"),
    ],
)
def test_instruction_words_are_stripped(question, query):
    assert heuristic_plan(question, TODAY).queries[0].query == query


@pytest.mark.parametrize(
    ("question", "searches"),
    [("hello", False), ("你好", False), ("สวัสดี", False), ("12 * 7", False), ("what is 17 + 25?", False),
     ("who won the election?", True), ("Python 3.12 what's new", True)],
)  # fmt: skip
def test_greetings_and_arithmetic_do_not_search(question, searches):
    assert needs_search(question) is searches
    plan = heuristic_plan(question, TODAY)
    assert plan.needs_search is searches and (len(plan.queries) > 0) is searches


def test_versions_get_a_release_notes_variant_and_languages_are_detected():
    plan = heuristic_plan("What's new in Python 3.13?", TODAY)
    assert [q.query for q in plan.queries] == [
        "What's new in Python 3.13",
        "What's new in Python 3.13 release notes",
    ]
    assert question_language("臺灣的颱風") == "zh-TW" and question_language("台风") == "zh-CN"
    assert question_language("奎蘭湖有多深？") == "zh-TW" and question_language("多深") == "zh-TW"  # Taiwan's


@pytest.mark.parametrize(
    ("query", "language", "question", "settled_as"),
    [
        ("奎蘭湖 深度", "zh-CN", "奎蘭湖有多深？", "zh-TW"),  # the model's mainland tag for Traditional text
        ("奎兰湖 深度", "zh-TW", "奎兰湖有多深？", "zh-CN"),
        ("深度", "zh", "奎蘭湖有多深？", "zh-TW"),  # the query alone says nothing: the question does
        ("Lake Quillan depth", "en", "奎蘭湖有多深？", "en"),  # another language is the planner's choice
        ("ทะเลสาบ", "th", "奎蘭湖有多深？", "th"),
    ],
)
def test_a_chinese_query_is_searched_in_the_variant_its_characters_are_written_in(
    query, language, question, settled_as
):
    plan = parse_plan(
        f'{{"needsSearch": true, "queries": [{{"query": "{query}", "language": "{language}"}}]}}'
    )
    assert [q.language for q in settled(plan, question).queries] == [settled_as]
    assert question_language("ราคาทอง") == "th" and question_language("gold price") == "en"


def test_queries_are_cut_at_a_word_boundary():
    long = "word " * 200
    assert len(cut_query(long)) <= 300 and not cut_query(long).endswith(" ")
    assert cut_query("x" * 400) == "x" * 300
    assert all(len(q.query) <= 300 for q in heuristic_plan("search " + long, TODAY).queries)


def test_the_planner_sees_only_the_question_and_the_date():
    messages = planner_messages("What is new in Python this year?", TODAY)
    assert len(messages) == 2 and messages[1]["content"] == "What is new in Python this year?"
    assert "2026-11-29" in messages[0]["content"] and "2569" in messages[0]["content"]


VALID = '{"needsSearch": true, "queries": [{"query": "python 3.13 release notes", "freshness": "month", "language": "en"}]}'


def test_a_valid_plan_parses():
    plan = parse_plan(VALID)
    assert plan.needs_search and plan.planner == "model"
    assert plan.queries[0].query == "python 3.13 release notes" and plan.queries[0].freshness == "month"
    assert parse_plan('{"needsSearch": false, "queries": []}').queries == []


@pytest.mark.parametrize(
    "text",
    [
        "Sure! Here is the plan: " + VALID,
        "```json\n" + VALID + "\n```",
        '{"needsSearch": true}',
        '{"needsSearch": true, "queries": [], "extra": 1}',
        '{"needsSearch": "yes", "queries": []}',
        '{"needsSearch": true, "queries": [{"query": "a"}, {"query": "b"}, {"query": "c"}]}',
        '{"needsSearch": true, "queries": [{"query": "a", "freshness": "hourly"}]}',
        '{"needsSearch": true, "queries": [{"query": "a", "language": "English please"}]}',
        '{"needsSearch": true, "queries": [{"query": "a", "url": "http://127.0.0.1/"}]}',
        '{"needsSearch": true, "queries": [{"query": ""}]}',
        '{"needsSearch": true, "queries": []}',
        "[]",
        "",
    ],
)
def test_anything_but_the_exact_schema_is_refused(text):
    with pytest.raises(PlanError):
        parse_plan(text)


def test_a_long_run_of_dashes_is_planned_at_once():
    """Its seconds are measured by bench/hostile_inputs.py."""
    assert heuristic_plan("-" * 1_200 + " what now x", date(2026, 1, 1)).needs_search
    assert needs_search("1 " + "- " * 50_000 + "x")


def test_a_plan_nested_past_the_parser_is_refused_not_a_crash():
    with pytest.raises(PlanError, match="not JSON"):
        parse_plan("[" * 100_000)
