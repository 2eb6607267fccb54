"""The question searched in the index's other languages: the model's translations, checked, cached,
skipped when they cannot help, and never in the way when the model is down, slow or confused."""

import json

import aiohttp
import pytest
import structlog

from knowledge.config import load_settings
from knowledge.model.client import ModelClient
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import LocalEmbedder, UrlEmbedder
from knowledge.retrieval.search import Also, Meaning, find
from knowledge.retrieval.sufficiency import Evidence
from knowledge.retrieval.translate import (
    STRONG_AGREEMENT,
    STRONG_LEAD,
    Translation,
    TranslationError,
    Translator,
    is_strong,
    parse,
    targets,
    translations_for,
)
from knowledge.store.index import Index
from knowledge.wiring import translator
from tests.conftest import ingest_texts, make_settings
from tests.fake_embeddings import FakeEmbeddings, threaded
from tests.fake_llm import FakeLLM, Step, ThreadedFakeLLM, answer, free_port, start

QUESTION = "泰國哪一種米煮熟後很香？"
REPLY = json.dumps(
    {"en": "Which rice smells fragrant when cooked in Thailand?", "th": "ข้าวชนิดใดในประเทศไทยที่หุงแล้วมีกลิ่นหอม"}
)
DOCS = {
    "rice.md": "# ข้าวหอมมะลิ\n\nข้าวหอมมะลิเป็นข้าวพันธุ์หนึ่งของประเทศไทย เมื่อหุงสุกแล้วจะมีกลิ่นหอมคล้ายใบเตย "
    "ปลูกมากในภาคตะวันออกเฉียงเหนือ\n",
    "flood.md": "# น้ำท่วม\n\nน้ำท่วมใหญ่ที่กรุงเทพมหานครเกิดขึ้นในปี พ.ศ. 2554 ทำให้โรงงานหลายแห่งต้องปิด\n",
    "temple.md": "# วัดอรุณ\n\nวัดอรุณราชวรารามตั้งอยู่ริมแม่น้ำเจ้าพระยา มีพระปรางค์สูงประดับกระเบื้อง\n",
    "tea.md": "# 凍頂烏龍茶\n\n凍頂烏龍茶產於台灣南投縣鹿谷鄉，茶湯金黃，帶有花香與熟果香。\n",
    "rain.md": "# Monsoon\n\nThe monsoon brings heavy rain to Mumbai from June to September.\n",
    "lake.md": "# Lake Quillan\n\nLake Quillan is 84 metres deep and freezes over every January.\n",
}


def test_the_reply_is_checked_strictly():
    groups = ["other", "thai"]
    found = parse(REPLY, QUESTION, groups)
    assert found == [
        Translation("en", "Which rice smells fragrant when cooked in Thailand?"),
        Translation("th", "ข้าวชนิดใดในประเทศไทยที่หุงแล้วมีกลิ่นหอม"),
    ]
    assert parse(f"```json\n{REPLY}\n```", QUESTION, groups) == found  # a fence the model added
    bad = {
        "not JSON": "Sure! Here are the translations: ...",
        "a key missing": json.dumps({"en": "Which rice?"}),
        "a key more": json.dumps({"en": "Which rice?", "th": "ข้าวอะไร", "ja": "どの米"}),
        "Thai asked, English given": json.dumps({"en": "Which rice?", "th": "Which rice?"}),
        "not a string": json.dumps({"en": ["Which rice?"], "th": "ข้าวอะไร"}),
        "empty": json.dumps({"en": " ", "th": "ข้าวอะไร"}),
        "an essay": json.dumps({"en": "Which rice? " * 40, "th": "ข้าวอะไร"}),
    }
    for why, text in bad.items():
        with pytest.raises(TranslationError):
            parse(text, QUESTION, groups)
            pytest.fail(why)


