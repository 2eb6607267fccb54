"""Embedders: the local multilingual model on real text, and the URL backend against a wire-format stand-in."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.retrieval.embed import (
    EmbedderError,
    LocalEmbedder,
    UrlEmbedder,
    make_embedder,
    parse_embeddings,
)
from tests.conftest import make_settings
from tests.fake_embeddings import FakeEmbeddings, bag_vector, threaded
from tests.fake_llm import free_port

PASSAGES = {
    "lake-en": "Lake Quillan is 317 metres deep and never freezes, even in the coldest winters.",
    "tea-zh": "烏龍茶是一種半發酵的茶，主要產於台灣和福建，香氣濃郁。",
    "rice-th": "ข้าวหอมมะลิปลูกมากในภาคตะวันออกเฉียงเหนือของประเทศไทย และมีกลิ่นหอมเป็นพิเศษ",
}
QUESTIONS = [  # each asked in a language its passage is not written in
    ("奎蘭湖有多深？", "lake-en"),
    ("Where is oolong tea grown?", "tea-zh"),
    ("ชาอูหลงคืออะไร", "tea-zh"),
    ("Which rice smells fragrant in Thailand?", "rice-th"),
]


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def test_the_local_model_matches_questions_to_passages_across_languages(local):
    names = list(PASSAGES)
    vectors = local.embed(list(PASSAGES.values()), "passage")
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    for question, expected in QUESTIONS:
        scores = vectors @ local.embed([question], "query")[0]
        assert names[int(np.argmax(scores))] == expected, (question, scores)


def test_query_and_passage_sides_differ_and_empty_input_is_empty(local):
    q = local.embed(["Lake Quillan"], "query")[0]
    p = local.embed(["Lake Quillan"], "passage")[0]
    assert not np.allclose(q, p)
    assert local.embed([], "passage").shape[0] == 0


def test_a_very_long_text_is_embedded_not_refused(local):
    vec = local.embed(["word " * 20000], "passage")
    assert vec.shape == (1, 384) and np.all(np.isfinite(vec))


def test_the_url_backend_batches_keeps_order_and_says_which_side():
    fake = FakeEmbeddings()
    texts = [f"text number {n} about {w}" for n, w in enumerate(["lakes", "tea", "rice", "fish", "rain"])]
    with threaded(fake):
        embedder = UrlEmbedder(fake.base_url, "bag-of-words", batch_size=2, passage_prefix="passage: ")
        vectors = embedder.embed(texts, "passage")
        query = embedder.embed(["lakes"], "query")
    assert len(fake.requests) == 4  # 2 + 2 + 1 passages, then the question
    assert [len(r["input"]) for r in fake.requests] == [2, 2, 1, 1]
    assert all(r["model"] == "bag-of-words" for r in fake.requests)
    assert [r["input_type"] for r in fake.requests] == ["passage"] * 3 + ["query"]
    assert fake.requests[0]["input"][0] == "passage: " + texts[0] and fake.requests[3]["input"] == ["lakes"]
    expected = np.array([bag_vector("passage: " + t) for t in texts], dtype=np.float32)
    assert np.allclose(vectors, expected, atol=1e-5)  # in input order, although the server shuffled data[]
    assert embedder.name == "url:bag-of-words" and query.shape == (1, 64)


@pytest.mark.parametrize(
    ("fake", "words"),
    [
        (FakeEmbeddings(status=404), ["404", "not found", "KB_EMBED_MODEL"]),
        (FakeEmbeddings(status=500), ["500"]),
        (FakeEmbeddings(body='{"object": "list"}'), ["not embeddings"]),
        (FakeEmbeddings(body="<html>proxy error</html>"), ["not embeddings"]),
        (FakeEmbeddings(body='{"data": [{"index": 0, "embedding": []}]}'), ["vectors"]),
        (FakeEmbeddings(body='{"data": [{"index": 0, "embedding": [1.0, 2.0]}]}'), ["2 texts"]),
    ],
    ids=["404", "500", "no-data", "html", "empty-vector", "too-few"],
)
def test_the_url_backend_turns_bad_answers_into_clear_errors(fake, words):
    with threaded(fake):
        embedder = UrlEmbedder(fake.base_url, "bag-of-words")
        with pytest.raises(EmbedderError) as caught:
            embedder.embed(["one", "two"], "passage")
    for word in words:
        assert word in str(caught.value)


def test_an_unreachable_server_says_how_to_start_one():
    embedder = UrlEmbedder(f"http://127.0.0.1:{free_port()}/v1", "bge-m3", timeout_s=2)
    with pytest.raises(EmbedderError, match="cannot reach the embeddings server.*start it"):
        embedder.embed(["hello"], "query")


def test_a_slow_server_times_out():
    fake = FakeEmbeddings(delay_s=3)
    with threaded(fake):
        embedder = UrlEmbedder(fake.base_url, "bag-of-words", timeout_s=0.5)
        with pytest.raises(EmbedderError):
            embedder.embed(["hello"], "query")


def test_vectors_with_nan_are_refused():
    with pytest.raises(EmbedderError, match="NaN"):
        parse_embeddings(b'{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}', expected=1)


def test_the_setting_chooses_the_backend(tmp_path):
    assert make_embedder(make_settings(tmp_path, KB_EMBED="off")) is None
    assert isinstance(make_embedder(make_settings(tmp_path, KB_EMBED="auto")), LocalEmbedder)
    auto_url = make_embedder(make_settings(tmp_path, KB_EMBED="auto", KB_EMBED_URL="http://127.0.0.1:9/v1"))
    assert isinstance(auto_url, UrlEmbedder) and auto_url.name == "url:multilingual-e5-small"
    with pytest.raises(EmbedderError, match="KB_EMBED_URL"):
        make_embedder(make_settings(tmp_path, KB_EMBED="url"))
