"""Chunk vectors in the index file, the backfill, and hybrid search (lexical ∪ nearest by meaning)."""

from __future__ import annotations

import numpy as np
import pytest
import structlog

from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.backfill import coverage, embed_missing
from knowledge.retrieval.background import passages
from knowledge.retrieval.embed import LocalEmbedder, UrlEmbedder
from knowledge.retrieval.search import Meaning, search
from knowledge.retrieval.vectors import VectorCache, hamming, sign_codes, stored_background
from knowledge.store.index import Index
from knowledge.store.records import ChunkRecord, DocumentRecord
from knowledge.store.vectors import decode, encode
from tests.conftest import ingest_texts, make_settings
from tests.fake_llm import free_port

DOCS = {
    "lake.md": "# Lake Quillan\n\nLake Quillan is 317 metres deep and never freezes.\n",
    "tea.md": "# 烏龍茶\n\n烏龍茶是一種半發酵的茶，主要產於台灣和福建。\n",
    "rice.md": "# ข้าวหอมมะลิ\n\nข้าวหอมมะลิปลูกมากในภาคตะวันออกเฉียงเหนือของประเทศไทย\n",
}


SMALL_CHUNKS = {"KB_CHUNK_MAX_TOKENS": "24", "KB_CHUNK_OVERLAP_TOKENS": "6"}


def vector_rows(index: Index) -> list[tuple[int, str, bytes]]:
    return index.conn.execute("SELECT rowid, model, vec FROM chunk_vectors ORDER BY rowid").fetchall()


def test_encode_decode_round_trip_in_half_precision():
    v = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    v /= np.linalg.norm(v)
    back = decode([encode(v), encode(v)])
    assert back.shape == (2, 384) and len(encode(v)) == 768
    assert np.max(np.abs(back[0] - v)) < 1e-3


