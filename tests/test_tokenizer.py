import shutil

import pytest
from tokenizers import Tokenizer

from knowledge.errors import TokenizerError
from knowledge.tokenizer import ApproxCounter, HfCounter, count, find_tokenizer_file, load_counter


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("", 0),
        ("hello world", 2),
        ("internationalization", 3),
        ("12345", 2),
        ("面试通过", 4),
        ("ภาษาไทย", 3),
        ("a, b!", 4),
        ("🙂🙂", 2),
    ],
)
def test_approximate_counter_rule(text, n):
    assert count(ApproxCounter(), text) == n


def test_approximate_spans_cover_the_tokens():
    text = "The 308 points 面试"
    spans = ApproxCounter().spans(text)
    assert [text[a:b] for a, b in spans] == ["The", "308", "points", "面", "试"]


def test_real_tokenizer_counts_like_the_library(tokenizer_json):
    counter = HfCounter(tokenizer_json)
    lib = Tokenizer.from_file(str(tokenizer_json))
    for text in ["The Panthers defense gave up 308 points.", "黑豹队的防守", "ทีมรับของแพนเธอร์ส", ""]:
        assert count(counter, text) == len(lib.encode(text, add_special_tokens=False).ids)
        assert len(counter.spans(text)) == count(counter, text)
    assert counter.name.startswith("tokenizers:") and "@" in counter.name


def test_find_tokenizer_as_file_folder_or_cached_model(tokenizer_json, tmp_path):
    assert find_tokenizer_file(str(tokenizer_json), cache_dir=tmp_path) == tokenizer_json
    assert find_tokenizer_file(str(tokenizer_json.parent), cache_dir=tmp_path) == tokenizer_json
    snap = tmp_path / "models--acme--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    shutil.copy(tokenizer_json, snap / "tokenizer.json")
    (tmp_path / "models--acme--tiny" / "refs").mkdir()
    (tmp_path / "models--acme--tiny" / "refs" / "main").write_text("abc123")
    assert find_tokenizer_file("acme/tiny", cache_dir=tmp_path) == snap / "tokenizer.json"
    assert find_tokenizer_file("acme/absent", cache_dir=tmp_path) is None
    assert find_tokenizer_file("", cache_dir=tmp_path) is None


def test_fallback_says_why(tmp_path):
    counter, why = load_counter("acme/not-downloaded", cache_dir=tmp_path)
    assert isinstance(counter, ApproxCounter)
    assert "acme/not-downloaded" in why


def test_a_broken_tokenizer_file_is_an_error_not_a_fallback(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerError, match="cannot load tokenizer"):
        load_counter(str(bad), cache_dir=tmp_path)