def test_the_languages_asked_for_are_those_the_index_holds_besides_the_questions():
    assert targets(QUESTION, {"cjk": 10, "other": 3, "thai": 5}) == ["other", "thai"]
    assert targets(QUESTION, {"cjk": 10}) == []  # an index in the question's language alone
    assert targets("Which rice is fragrant?", {"other": 4, "cjk": 1}) == ["cjk"]
    assert targets("ข้าวอะไรหอม", {"thai": 4, "other": 0}) == []


def test_strong_lexical_evidence_is_a_passage_of_the_questions_own_script_found_by_its_words():
    assert is_strong(Evidence(1.0, 0.8, 1.2, True))
    assert not is_strong(Evidence(1.0, 0.8, 1.2, False))  # another script: its words did not find it
    assert not is_strong(Evidence(1.0, 0.2, 1.2, True))  # a few of the question's words only
    assert not is_strong(Evidence(1.0, 0.8, 0.0, True))  # found by meaning, not by words
    assert not is_strong(None)


def test_a_passage_in_another_script_is_strong_when_the_second_embedder_agrees_strongly():
    assert is_strong(Evidence(1.0, 0.0, 0.0, False, agreement=STRONG_AGREEMENT + 0.05))
    assert not is_strong(Evidence(1.0, 0.0, 0.0, False, agreement=STRONG_AGREEMENT - 0.05))
    assert not is_strong(Evidence(1.0, 0.0, 0.0, False))  # Vietnamese, or no second embedder: ask the model


def test_a_passage_in_another_script_found_by_meaning_well_ahead_of_the_next_is_strong():
    found = Evidence(1.0, 0.0, 0.0, False)
    assert is_strong(found, STRONG_LEAD + 0.05)
    assert not is_strong(found, STRONG_LEAD - 0.05)  # a close second: the translation may reorder them
    assert not is_strong(found)  # no second passage to lead
    assert not is_strong(Evidence(None, 0.0, 0.4, False), STRONG_LEAD + 1.0)  # no vector: found by words only
    assert not is_strong(Evidence(1.0, 0.2, 1.2, True), STRONG_LEAD + 1.0)  # its own script: its words decide


async def test_one_call_at_temperature_zero_then_the_cache():
    fake = FakeLLM([answer(REPLY)])
    runner = await start(fake)
    try:
        async with aiohttp.ClientSession() as session:
            translate = translator(load_settings({}), ModelClient(session, fake.base_url))
            first = await translate(QUESTION, ["other", "thai"])
            again = await translate(QUESTION, ["other", "thai"])
    finally:
        await runner.cleanup()
    assert first == again and [t.language for t in first] == ["en", "th"]
    assert len(fake.requests) == 1
    body = fake.requests[0]
    assert body["temperature"] == 0.0 and body["max_tokens"] <= 256
    assert body["messages"][-1] == {"role": "user", "content": QUESTION}  # the question is data, alone


@pytest.mark.parametrize(
    "step",
    [answer("I cannot translate that."), Step(status=500), Step(drop=True), answer(REPLY, delay_s=3.0)],
    ids=["prose", "server-error", "dropped", "too-slow"],
)
async def test_a_model_that_fails_gives_no_translations_and_says_why(step):
    fake = FakeLLM([step])
    runner = await start(fake)
    try:
        async with aiohttp.ClientSession() as session:
            llm = ModelClient(session, fake.base_url, timeout_s=30)
            translate = translator(load_settings({"KB_TRANSLATE_TIMEOUT_S": "1"}), llm)
            with structlog.testing.capture_logs() as logs:
                assert await translate(QUESTION, ["other", "thai"]) == []
    finally:
        await runner.cleanup()
    [failed] = [e for e in logs if e["event"] == "translate.failed"]
    assert failed["reason"] and failed["ms"] < 2900


async def test_a_model_that_is_down_is_not_asked_again_for_a_while():
    async with aiohttp.ClientSession() as session:
        llm = ModelClient(session, f"http://127.0.0.1:{free_port()}/v1", connect_timeout_s=1)
        translate = translator(load_settings({}), llm)
        with structlog.testing.capture_logs() as logs:
            assert await translate(QUESTION, ["other"]) == []
            assert await translate("另一個問題？", ["other"]) == []
    assert [e["event"] for e in logs].count("translate.failed") == 1


