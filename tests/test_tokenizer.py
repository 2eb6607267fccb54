import hashlib
import json
import shutil

import pytest
from tokenizers import Tokenizer

from knowledge.errors import TokenizerError
from knowledge.model.tokenizer import ApproxCounter, HfCounter, count, find_tokenizer_file, load_counter
from tests.fake_hub import Hub


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


def kb_cli(home, *args, env):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(home), *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def hub_env(tmp_path, hub, **extra):
    from tests.conftest import subprocess_env

    env = subprocess_env(KB_MODEL="kbtest/tiny-model", HF_ENDPOINT=f"http://127.0.0.1:{hub.port}",
                         HF_HUB_CACHE=str(tmp_path / "hub"), **extra)  # fmt: skip
    env.pop("HF_HUB_OFFLINE")
    return env


def test_a_model_id_not_in_the_cache_fetches_only_the_tokenizer_files_once(tmp_path, tokenizer_json):
    """kb ingest (a batch command) fetches tokenizer.json and its config now, into kb's own folder, then reuses them."""
    from tests.fake_llm import ThreadedServer

    hub = Hub(
        {
            "tokenizer.json": tokenizer_json.read_bytes(),
            "tokenizer_config.json": b'{"eos_token": "<|im_end|>"}',
        }
    )
    home = tmp_path / "kb"
    (tmp_path / "note.md").write_text("# Note\n\nThe heron count was 21.\n")
    with ThreadedServer(hub, hub.start):
        for _ in range(2):
            out = kb_cli(home, "ingest", str(tmp_path / "note.md"), env=hub_env(tmp_path, hub))
            assert out.returncode == 0, out.stderr
    assert sorted(hub.seen) == [
        "GET /kbtest/tiny-model/resolve/main/tokenizer.json",
        "GET /kbtest/tiny-model/resolve/main/tokenizer_config.json",
    ]  # each once, nothing else of the model
    own = home / "runs" / "tokenizers" / "kbtest--tiny-model"
    assert (own / "tokenizer.json").read_bytes() == tokenizer_json.read_bytes()
    assert not (tmp_path / "x").exists() and not (tmp_path / "hub").exists()  # the ETag chose no path
    log = (home / "runs" / "logs" / "kb.jsonl").read_text()
    assert '"tokenizer.fetched"' in log and '"tokenizer.fallback"' not in log


def test_an_unreachable_hub_costs_one_short_attempt_remembered_for_a_day(tmp_path):
    from tests.fake_llm import ThreadedServer

    hub = Hub({}, status=503)
    home = tmp_path / "kb"
    (tmp_path / "note.md").write_text("# Note\n\nThe heron count was 21.\n")
    with ThreadedServer(hub, hub.start):
        first = kb_cli(home, "ingest", str(tmp_path / "note.md"), env=hub_env(tmp_path, hub))
        again = kb_cli(home, "status", env=hub_env(tmp_path, hub))
        ingest = kb_cli(home, "reindex", env=hub_env(tmp_path, hub))
    assert first.returncode == again.returncode == ingest.returncode == 0, (first.stderr, ingest.stderr)
    assert hub.seen == ["GET /kbtest/tiny-model/resolve/main/tokenizer.json"]  # one attempt, then remembered
    remembered = json.loads((home / "runs" / "tokenizers" / "kbtest--tiny-model.failed.json").read_text())
    assert "503" in remembered["reason"]
    assert "approx-v1" in again.stdout  # the approximation stands in, and says so


