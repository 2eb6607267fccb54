import hashlib
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


def test_a_model_id_not_in_the_cache_fetches_only_the_tokenizer_files_once(tmp_path, tokenizer_json):
    """A hub stand-in on 127.0.0.1 (HF_ENDPOINT): kb ingest fetches tokenizer.json and its config, then reuses them."""
    import hashlib
    import subprocess
    import sys

    from aiohttp import web

    from tests.conftest import subprocess_env
    from tests.fake_llm import ThreadedServer
    from tests.local_server import serve_app

    files = {
        "tokenizer.json": tokenizer_json.read_bytes(),
        "tokenizer_config.json": b'{"eos_token": "<|im_end|>"}',
    }
    seen: list[str] = []

    async def resolve(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        body = files.get(request.match_info["file"])
        if body is None:
            return web.Response(status=404, headers={"X-Error-Code": "EntryNotFound"})
        headers = {
            "ETag": '"' + hashlib.sha256(body).hexdigest() + '"',
            "X-Repo-Commit": "a" * 40,
            "Content-Length": str(len(body)),
        }
        return web.Response(body=b"" if request.method == "HEAD" else body, headers=headers)

    async def start(_: object) -> web.AppRunner:
        app = web.Application()
        app.router.add_route("*", "/kbtest/tiny-model/resolve/{rev}/{file}", resolve)
        runner, port = await serve_app(app)
        hub.port = port
        return runner

    hub = type("Hub", (), {})()
    home = tmp_path / "kb"
    (tmp_path / "note.md").write_text("# Note\n\nThe heron count was 21.\n")
    with ThreadedServer(hub, start):
        env = subprocess_env(KB_MODEL="kbtest/tiny-model", HF_ENDPOINT=f"http://127.0.0.1:{hub.port}",
                             HF_HUB_CACHE=str(tmp_path / "hub"))  # fmt: skip
        env.pop("HF_HUB_OFFLINE")
        for name in ("note.md", "note.md"):
            out = subprocess.run(
                [sys.executable, "-m", "knowledge.cli", "--home", str(home), "ingest", str(tmp_path / name)],
                capture_output=True, text=True, env=env, timeout=120,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
    fetched = [s for s in seen if s.startswith("GET")]
    assert sorted(fetched) == [
        "GET /kbtest/tiny-model/resolve/main/tokenizer.json",
        "GET /kbtest/tiny-model/resolve/main/tokenizer_config.json",
    ]  # each once, nothing else of the model
    assert (tmp_path / "hub" / "models--kbtest--tiny-model").is_dir()
    log = (home / "runs" / "logs" / "kb.jsonl").read_text()
    assert '"tokenizer.fetched"' in log and '"tokenizer.fallback"' not in log


def test_the_reference_qwen3_tokenizer_is_the_real_one(qwen_counter):
    from knowledge.tokenizer import QWEN3_TOKENIZER_SHA256, reference_tokenizer

    path = reference_tokenizer()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == QWEN3_TOKENIZER_SHA256
    assert (path.parent / "tokenizer_config.json").is_file()
    # Qwen spends about 1.7 Thai characters per token; the approximation assumes three.
    thai = "ข้าวหอมมะลิปลูกมากในภาคตะวันออกเฉียงเหนือของประเทศไทย"
    assert 1.3 < len(thai) / qwen_counter.count_many([thai])[0] < 2.5
    assert qwen_counter.count_many(["Hello world"]) == [2]