def test_translate_off_builds_no_translator():
    assert translator(load_settings({"KB_TRANSLATE": "off"}), None) is None  # type: ignore[arg-type]


async def test_translations_are_skipped_when_they_cannot_help():
    calls = []

    async def chat(messages, max_tokens):
        calls.append(messages)
        return REPLY, 10, 20

    translate = Translator(chat)
    strong = Evidence(2.0, 0.9, 1.4, True)
    weak = Evidence(0.5, 0.2, 0.3, False)
    assert await translations_for(translate, QUESTION, strong, {"cjk": 5, "thai": 5, "other": 5}) == []
    assert await translations_for(translate, QUESTION, weak, {"cjk": 5}) == []
    assert await translations_for(None, QUESTION, weak, {"thai": 5}) == []
    ahead = Evidence(0.5, 0.0, 0.0, False)
    assert (
        await translations_for(translate, QUESTION, ahead, {"thai": 5, "other": 5}, STRONG_LEAD + 0.1) == []
    )
    assert not calls
    assert len(await translations_for(translate, QUESTION, weak, {"cjk": 5, "thai": 5, "other": 5})) == 2
    assert len(calls) == 1


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


def test_a_translation_brings_the_passage_in_another_language_first(tmp_path, qwen_counter, embedder):
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, DOCS, qwen_counter)
    translations = [t.text for t in parse(REPLY, QUESTION, ["other", "thai"])]
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        meaning = Meaning.of(embedder)
        alone = find(index, QUESTION, k=3, meaning=meaning)
        helped = find(index, QUESTION, k=3, meaning=meaning, translations=translations)
        same = find(index, QUESTION, k=3, meaning=meaning, translations=[])
        followup = find(index, QUESTION, k=3, meaning=meaning, also=Also(queries=[("ข้าวหอม", 0.7)]))
    assert helped.results[0].title == "ข้าวหอมมะลิ"
    assert (
        helped.results[0].score > alone.results[0].score
    )  # the translations add to the question's own score
    assert [r.chunk_id for r in same.results] == [r.chunk_id for r in alone.results]  # none: as before
    assert alone.lead == pytest.approx(alone.results[0].score - alone.results[1].score, abs=1e-5)
    assert followup.lead is None  # its scores add another query's: no lead to read


def test_kb_search_shows_the_translations_it_used_and_works_without_the_model(tmp_path, qwen_counter, run_kb):
    settings = make_settings(tmp_path / "kb", KB_EMBED="local")
    ingest_texts(settings, DOCS, qwen_counter)
    home = tmp_path / "kb"
    with Index(settings.index_path) as index:
        embed_missing(index, LocalEmbedder())
    with ThreadedFakeLLM(FakeLLM([answer(REPLY)])) as fake:
        done = run_kb(
            "--home",
            str(home),
            "search",
            "--json",
            "-k",
            "3",
            QUESTION,
            env={"KB_LLM_URL": fake.base_url, "KB_EMBED": "local"},
        )
        assert done.returncode == 0, done.stderr
        results = json.loads(done.stdout)
        assert results[0]["title"] == "ข้าวหอมมะลิ"
        assert results[0]["translations"] == [
            {"language": "en", "text": "Which rice smells fragrant when cooked in Thailand?"},
            {"language": "th", "text": "ข้าวชนิดใดในประเทศไทยที่หุงแล้วมีกลิ่นหอม"},
        ]
        assert len(fake.requests) == 1
        human = run_kb(
            "--home",
            str(home),
            "search",
            "-k",
            "3",
            QUESTION,
            env={"KB_LLM_URL": fake.base_url, "KB_EMBED": "local"},
        )
        assert "also searched as: en: Which rice smells fragrant" in human.stdout
        off = run_kb(
            "--home",
            str(home),
            "search",
            "--json",
            "--no-translate",
            QUESTION,
            env={"KB_LLM_URL": fake.base_url, "KB_EMBED": "local"},
        )
        assert all(r["translations"] == [] for r in json.loads(off.stdout))
        assert len(fake.requests) == 2  # the human run asked (a run of its own), --no-translate did not
    down = run_kb(
        "--home",
        str(home),
        "search",
        "--json",
        QUESTION,
        env={"KB_LLM_URL": f"http://127.0.0.1:{free_port()}/v1", "KB_EMBED": "local"},
    )
    assert down.returncode == 0, down.stderr
    plain = run_kb(
        "--home", str(home), "search", "--json", "--no-translate", QUESTION, env={"KB_EMBED": "local"}
    )
    assert json.loads(down.stdout) == json.loads(plain.stdout)  # the model down: search exactly as without it


