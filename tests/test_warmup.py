"""What the first questions would load, loaded as kb bot starts: in each script the index holds, the
dictionary only where it serves, and a broken index said once without stopping the bot."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
import structlog

from bot.main import owner_language
from knowledge.model.template import FALLBACK_TEMPLATE, ChatTemplate
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import LocalEmbedder
from knowledge.retrieval.search import Meaning, find
from knowledge.retrieval.second import Second, UseEncoder
from knowledge.retrieval.warmup import warm
from knowledge.store.index import Index
from knowledge.wiring import build_engine, conversing
from tests.bot_env import running_bot
from tests.conftest import ingest_texts, make_settings
from tests.fake_llm import answer, free_port
from tests.test_assistant import engine_for
from tests.test_glossary import APPLIANCES, ZH_APPLIANCES

LOADS = ("glossary.read", "glossary.reversed")


@pytest.fixture(scope="module")
def embedders():
    return LocalEmbedder(), Second(UseEncoder())


def embedded(home, docs, embedders):
    settings = make_settings(home)
    ingest_texts(settings, docs)
    e5, second = embedders
    with Index(settings.index_path) as index:
        assert embed_missing(index, e5, second=second) == len(docs)
    return settings


def test_an_index_in_two_languages_is_warmed_in_both_and_its_first_questions_load_nothing(
    tmp_path, embedders
):
    chinese = {f"zh-{name}": text for name, text in ZH_APPLIANCES.items()}
    settings = embedded(tmp_path / "kb", {**APPLIANCES, **chinese}, embedders)
    e5, second = embedders
    meaning = Meaning.of(e5, second=second)
    with Index(settings.index_path, readonly=True) as index:
        assert warm(index, Meaning.of(e5, second=second), "zh-Hant") == ("cjk", "other")  # the reader's first
        with structlog.testing.capture_logs() as warming:
            assert warm(index, meaning) == ("other", "cjk")
        with structlog.testing.capture_logs() as asking:
            chinese_first = find(index, "吸塵器的濾網多久洗一次？", k=3, meaning=meaning).results[0]
            english_first = find(index, "How often is the engine oil changed?", k=3, meaning=meaning).results[
                0
            ]
    assert [e["event"] for e in warming if e["event"] in LOADS] == list(LOADS)  # the dictionary both ways
    assert not [e for e in asking if e["event"] in LOADS]
    assert (chinese_first.title, english_first.title) == ("吸塵器", "Car")


def test_an_english_index_is_warmed_in_english_only_and_the_dictionary_is_not_read(tmp_path, embedders):
    settings = embedded(tmp_path / "kb", dict(list(APPLIANCES.items())[:3]), embedders)
    e5, second = embedders
    with Index(settings.index_path, readonly=True) as index:
        with structlog.testing.capture_logs() as english:
            assert warm(index, Meaning.of(e5, second=second)) == ("other",)
            assert warm(index, None) == ()  # by words alone there is nothing to load ahead
        with structlog.testing.capture_logs() as chinese:  # a reader in Chinese asks in Chinese
            assert warm(index, Meaning.of(e5, second=second), "zh-Hant") == ("cjk", "other")
    assert not [e for e in english if e["event"] in LOADS]
    assert [e["event"] for e in chinese if e["event"] in LOADS] == ["glossary.read"]  # not read into Chinese


async def test_a_knowledge_base_with_no_index_yet_is_not_warmed_and_a_broken_one_is_said_once(tmp_path):
    fresh = make_settings(tmp_path / "fresh")
    broken = make_settings(tmp_path / "broken")
    broken.index_path.parent.mkdir(parents=True)
    broken.index_path.write_bytes(b"this is not a database" * 100)
    async with aiohttp.ClientSession() as session:
        with structlog.testing.capture_logs() as logs:
            engine_for(fresh, session, f"http://127.0.0.1:{free_port()}/v1").warm()
            engine_for(broken, session, f"http://127.0.0.1:{free_port()}/v1").warm()
    said = [e for e in logs if e["event"].startswith("engine.") and str(tmp_path) in e.get("reason", "")]
    assert [e["event"] for e in said] == ["engine.warm_failed"] and "broken" in said[0]["reason"]
    assert broken.index_path.read_bytes() == b"this is not a database" * 100  # nothing written to it


async def test_the_bots_own_process_warms_as_it_starts_and_answers_the_first_question(tmp_path, varn_site):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"quillan.md": "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n"})
    with structlog.testing.capture_logs() as logs:
        async with running_bot(home, varn_site, warm=True, daemon=False) as (env, _):
            for _ in range(600):  # the warm-up's thread: waited for by its event, not by a time
                if any(e["event"] == "engine.warmed" for e in logs):
                    break
                await asyncio.sleep(0.05)
            env.llm.script = [answer("It is 317 metres deep [1].")]
            await env.say("How deep is Lake Quillan?")
            reply = await env.bot_said(lambda c: "317 metres" in c.params.get("text", ""))
    warmed = [e for e in logs if e["event"] == "engine.warmed"]
    assert warmed and all(e["groups"] == [] for e in warmed)  # KB_EMBED=off: by words, nothing to load
    assert "[1]" in reply.params["text"]


async def test_the_bot_warms_in_the_language_its_owner_last_chose_first(tmp_path, embedders):
    settings = make_settings(tmp_path / "kb", KB_EMBED="local")
    embedded(settings.home, dict(list(APPLIANCES.items())[:2]), embedders)
    async with aiohttp.ClientSession() as session:
        engine = build_engine(settings, session, ApproxCounter(), ChatTemplate(FALLBACK_TEMPLATE, {}))
        talk = conversing(settings, engine)
        with structlog.testing.capture_logs() as before:
            engine.warm(owner_language(settings, talk))
        talk.store.choose_language("tg:1", "th")  # /lang in the bot
        with structlog.testing.capture_logs() as after:
            engine.warm(owner_language(settings, talk))
    assert [e["groups"] for e in before if e["event"] == "engine.warmed"] == [["other"]]
    assert [e["groups"] for e in after if e["event"] == "engine.warmed"] == [["thai", "other"]]
