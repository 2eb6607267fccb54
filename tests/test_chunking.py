import random

import pytest

from knowledge.ingest.chunking import chunk_lines
from knowledge.model.tokenizer import ApproxCounter, HfCounter, count
from tests.conftest import xquad_articles

APPROX = ApproxCounter()


def xquad_lines(lang: str, articles: int = 2) -> list[str]:
    lines: list[str] = []
    for article in xquad_articles(lang)[:articles]:
        lines += [f"# {article['title']}", ""]
        for p in article["paragraphs"]:
            lines += [p, ""]
    return lines


def check(chunks, lines, counter, max_tokens, overlap_tokens, first_line=1):
    """The invariants a user relies on: budget, line numbers, text from those lines, bounded overlap."""
    assert chunks, "no chunks"
    assert [c.seq for c in chunks] == list(range(1, len(chunks) + 1))
    for c in chunks:
        assert 0 < c.token_count <= max_tokens
        assert c.token_count == count(counter, c.text)
        assert first_line <= c.start_line <= c.end_line < first_line + len(lines)
        span = "\n".join(lines[c.start_line - first_line : c.end_line - first_line + 1])
        for piece in c.text.split("\n"):
            assert piece.strip() in span, f"chunk text not from its lines: {piece[:60]!r}"
        assert c.text == c.text.strip() and "\n\n\n" not in c.text
    # Every non-blank line is covered, in order.
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    for n, line in enumerate(lines, first_line):
        if line.strip():
            assert n in covered
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        assert cur.start_line >= prev.start_line
        assert cur.end_line >= prev.end_line


@pytest.mark.parametrize("lang", ["en", "zh", "th"])
@pytest.mark.parametrize(("max_tokens", "overlap"), [(160, 24), (64, 8), (300, 0)])
def test_xquad_documents_with_the_approximate_counter(lang, max_tokens, overlap):
    lines = xquad_lines(lang)
    check(
        chunk_lines(lines, APPROX, max_tokens=max_tokens, overlap_tokens=overlap),
        lines,
        APPROX,
        max_tokens,
        overlap,
    )


@pytest.mark.parametrize("lang", ["en", "zh", "th"])
def test_xquad_documents_with_a_real_tokenizer(lang, tokenizer_json):
    counter = HfCounter(tokenizer_json)
    lines = xquad_lines(lang, articles=2)
    check(chunk_lines(lines, counter, max_tokens=160, overlap_tokens=24), lines, counter, 160, 24)


def test_short_lines_are_never_cut_and_chunks_end_on_line_boundaries():
    lines = [f"line {i} has a few words in it" for i in range(100)]
    chunks = chunk_lines(lines, APPROX, max_tokens=40, overlap_tokens=0)
    for c in chunks:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])


def test_overlap_repeats_whole_lines_from_the_end_of_the_previous_chunk():
    lines = [f"sentence number {i} here" for i in range(60)]
    chunks = chunk_lines(lines, APPROX, max_tokens=40, overlap_tokens=10)
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        repeated = [ln for ln in cur.text.split("\n") if ln in prev.text.split("\n")]
        assert repeated == prev.text.split("\n")[len(prev.text.split("\n")) - len(repeated) :]
        assert 0 < count(APPROX, "\n".join(repeated)) <= 10
        assert cur.start_line == prev.end_line - len(repeated) + 1


def test_a_long_line_is_cut_at_sentence_ends_and_keeps_its_line_number():
    sentences = [f"Sentence {i} talks about topic {i} in some detail." for i in range(60)]
    lines = ["# Title", "", " ".join(sentences), "", "after"]
    chunks = chunk_lines(lines, APPROX, max_tokens=50, overlap_tokens=0)
    middle = [c for c in chunks if c.start_line == c.end_line == 3]
    assert len(middle) > 3
    for c in middle:
        assert c.end_line == 3
        assert c.text.endswith(".") and c.text.startswith("Sentence")


def test_a_long_line_without_spaces_is_cut_by_token_slices():
    line = "字" * 1000
    chunks = chunk_lines([line], APPROX, max_tokens=100, overlap_tokens=10)
    assert all(c.token_count <= 100 for c in chunks)
    assert "".join(c.text for c in chunks).count("字") >= 1000  # covered (overlap repeats a little)


