"""Documents found by words for /find: by title, by a relevant passage in any language, never by nearness alone."""

import pytest

from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.documents import match_documents, matching_line
from knowledge.retrieval.embed import LocalEmbedder
from knowledge.retrieval.search import Meaning, search
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings

DOCS = {
    "harbour.md": "# Harbour log\n\nThe ferry leaves the harbour at seven.\nThe harbour master keeps the tide tables.\n",
    "proteins.md": "# Muscle food\n\nProteins are chains of amino acids. Eggs, beans and fish are rich in protein.\n",
    "bread.md": "# Sourdough\n\nSourdough bread rises with a starter of wild yeast and flour.\n",
    "harbour-cafe.md": "# The harbour café\n\nOpen from eight; the terrace looks over the boats.\n",
}


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


def test_words_find_documents_by_title_and_by_passage_with_the_line_that_matched(tmp_path, qwen_counter):
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, DOCS, qwen_counter)
    with Index(settings.index_path, readonly=True) as index:
        found = match_documents(index, "harbour")
        assert {m.document.title for m in found} == {"Harbour log", "The harbour café"}
        log = next(m for m in found if m.document.title == "Harbour log")
        assert log.line == "The ferry leaves the harbour at seven." and log.chunk_id
        assert match_documents(index, "sourdough starter")[0].document.title == "Sourdough"
        assert match_documents(index, "zeppelin") == []
        assert match_documents(index, "   ") == []


def test_a_chinese_word_finds_the_english_page_and_unrelated_words_find_nothing(
    tmp_path, qwen_counter, embedder
):
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, DOCS, qwen_counter)
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        meaning = Meaning.of(embedder)
        found = match_documents(index, "蛋白質 食物", meaning=meaning)
        assert found and found[0].document.title == "Muscle food"
        assert match_documents(index, "量子電腦的量子位元", meaning=meaning) == []  # nearest is not enough
        assert search(index, "蛋白質", meaning=meaning)  # meaning alone finds a passage for a word
        for nothing in ("？！。", "🏠💰", " ... "):  # but nothing is near no word at all
            assert search(index, nothing, meaning=meaning) == []


def test_the_line_shown_is_the_first_holding_a_word_and_is_kept_short():
    text = "# Heading harbour\nfirst line\nthe HARBOUR at dawn " + "x" * 200 + "\n"
    line = matching_line(text, ["harbour"])
    assert line.startswith("the HARBOUR at dawn") and line.endswith("…") and len(line) == 120
    assert matching_line("only line\n", ["absent"]) == "only line"
