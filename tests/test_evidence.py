"""The evidence pack: which chunks the model reads, joined into passages, within the budget."""

from __future__ import annotations

import secrets
from dataclasses import replace

from knowledge.answer.evidence import join_overlapping, pack, priority
from knowledge.answer.prompt import build_prompt, evidence_block, evidence_fits
from knowledge.ingest.raw import chunk_id
from knowledge.model.template import load_template
from knowledge.retrieval.search import SearchResult, search
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings

HERONS = "# Herons\n\n" + "\n".join(
    f"Line {n}: the heron count at pond {n} was {n * 7} birds." for n in range(1, 13)
)
OWLS = "# Owls\n\n" + "\n".join(f"Row {n}: the owl count in wood {n} was {n * 3} owls." for n in range(1, 13))


def small_chunks(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_CHUNK_MAX_TOKENS="24", KB_CHUNK_OVERLAP_TOKENS="6")
    ingest_texts(settings, {"herons.md": HERONS + "\n", "owls.md": OWLS + "\n"})
    return settings


def raw_lines(settings, title: str) -> list[str]:
    path = next(p for p in settings.raw.iterdir() if title in p.read_text())
    return path.read_text().split("\n")


def always(_passages) -> bool:
    return True


def test_the_order_of_priority_is_best_second_then_the_best_ones_neighbours_then_the_rest():
    assert priority(5) == [(0, 0), (1, 0), (0, 1), (0, -1), (2, 0), (3, 0), (4, 0)]
    assert priority(1) == [(0, 0), (0, 1), (0, -1)]
    assert priority(3, neighbours=False) == [(0, 0), (1, 0), (2, 0)]
    assert priority(0) == []


def test_the_best_chunk_comes_with_its_neighbours_as_one_passage_its_overlap_sent_once(tmp_path):
    settings = small_chunks(tmp_path)
    with Index(settings.index_path) as index:
        results = search(index, "heron count pond 6 was 42 birds", k=5)
        top = results[0]
        assert "pond 6 " in top.text and not top.text.startswith("Line 1:")
        packed = pack(results, chunks_of=index.chunks_of, fits=always)
    first = packed[0]
    assert first.chunk_id == top.chunk_id and first.rank == 1  # cited as the best chunk
    assert first.start_line < top.start_line and first.end_line > top.end_line
    assert top.text in first.text
    lines = raw_lines(settings, "Herons")
    assert first.text == "\n".join(lines[first.start_line - 1 : first.end_line])  # overlap counted once
    # Nothing is sent twice: no other passage lies inside another.
    for a in packed:
        for b in packed:
            if a is not b and a.document_id == b.document_id:
                assert a.end_line < b.start_line or b.end_line < a.start_line


def test_without_room_for_more_only_the_best_chunk_is_sent(tmp_path):
    settings = small_chunks(tmp_path)
    with Index(settings.index_path) as index:
        results = search(index, "heron count pond 6 was 42 birds", k=5)
        packed = pack(
            results, chunks_of=index.chunks_of, fits=lambda ps: len(ps) == 1 and ps[0].text == results[0].text
        )
    assert packed == [results[0]]


def test_a_chunk_that_does_not_fit_is_skipped_and_a_smaller_one_after_it_still_goes_in(tmp_path):
    settings = small_chunks(tmp_path)
    with Index(settings.index_path) as index:
        results = search(index, "heron count pond 6 was 42 birds", k=5)
        big = replace(results[1], text=results[1].text * 20)
        ranked = [results[0], big, *results[2:]]
        packed = pack(ranked, chunks_of=index.chunks_of, fits=lambda ps: sum(len(p.text) for p in ps) <= 400)
    assert all(big.text not in p.text for p in packed)
    assert packed[0].chunk_id == results[0].chunk_id
    assert len(packed[0].text) > len(results[0].text)  # the neighbours still went in after the big one


def test_passages_from_two_documents_keep_the_rank_of_their_best_chunk(tmp_path):
    settings = small_chunks(tmp_path)
    with Index(settings.index_path) as index:
        herons = search(index, "heron count pond 6 was 42 birds", k=1)
        owls = search(index, "owl count wood 9 was 27 owls", k=1)
        ranked = [herons[0], replace(owls[0], rank=2)]
        packed = pack(ranked, chunks_of=index.chunks_of, fits=always)
    assert [p.document_id for p in packed] == [herons[0].document_id, owls[0].document_id]
    assert "pond 6 " in packed[0].text and "wood 9 " in packed[1].text
    assert packed[1].text == owls[0].text  # only the best chunk's neighbours are added


def test_a_neighbour_is_not_taken_from_a_document_rewritten_since_the_search(tmp_path):
    settings = small_chunks(tmp_path)
    with Index(settings.index_path) as index:
        results = search(index, "heron count pond 6 was 42 birds", k=1)
        stale = replace(results[0], chunk_id=chunk_id(results[0].document_id + "-gone", 3))
        packed = pack([stale], chunks_of=index.chunks_of, fits=always)
    assert packed == [stale]


def test_a_pack_counted_to_the_budget_is_sent_whole_whatever_tag_its_block_gets(tmp_path, qwen_counter):
    settings = small_chunks(tmp_path)
    template = load_template(None)
    with Index(settings.index_path) as index:
        results = search(index, "heron count pond 6 was 42 birds", k=8)
        full = evidence_block(pack(results, chunks_of=index.chunks_of, fits=always), "0" * 8)
        budget = qwen_counter.count_many([full])[0] - 5  # a little short of everything: a real choice
        packed = pack(results, chunks_of=index.chunks_of, fits=evidence_fits(qwen_counter, budget))
    assert packed
    for _ in range(50):
        tag = secrets.token_hex(4)
        prompt = build_prompt(
            "How many herons at pond 6?", packed, counter=qwen_counter, template=template,
            evidence_tokens=budget, context_tokens=8192, max_output_tokens=512, new_tag=lambda tag=tag: tag,
        )  # fmt: skip
        assert prompt.passages == packed, tag


def test_join_overlapping_sends_the_shared_text_once():
    assert join_overlapping("alpha beta gamma", "beta gamma delta") == "alpha beta gamma delta"
    assert join_overlapping("alpha", "delta") == "alpha\ndelta"


def test_results_that_touch_are_joined_even_without_neighbours(tmp_path):
    settings = small_chunks(tmp_path)
    with Index(settings.index_path) as index:
        [top] = search(index, "heron count pond 6 was 42 birds", k=1)
        seq = int(top.chunk_id.rsplit("-chunk-", 1)[1])
        [after] = index.chunks_of(top.document_id, [seq + 1])
        touching = SearchResult(
            rank=2, score=0.5, chunk_id=after.id, document_id=top.document_id, title=top.title,
            source_name=top.source_name, source_url=None, raw_path=top.raw_path,
            start_line=after.start_line, end_line=after.end_line, text=after.text,
        )  # fmt: skip
        packed = pack([top, touching], chunks_of=index.chunks_of, fits=always, neighbours=False)
    assert len(packed) == 1
    assert packed[0].start_line == top.start_line and packed[0].end_line == after.end_line