def test_overlap_inside_a_cut_line_is_a_tail_of_the_previous_piece():
    line = " ".join(f"word{i}" for i in range(400))
    chunks = chunk_lines([line], APPROX, max_tokens=50, overlap_tokens=8)
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        first = cur.text.split()[0]
        assert first in prev.text.split()[-8:]


def test_a_long_thai_line_carries_almost_all_the_overlap_into_the_next_chunk(qwen_counter):
    # Thai puts spaces between phrases, not words: a tail that jumped to the next space could lose
    # most of its 24 tokens. It may skip at most 24 // 8 = 3 tokens to start after a space, and the
    # chunk text drops the piece's trailing space (one token): at least 24 - 3 - 1 = 20 repeat.
    line = " ".join(p for article in xquad_articles("th") for p in article["paragraphs"])
    chunks = chunk_lines([line], qwen_counter, max_tokens=160, overlap_tokens=24)
    check(chunks, [line], qwen_counter, 160, 24)
    assert len(chunks) > 20
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        start = next(i for i in range(len(prev.text) + 1) if cur.text.startswith(prev.text[i:]))
        assert 20 <= count(qwen_counter, prev.text[start:]) <= 24, (prev.text[-80:], cur.text[:80])


def test_a_long_line_of_plain_words_fills_each_chunk_and_moves_on_by_all_but_the_overlap(qwen_counter):
    words = "stone cloud river table light music green house alpha paper".split()
    pick = random.Random(7)
    line = " ".join(pick.choice(words) for _ in range(6000))  # no sentence end anywhere
    chunks = chunk_lines([line], qwen_counter, max_tokens=160, overlap_tokens=48)
    check(chunks, [line], qwen_counter, 160, 48)
    assert all(c.token_count >= 150 for c in chunks[1:-1]), [c.token_count for c in chunks[:5]]
    assert len(chunks) <= count(qwen_counter, line) / (160 - 48) + 2


def test_blank_and_empty_inputs():
    assert chunk_lines([], APPROX, max_tokens=160, overlap_tokens=24) == []
    assert chunk_lines(["", "   ", ""], APPROX, max_tokens=160, overlap_tokens=24) == []
    chunks = chunk_lines(["a", "", "", "", "b"], APPROX, max_tokens=160, overlap_tokens=24)
    assert [c.text for c in chunks] == ["a\n\nb"]


def test_first_line_numbers_the_lines():
    chunks = chunk_lines(["x", "y"], APPROX, max_tokens=160, overlap_tokens=0, first_line=9)
    assert (chunks[0].start_line, chunks[0].end_line) == (9, 10)


def test_random_documents_keep_every_invariant():
    rng = random.Random(7)
    words = ["alpha", "beta", "面试", "ภาษาไทย", "308", "!", "gamma.", "delta?"]
    for _ in range(30):
        lines = [
            " ".join(rng.choice(words) for _ in range(rng.randint(0, 120))) for _ in range(rng.randint(1, 40))
        ]
        max_tokens = rng.choice([16, 32, 100])
        overlap = rng.choice([0, 4, 8])
        chunks = chunk_lines(lines, APPROX, max_tokens=max_tokens, overlap_tokens=overlap)
        if any(line.strip() for line in lines):
            check(chunks, lines, APPROX, max_tokens, overlap)


def test_huge_inputs_are_linear():
    # A 5 MB single line and a million empty lines: these would take minutes if quadratic.
    line = ("The quick brown fox jumps over the lazy dog. " * 120_000)[:5_000_000]
    chunks = chunk_lines([line], APPROX, max_tokens=160, overlap_tokens=24)
    assert len(chunks) > 5000 and all(c.token_count <= 160 for c in chunks)
    chunks = chunk_lines([""] * 1_000_000 + ["end"], APPROX, max_tokens=160, overlap_tokens=24)
    assert [(c.start_line, c.text) for c in chunks] == [(1_000_001, "end")]
