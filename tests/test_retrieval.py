import pytest

from knowledge.retrieval.search import get_document_chunks, search
from knowledge.store.index import Index
from tests.conftest import ingest_texts

DOCS = {
    "panthers.md": "# Carolina Panthers\n\nThe Panthers defense gave up just 308 points, ranking sixth in the league.\n\n"
    "Kawann Short led the team in sacks with 11.\n",
    "oxygen.md": "# Oxygen\n\nOxygen was discovered independently by Carl Wilhelm Scheele, in Uppsala, in 1773.\n\n"
    "Joseph Priestley published his findings first, in 1774.\n",
    "黑豹.md": "# 黑豹队\n\n黑豹队的防守只丢了 308分，在联赛中排名第六。\n\n卡万·肖特以 11 次擒杀领先全队。\n",
    "臺北.md": "# 臺北\n\n臺北是臺灣的首都，也是最大的都會區。\n\n故宮博物院收藏了大量的文物。\n",
    "thai.md": "# ทีมแพนเธอร์ส\n\nทีมรับของแพนเธอร์สถอดใจที่คะแนน 308 ได้อันดับที่หกของลีก\n\n"
    "คาวันน์ ชอร์ต นำทีมด้วยการแซ็ค 11 ครั้ง\n",
    "engine.md": "# Steam engine\n\nA steam engine uses a rotor and a stator.\n\n"
    + "Filler text about boilers and pressure.\n" * 200,
}


@pytest.fixture
def index(settings):
    ingest_texts(settings, DOCS)
    with Index(settings.index_path) as index:
        yield index


@pytest.mark.parametrize(
    ("question", "source", "says"),
    [
        ("How many points did the Panthers defense surrender?", "panthers.md", "308 points"),
        ("Who led the team in sacks?", "panthers.md", "Kawann Short"),
        ("Where did Scheele discover oxygen?", "oxygen.md", "Uppsala"),
        ("黑豹队的防守丢了多少分？", "黑豹.md", "308分"),
        ("臺灣的首都是哪裡？", "臺北.md", "首都"),
        ("ทีมรับของแพนเธอร์สยอมแพ้ที่คะแนนเท่าไร", "thai.md", "308"),
        ("what does a steam engine use? rotor", "engine.md", "rotor"),
        ("pass\u200bword oxygen", "oxygen.md", "Oxygen"),
    ],
)
def test_questions_in_three_languages_find_their_passage_first(index, question, source, says):
    results = search(index, question, k=3)
    assert results, question
    top = results[0]
    assert top.source_name == source and says in top.text
    assert (
        top.citation.startswith(f"{top.title} — raw/") and f":{top.start_line}-{top.end_line}" in top.citation
    )


def test_result_json_has_the_contract_fields(index):
    result = search(index, "oxygen Uppsala", k=1)[0].to_json()
    assert set(result) == {"rank", "score", "chunk_id", "document_id", "title", "source_name", "source_url",
                           "start_line", "end_line", "text", "relevance", "tags"}  # fmt: skip
    assert result["rank"] == 1 and result["chunk_id"].startswith(result["document_id"] + "-chunk-")


@pytest.mark.parametrize(
    "query",
    ['"', "AND", "a OR b", "NEAR(", '"unbalanced', "*", "🙂", "x" * 10_000, "", "   ", "'; DROP TABLE chunks;--",
     "the of and", "col:foo -bar ^baz", "面" * 5000],
)  # fmt: skip
def test_any_string_is_a_valid_query(index, query):
    results = search(index, query, k=5)
    assert isinstance(results, list) and len(results) <= 5
    assert index.document_count() == len(DOCS)


def test_k_limits_results_and_ranks_are_consecutive(index):
    results = search(index, "308 points 黑豹 แพนเธอร์ส oxygen", k=2)
    assert [r.rank for r in results] == [1, 2]


def test_get_document_chunks_returns_at_most_three_of_that_document(index):
    engine = next(d for d in index.documents() if d.source_name == "engine.md")
    assert engine.chunk_count > 3
    chunks = get_document_chunks(index, engine.id, "rotor stator", k=10)
    assert len(chunks) in (1, 2, 3)
    assert all(c.document_id == engine.id for c in chunks)
    assert "rotor" in chunks[0].text
    opening = get_document_chunks(index, engine.id, "nothing matches zzz", k=2)
    assert [c.chunk_id for c in opening] == [f"{engine.id}-chunk-0001", f"{engine.id}-chunk-0002"]
    assert get_document_chunks(index, "doc-0000000000000000", "rotor") == []
