"""Do the documents answer the question? The verdict on small real corpora in three languages,
with the real local embedder (multilingual-e5) and with words only."""

from statistics import NormalDist

import pytest

from knowledge.retrieval import sufficiency
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import LocalEmbedder
from knowledge.retrieval.search import Meaning, find
from knowledge.retrieval.sufficiency import Evidence
from knowledge.retrieval.vectors import stored_background
from knowledge.store.index import Index
from knowledge.words.replies import text_of
from tests import test_assistant
from tests.conftest import ingest_texts, make_settings
from tests.sufficiency_corpus import ANSWERABLE, DOCS, OFF_TOPIC, SAME_TOPIC_ABSENT
from tests.test_assistant import web_engine

web = test_assistant.web  # the fixture (fake_llm is conftest's)


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def knowledge_base(home, docs, embedder=None):
    """Settings of a knowledge base holding ``docs``, embedded when an embedder is given."""
    settings = make_settings(home)
    ingest_texts(settings, docs)
    if embedder is not None:
        with Index(settings.index_path) as index:
            embed_missing(index, embedder)
    return settings


@pytest.fixture(scope="module")
def notes(tmp_path_factory, embedder):
    return knowledge_base(tmp_path_factory.mktemp("notes") / "kb", DOCS, embedder)


def verdict(settings, question, embedder=None):
    with Index(settings.index_path, readonly=True) as index:
        return find(index, question, k=5, meaning=Meaning.of(embedder))


@pytest.mark.parametrize(("question", "source"), ANSWERABLE)
def test_a_question_the_notes_answer_stays_local_in_any_language(notes, embedder, question, source):
    found = verdict(notes, question, embedder)
    assert found.verdict.answerable, (question, found.verdict)
    assert found.results[0].raw_path.startswith(f"raw/{source}-")
    assert found.verdict.basis == "words and meaning"


@pytest.mark.parametrize("question", OFF_TOPIC)
def test_an_off_topic_question_is_not_answered_by_the_notes(notes, embedder, question):
    found = verdict(notes, question, embedder)
    assert not found.verdict.answerable, (question, found.verdict)
    assert found.results, "search still shows its best passages"
    assert all(r.relevance < sufficiency.DEFAULT_THRESHOLD for r in found.results)


def test_the_background_passages_are_stored_beside_the_vectors(notes, embedder):
    with Index(notes.index_path, readonly=True) as index:
        background = stored_background(index, embedder.name)
    assert background is not None and len(background.raw) == 72
    assert sorted(set(background.groups.tolist())) == ["cjk", "other", "thai"]


def test_a_one_document_knowledge_base_knows_what_it_holds(tmp_path, embedder):
    recipe = {"tom-kha-gai.md": DOCS["tom-kha-gai.md"]}
    settings = knowledge_base(tmp_path / "kb", recipe, embedder)
    for question in (
        "How do you cook Thai chicken soup with galangal and coconut milk?",
        "ต้มข่าไก่ใช้ข่ากี่แว่น",
        "ต้มข่าไก่ต้องใส่น้ำมะนาวตอนไหน",
    ):
        assert verdict(settings, question, embedder).verdict.answerable, question
    for question in (
        "Who won the 2022 FIFA World Cup?",
        "明天台北會下雨嗎？",
        "What is the capital of Australia?",
    ):
        assert not verdict(settings, question, embedder).verdict.answerable, question


def test_words_only_keeps_same_language_answers_and_refuses_the_rest(tmp_path):
    settings = knowledge_base(tmp_path / "kb", DOCS)
    for question in (
        "How many columns can an FTS5 table have?",
        "高山烏龍茶要用幾度的水沖泡？",
        "ต้มข่าไก่ใช้ข่ากี่แว่น",
    ):
        found = verdict(settings, question)
        assert found.verdict.answerable and found.verdict.basis == "words", question
    for question in ("Who won the 2022 FIFA World Cup?", "How do I bake sourdough bread?"):
        assert not verdict(settings, question).verdict.answerable, question


def test_an_empty_index_answers_nothing(tmp_path):
    settings = knowledge_base(tmp_path / "kb", {})
    found = verdict(settings, "anything?")
    assert found.results == [] and not found.verdict.answerable and found.verdict.basis == "nothing"