def test_backfill_fills_every_chunk_once_and_reports_coverage(settings, fake_embeddings):
    ingest_texts(settings, DOCS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words", batch_size=2)
    with Index(settings.index_path) as index:
        before = coverage(index, embedder.name)
        assert (before.vectors, before.chunks, before.is_complete) == (0, 3, False)
        assert embed_missing(index, embedder, batch=2) == 3
        assert embed_missing(index, embedder, batch=2) == 0  # nothing left: no second request
        after = coverage(index, embedder.name)
        assert (after.vectors, after.chunks, after.is_complete) == (3, 3, True)
    background = {text for _, text in passages()}
    # the size a server gives now
    probes = [r for r in fake_embeddings.requests if r["input"] == ["dimension"]]
    chunk_requests = [
        r for r in fake_embeddings.requests if r not in probes and not set(r["input"]) <= background
    ]
    assert len(chunk_requests) == 2 and len(probes) == 2  # the 3 chunks, 2 a batch; a probe each call
    # and the background passages once, before them, for the sufficiency decision
    assert sorted(
        t for r in fake_embeddings.requests if set(r["input"]) <= background for t in r["input"]
    ) == sorted(background)


def test_a_new_model_counts_as_missing_and_replaces_the_old_vectors(settings, fake_embeddings):
    ingest_texts(settings, DOCS)
    old = UrlEmbedder(fake_embeddings.base_url, "model-a")
    new = UrlEmbedder(fake_embeddings.base_url, "model-b")
    with Index(settings.index_path) as index:
        embed_missing(index, old)
        assert coverage(index, new.name).vectors == 0
        assert embed_missing(index, new) == 3
        assert {m for _, m, _ in vector_rows(index)} == {new.name}


def test_vectors_survive_a_reindex_and_an_unchanged_rewrite_but_not_a_deletion(settings, fake_embeddings):
    ingest_texts(settings, DOCS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        kept = {vec for _, _, vec in vector_rows(index)}
        ingestor = Ingestor(settings, index, ApproxCounter())
        ingestor.reindex()  # every row rebuilt: new rowids, same texts
        assert {vec for _, _, vec in vector_rows(index)} == kept
        assert coverage(index, embedder.name).is_complete
        raw = next(p for p in settings.raw.iterdir() if p.name.startswith("lake"))
        raw.write_text(raw.read_text() + "\nIt lies in the Varn valley.\n")
        ingestor.sync_raw(raw.name)  # changed text: that chunk needs a new vector
        assert coverage(index, embedder.name).vectors == 2
        raw.unlink()
        ingestor.sync_raw(raw.name)
        assert coverage(index, embedder.name).vectors == 2 and index.chunk_count() == 2
        embed_missing(index, embedder)
        assert coverage(index, embedder.name).is_complete and index.integrity_errors() == []


def test_a_vector_for_text_that_changed_meanwhile_is_not_stored(settings, fake_embeddings):
    ingest_texts(settings, {"lake.md": DOCS["lake.md"]})
    with Index(settings.index_path) as index:
        rowid, sha, _, _ = index.chunks_without_vectors("m", limit=1)[0]
        assert index.store_vectors("m", [(rowid, "0" * 64, "other", b"\0" * 8)]) == 0
        assert index.store_vectors("m", [(rowid + 1000, sha, "other", b"\0" * 8)]) == 0
        assert index.store_vectors("m", [(rowid, sha, "other", b"\0" * 8)]) == 1


def test_the_cache_reloads_when_the_index_changes(settings, fake_embeddings):
    ingest_texts(settings, DOCS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    cache = VectorCache(embedder.name)
    with Index(settings.index_path) as index:
        cache.refresh(index)
        assert cache.size == 0
        embed_missing(index, embedder)
        cache.refresh(index)
        assert cache.size == 3
        query = embedder.embed(["Lake Quillan deep"], "query")[0]
        best, _ = cache.nearest(query, 3)[0]
        assert index.chunks_by_rowid([best])[best][1].title == "Lake Quillan"


@pytest.mark.parametrize("dim", [8, 64, 70, 384])
def test_sign_codes_and_hamming_count_the_dimensions_on_opposite_sides_of_the_centre(dim):
    rng = np.random.default_rng(dim)
    rows = rng.standard_normal((50, dim)).astype(np.float32)
    centre = rng.standard_normal(dim).astype(np.float32) * 0.1
    query = rng.standard_normal(dim).astype(np.float32)
    expected = ((rows > centre) != (query > centre)).sum(axis=1)
    assert hamming(sign_codes(rows, centre, block=7), sign_codes(query[None, :], centre)[:, 0]).tolist() == (
        expected.tolist()
    )


def test_a_big_cache_ranks_through_sign_codes_as_the_exact_search_does(tmp_path):
    # Vectors like an embedder's: a large shared direction plus topics (clusters) plus noise.
    rng = np.random.default_rng(3)
    n, dim = 3000, 64
    topics = rng.standard_normal((30, dim))
    vectors = (
        2.0 * rng.standard_normal(dim) + topics[rng.integers(0, 30, n)] + 0.6 * rng.standard_normal((n, dim))
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    doc = DocumentRecord(
        "d", "raw/d.md", "D", "d.md", None, None, "s", "text", "r", n, "2026-12-01T00:00:00+00:00"
    )
    chunks = [ChunkRecord(f"d-{i}", "d", i, i, i, 1, f"chunk {i}", f"h{i}") for i in range(n)]
    with Index(tmp_path / "kb.sqlite3") as index:
        index.upsert_document(doc, chunks)
        rowids = [r for (r,) in index.conn.execute("SELECT rowid FROM chunks ORDER BY seq")]
        index.store_vectors(
            "m",
            [(r, f"h{i}", "other", encode(v)) for i, (r, v) in enumerate(zip(rowids, vectors, strict=True))],
        )
        exact, coded = VectorCache("m"), VectorCache("m", exact_max=1000, prefilter=300)
        exact.refresh(index)
        coded.refresh(index)
    found = 0
    for i in range(0, n, 50):
        query = vectors[i] + 0.05 * rng.standard_normal(dim)
        query = exact.query_vector((query / np.linalg.norm(query)).astype(np.float32), "a question")
        want, got = exact.nearest(query, 5), coded.nearest(query, 5)
        assert got[0][0] == want[0][0] and got[0][1] == pytest.approx(want[0][1])  # the best, exact cosine
        found += len({r for r, _ in want} & {r for r, _ in got})
    assert found >= 0.95 * 5 * len(range(0, n, 50))


def test_search_by_meaning_finds_a_thai_passage_for_an_english_question(settings, qwen_counter):
    ingest_texts(
        settings,
        {
            **DOCS,
            "flood.md": "# น้ำท่วม\n\nน้ำท่วมใหญ่ที่กรุงเทพมหานครเกิดขึ้นในปี พ.ศ. 2554\n",
            "rain.md": "# Monsoon\n\nThe monsoon brings heavy rain to Mumbai from June to September.\n",
        },
        qwen_counter,
    )
    embedder = LocalEmbedder()
    question = "Which rice smells fragrant in Thailand?"
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        lexical = search(index, question, k=3)
        assert all(r.title != "ข้าวหอมมะลิ" for r in lexical)  # no shared word: words alone cannot find it
        hybrid = search(index, question, k=3, meaning=Meaning.of(embedder))
    assert hybrid[0].title == "ข้าวหอมมะลิ" and hybrid[0].raw_path.startswith("raw/rice-")
    assert hybrid[0].relevance >= settings.min_relevance  # relevant enough: the documents answer it


def test_a_dead_embedder_leaves_lexical_results_and_one_warning(settings, fake_embeddings):
    ingest_texts(settings, DOCS)
    with Index(settings.index_path) as index:
        embed_missing(index, UrlEmbedder(fake_embeddings.base_url, "bag-of-words"))
        dead = Meaning.of(UrlEmbedder(f"http://127.0.0.1:{free_port()}/v1", "bag-of-words", timeout_s=1))
        with structlog.testing.capture_logs() as logs:
            first = search(index, "How deep is Lake Quillan?", k=3, meaning=dead)
            second = search(index, "How deep is Lake Quillan?", k=3, meaning=dead)
        lexical = search(index, "How deep is Lake Quillan?", k=3)
    assert [r.chunk_id for r in first] == [r.chunk_id for r in second] == [r.chunk_id for r in lexical]
    assert [e["event"] for e in logs].count("search.lexical_only") == 1


@pytest.mark.parametrize("interrupted", [True, False], ids=["background-stored", "nothing-embedded"])
def test_a_search_before_any_chunk_has_a_vector_finds_by_words_then_by_meaning(
    settings, fake_embeddings, interrupted
):
    ingest_texts(settings, DOCS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    question = "How deep is Lake Quillan?"
    with Index(settings.index_path) as index:
        if interrupted:  # the backfill stopped before its first batch: background passages, no chunk
            assert embed_missing(index, embedder, should_stop=lambda: True) == 0
            assert stored_background(index, embedder.name) is not None
        meaning = Meaning.of(embedder)
        before = search(index, question, k=3, meaning=meaning)
        lexical = search(index, question, k=3)
        embed_missing(index, embedder)
        after = search(index, question, k=3, meaning=meaning)
    assert before and [r.chunk_id for r in before] == [r.chunk_id for r in lexical]
    assert before[0].title == "Lake Quillan"
    assert meaning.cache.size == len(DOCS) and after[0].title == "Lake Quillan"  # by meaning once there


def test_hybrid_search_keeps_the_json_contract(tmp_path, fake_embeddings):
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, DOCS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        [first, *_] = search(index, "Lake Quillan", k=2, meaning=Meaning.of(embedder))
    assert list(first.to_json()) == [
        "rank", "score", "chunk_id", "document_id", "title", "source_name", "source_url",
        "start_line", "end_line", "text", "relevance", "tags",
    ]  # fmt: skip
    assert first.title == "Lake Quillan" and first.rank == 1


def test_language_groups_and_centring_remove_the_pull_of_a_shared_language():
    from knowledge.retrieval.centring import centred, language_shifts
    from knowledge.text import language_group

    assert language_group("ข้าวหอมมะลิปลูกมาก in Thailand") == "thai"
    assert language_group("烏龍茶 Oolong tea 是一種半發酵的茶") == "cjk"
    assert language_group("FTS5 has limits 限制") == "other" and language_group("1234 !!") == "other"
    rng = np.random.default_rng(7)
    topics = rng.standard_normal((4, 32))
    thai_bias, en_bias = 3 * rng.standard_normal(32), 3 * rng.standard_normal(32)
    # four topics, each written in both "languages": a strong language direction plus the topic
    rows = [topics[t] + bias for bias in (thai_bias, en_bias) for t in range(4) for _ in range(3)]
    groups = ["thai"] * 12 + ["other"] * 12
    matrix = np.array(rows) / np.linalg.norm(rows, axis=1, keepdims=True)
    query_raw = topics[2] + thai_bias  # a Thai question about topic 2
    names, shifts = language_shifts(matrix, groups)
    plain = matrix @ (query_raw / np.linalg.norm(query_raw))
    rows_centred, _ = centred(matrix, shifts[[names.index(g) for g in groups]])
    query_centred, _ = centred(query_raw[None, :] / np.linalg.norm(query_raw), shifts[[names.index("thai")]])
    fixed = rows_centred @ query_centred[0]
    english = slice(12, 24)
    assert plain[english].max() < plain[:12].min()  # raw: every Thai row beats the right English one
    assert int(np.argmax(fixed[english])) // 3 == 2 and fixed[english].max() > np.sort(fixed[:12])[-4]


def test_centring_rows_a_block_at_a_time_gives_what_centring_each_row_gives():
    from knowledge.retrieval.centring import centre_rows, centred

    rng = np.random.default_rng(2)
    raw = decode([encode(v) for v in rng.standard_normal((10_000, 24))])
    shifts = rng.standard_normal((3, 24)).astype(np.float32)
    shift_of = rng.integers(0, 3, len(raw)).astype(np.int16)
    raw[7] = shifts[shift_of[7]]  # a row equal to its language's mean: length 0, left at 0
    matrix, norms = centre_rows(raw, shifts, shift_of)
    one_by_one = [centred(raw[i : i + 1], shifts[shift_of[i : i + 1]]) for i in (0, 7, 4095, 4096, 9999)]
    assert all(
        np.array_equal(matrix[i], m[0]) and norms[i] == n[0]
        for i, (m, n) in zip((0, 7, 4095, 4096, 9999), one_by_one, strict=True)
    )
    assert norms[7] == 0 and not matrix[7].any()


def test_vectors_are_made_in_turns_newest_document_first(tmp_path):
    """One big file must not hold back a note added after it: each document's next 8 chunks a turn."""
    settings = make_settings(tmp_path / "kb", **SMALL_CHUNKS)
    big = "# Big\n\n" + "\n\n".join(
        f"Paragraph {n} of the big file says something about topic {n}." for n in range(60)
    )
    ingest_texts(settings, {"big.md": big})
    ingest_texts(settings, {"note.md": "# Note\n\nA note added later.\n"})
    with Index(settings.index_path) as index:
        titles = [title for _, _, title, _ in index.chunks_without_vectors("m", limit=16)]
        total = index.chunk_total()
    assert total > 16 and titles[0] == "Note"  # the newest document first, in the first turn
    assert titles[1:9] == ["Big"] * 8 and len(titles) == 16  # then the big one, 8 at a time


def test_a_server_that_changes_dimension_under_the_same_name_costs_search_by_meaning_not_a_crash(
    settings, fake_embeddings
):
    ingest_texts(settings, DOCS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        meaning = Meaning.of(embedder)
        before = search(index, "How deep is Lake Quillan?", k=3, meaning=meaning)
        fake_embeddings.dim = 48  # another model loaded under the same name
        with structlog.testing.capture_logs() as logs:
            during = search(index, "How deep is Lake Quillan?", k=3, meaning=meaning)
        assert [r.chunk_id for r in during] == [
            r.chunk_id for r in search(index, "How deep is Lake Quillan?", k=3)
        ]
        [warned] = [e for e in logs if e["event"] == "search.lexical_only"]
        assert "48 dimensions" in warned["reason"] and "64" in warned["reason"]
        assert (
            embed_missing(index, embedder) == index.chunk_total()
        )  # every vector of the old size made again
        sizes = {n for (n,) in index.conn.execute("SELECT DISTINCT length(vec) FROM chunk_vectors")}
        after = search(index, "How deep is Lake Quillan?", k=3, meaning=Meaning.of(embedder))
    assert sizes == {48 * 2} and before[0].title == after[0].title == "Lake Quillan"


def test_a_trickling_embeddings_server_is_given_up_at_the_deadline():
    import socket
    import threading

    from knowledge.retrieval.embed import EmbedderError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def trickle() -> None:  # headers at once, then the body a byte at a time
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        while not stop.wait(0.2):
            try:
                conn.sendall(b" ")
            except OSError:
                break
        conn.close()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    embedder = UrlEmbedder(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", "m", timeout_s=1.0)
    with pytest.raises(EmbedderError, match="took longer than 1 s"):  # the body would take 5 hours
        embedder.embed(["hello"], "query")
    stop.set()
    listener.close()


def test_a_nesting_bomb_from_the_server_is_an_embedder_error_and_search_uses_words(settings, fake_embeddings):
    from knowledge.retrieval.embed import EmbedderError, parse_embeddings

    bomb = b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(EmbedderError, match="not embeddings"):
        parse_embeddings(bomb, expected=1)
    ingest_texts(settings, DOCS)
    embedder = UrlEmbedder(fake_embeddings.base_url, "bag-of-words")
    with Index(settings.index_path) as index:
        embed_missing(index, embedder)
        fake_embeddings.body = bomb.decode()
        found = search(index, "How deep is Lake Quillan?", k=3, meaning=Meaning.of(embedder))
    assert found and found[0].title == "Lake Quillan"  # by its words


class FixedModel:
    """An embedder whose vectors never change under its name (as the bundled model's), counting texts."""

    has_fixed_dimension = True

    def __init__(self, name: str) -> None:
        self.name, self.texts = name, []

    def embed(self, texts, side):
        self.texts.extend(texts)
        rows = np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_fixed_models_background_is_embedded_once_per_process_and_stored_in_every_index(tmp_path):
    model, background = FixedModel(f"test:fixed-{tmp_path.name}"), {text for _, text in passages()}
    stored = []
    for name in ("one", "two"):
        settings = make_settings(tmp_path / name)
        ingest_texts(settings, DOCS)
        with Index(settings.index_path) as index:
            assert embed_missing(index, model) == 3
            stored.append(stored_background(index, model.name))
    assert sorted(t for t in model.texts if t in background) == sorted(background)  # once, not twice
    assert len([t for t in model.texts if t not in background]) == 6  # each index's own chunks
    assert np.array_equal(stored[0].raw, stored[1].raw) and len(stored[0].raw) == len(background)