async def test_ask_searches_with_the_translations_and_the_reply_says_which(tmp_path, qwen_counter, embedder):
    from knowledge.wiring import open_engine

    fake = FakeLLM([answer(REPLY), answer("ข้าวหอมมะลิ: it smells of pandan leaves when cooked [1].")])
    runner = await start(fake)
    try:
        settings = make_settings(tmp_path / "kb", KB_EMBED="local", KB_LLM_URL=fake.base_url)
        ingest_texts(settings, DOCS, qwen_counter)
        with Index(settings.index_path) as index:
            embed_missing(index, embedder)
        async with open_engine(settings) as engine:
            reply = await engine.ask(QUESTION)
            again = await engine.ask(QUESTION)
    finally:
        await runner.cleanup()
    assert (
        [t.language for t in reply.translations] == ["en", "th"] == [t.language for t in again.translations]
    )
    assert reply.mode == "local" and reply.citations[0].title == "ข้าวหอมมะลิ"
    assert "ข้าวหอมมะลิเป็นข้าวพันธุ์หนึ่ง" in fake.requests[1]["messages"][-1]["content"]  # the Thai passage
    assert len(fake.requests) == 3  # translated once: the second ask took them from the cache


BAG_DOCS = {
    "lake.md": "# Lake Quillan\n\nLake Quillan is 317 metres deep and never freezes.\n",
    "ferry.md": "# The Marrow Star\n\nThe Marrow Star ferry has carried 212 passengers since 1931.\n",
    "heron.md": "# Heron survey\n\nThe survey counted 48 grey heron nests along the estuary.\n",
    "tea.md": "# 烏龍茶\n\n烏龍茶是一種半發酵的茶，主要產於台灣和福建。\n",
    "rain.md": "# 梅雨\n\n台北的梅雨季節通常在五月和六月。\n",
}


def test_a_translation_answers_for_the_passages_in_its_own_language(tmp_path):
    """With an embedder that cannot cross scripts (hashed words), a Chinese question about an English
    page is judged unanswered as written; its English translation is judged as if asked in English:
    answered when the page holds its words, not when no English page does."""
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, BAG_DOCS)
    with threaded(FakeEmbeddings()) as fake, Index(settings.index_path) as index:
        embedder = UrlEmbedder(fake.base_url, "bag-of-words")
        embed_missing(index, embedder)
        meaning = Meaning.of(embedder)
        alone = find(index, "奎蘭湖有多深？", k=3, meaning=meaning)
        helped = find(
            index, "奎蘭湖有多深？", k=3, meaning=meaning, translations=["How deep is Lake Quillan?"]
        )
        absent = find(
            index,
            "台灣高鐵多快？",
            k=3,
            meaning=meaning,
            translations=["How fast is the Taiwan high-speed rail?"],
        )
    assert not alone.verdict.answerable
    assert helped.verdict.answerable and helped.results[0].title == "Lake Quillan"
    assert helped.results[0].relevance >= settings.min_relevance > alone.verdict.relevance
    assert not absent.verdict.answerable


def test_translations_nested_past_the_parser_are_refused_not_a_crash():
    with pytest.raises(TranslationError, match="not JSON"):
        parse("[" * 100_000, "How deep is Lake Quillan?", ["zh"])