def test_the_bar_rises_slowly_with_the_size_of_the_knowledge_base():
    # the same cosine stands out less among more passages: the best of N unrelated ones climbs higher
    heights = [sufficiency.standout(0.40, 0.0, n, 0.072) for n in (1, 3, 260, 100_000)]
    assert heights == sorted(heights, reverse=True)
    bars = [sufficiency.chance_best(n) for n in (1, 100, 100_000)]
    assert bars == pytest.approx([1.645, 3.28, 4.89], abs=0.01)
    # 19 times in 20 the best of N standard normal draws stays under the bar
    assert NormalDist().cdf(sufficiency.chance_best(300)) ** 300 == pytest.approx(0.95)


def test_relevance_weighs_meaning_and_words_and_expects_words_in_the_questions_own_script():
    strong = Evidence(standout=4.0, coverage=0.6, lexical=1.0, same_script=True)
    unrelated = Evidence(standout=0.0, coverage=0.1, lexical=0.2, same_script=True)
    translated = Evidence(standout=4.0, coverage=0.0, lexical=0.0, same_script=False)
    same_script_no_words = Evidence(standout=4.0, coverage=0.0, lexical=0.0, same_script=True)
    assert sufficiency.relevance(strong) > 0.99 and sufficiency.relevance(unrelated) < 0.5
    # a passage in another language is not expected to share the question's words
    assert sufficiency.relevance(translated) > sufficiency.relevance(same_script_no_words)
    assert 0.0 <= sufficiency.relevance(Evidence(None, 0.0, 0.0, True)) < 0.5
    assert sufficiency.relevance(Evidence(None, 1.0, 1.5, True)) > 0.99


def test_the_verdict_says_why():
    yes = sufficiency.judge([0.2, 0.97], threshold=0.5, vectors=True)
    no = sufficiency.judge([0.2, 0.31], threshold=0.5, vectors=False)
    assert (
        yes.answerable
        and yes.relevance == 0.97
        and "relevant" in yes.why
        and yes.basis == "words and meaning"
    )
    assert not no.answerable and "0.31 < 0.5" in no.why and no.basis == "words"
    assert set(yes.to_json()) == {"answerable", "relevance", "threshold", "basis", "why"}


@pytest.mark.parametrize("question", SAME_TOPIC_ABSENT)
async def test_a_question_near_the_notes_that_they_do_not_answer_still_reaches_the_web(
    notes, embedder, fake_llm, web, question
):
    import aiohttp

    from tests.fake_llm import answer
    from tests.fake_search import Result, ddg_results

    search, store = web
    search.script["ddg"] = [
        ddg_results("q", [Result("An answer page", "https://answers.example/a", question)])
    ]

    def reply(body):
        system = body["messages"][0]["content"]
        if "plan web searches" in system:
            return answer(
                '{"needsSearch": true, "queries": [{"query": "q", "freshness": null, "language": "en"}]}'
            )
        if "'n: YES'" in system:
            return answer("1: YES")
        if "Summarise" in system:
            return answer("[1] A page that answers it.")
        return answer("I don't know.")  # the passages it was given are near the question, not about it

    fake_llm.responder = reply
    async with aiohttp.ClientSession() as session:
        engine = web_engine(notes, session, fake_llm.base_url, search, store)
        engine.meaning = Meaning.of(embedder)
        got = await engine.ask(question, chat_id="1")
    assert got.mode == "web" and [c.id for c in got.candidates] == ["web-1"]
    assert got.route.by in ("retrieval", "model") and text_of(got).startswith(
        "Your documents do not answer this."
    )


def test_the_second_embedders_agreement_moves_a_cross_script_passage_and_its_absence_changes_nothing():
    found = Evidence(standout=1.0, coverage=0.0, lexical=0.0, same_script=False)
    agrees = Evidence(standout=1.0, coverage=0.0, lexical=0.0, same_script=False, agreement=0.45)
    unrelated = Evidence(standout=1.0, coverage=0.0, lexical=0.0, same_script=False, agreement=0.02)
    assert sufficiency.relevance(unrelated) < 0.5 < sufficiency.relevance(agrees)
    # without it (Vietnamese, the package missing) the passage is judged by the weights from before it
    assert sufficiency.relevance(found) == sufficiency.relevance(found, weights=sufficiency.HYBRID_WEIGHTS)