def test_a_bad_or_huge_tokenizer_from_the_hub_is_not_kept(tmp_path, tokenizer_json):
    from knowledge.errors import TokenizerError
    from knowledge.model.tokenizer import fetch_from_hub
    from tests.fake_llm import ThreadedServer

    for body, says in ((b"{not json", "cannot load tokenizer"), (tokenizer_json.read_bytes(), "larger than")):
        hub = Hub({"tokenizer.json": body})
        own = tmp_path / f"own-{len(body)}"
        with ThreadedServer(hub, hub.start):
            import os

            os.environ["HF_ENDPOINT"], before = f"http://127.0.0.1:{hub.port}", os.environ.get("HF_ENDPOINT")
            offline = os.environ.pop("HF_HUB_OFFLINE", None)
            try:
                with pytest.raises(TokenizerError, match=says):
                    fetch_from_hub("kbtest/tiny-model", own, max_bytes=len(tokenizer_json.read_bytes()) - 1)
            finally:
                os.environ.pop("HF_ENDPOINT")
                if before is not None:
                    os.environ["HF_ENDPOINT"] = before
                if offline is not None:
                    os.environ["HF_HUB_OFFLINE"] = offline
        assert not (own / "kbtest--tiny-model" / "tokenizer.json").exists()  # kb starts normally afterwards
        assert list(own.glob("kbtest--tiny-model/*.part")) == []
        counter, why = load_counter("kbtest/tiny-model", cache_dir=tmp_path, own_dir=own)
        assert isinstance(counter, ApproxCounter) and why


def test_a_qwen3_model_counts_exactly_with_the_bundled_tokenizer_and_no_network(tmp_path):
    from knowledge.model.tokenizer import QWEN3_TOKENIZER_SHA256, is_qwen3

    for model in (
        "mlx-community/Qwen3-4B-Instruct-2507-4bit",
        "Qwen/Qwen3-8B",
        "lmstudio-community/Qwen3-30B-A3B-MLX-4bit",
    ):
        assert is_qwen3(model), model
        counter, why = load_counter(model, cache_dir=tmp_path / "empty", own_dir=tmp_path / "own")
        assert why is None and isinstance(counter, HfCounter)
        assert hashlib.sha256(counter.path.read_bytes()).hexdigest() == QWEN3_TOKENIZER_SHA256
    assert not any(
        is_qwen3(m) for m in ("Qwen/Qwen2.5-7B-Instruct", "acme/qwen30-x", "Qwen3-8B", "/models/Qwen3-8B")
    )


def test_kb_starts_in_seconds_with_no_route_to_the_hub(tmp_path):
    """The default model, nothing cached, HF_ENDPOINT a closed port and HF_HUB_OFFLINE unset."""
    from tests.conftest import subprocess_env
    from tests.fake_llm import free_port

    env = subprocess_env(KB_MODEL="mlx-community/Qwen3-4B-Instruct-2507-4bit", HF_ENDPOINT=f"http://127.0.0.1:{free_port()}",
                         HF_HOME=str(tmp_path / "hf"), KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1")  # fmt: skip
    env.pop("HF_HUB_OFFLINE")
    out = kb_cli(tmp_path / "kb", "ask", "--json", "hello", env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["mode"] == "no-evidence", out.stderr
    assert out.stderr == ""  # no retries, no raw library lines (seconds measured in bench/)
    status = json.loads(kb_cli(tmp_path / "kb", "status", "--json", env=env).stdout)
    assert status["token_counter"]["exact"] is True and "tokenizer_files" in status["token_counter"]["name"]


def test_the_reference_qwen3_tokenizer_is_the_real_one(qwen_counter):
    from knowledge.model.tokenizer import QWEN3_TOKENIZER_SHA256, reference_tokenizer

    path = reference_tokenizer()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == QWEN3_TOKENIZER_SHA256
    assert (path.parent / "tokenizer_config.json").is_file()
    # Qwen spends about 1.7 Thai characters per token; the approximation assumes three.
    thai = "ข้าวหอมมะลิปลูกมากในภาคตะวันออกเฉียงเหนือของประเทศไทย"
    assert 1.3 < len(thai) / qwen_counter.count_many([thai])[0] < 2.5
    assert qwen_counter.count_many(["Hello world"]) == [2]
