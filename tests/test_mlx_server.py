"""The test stand-in for the model server: a real ``mlx_lm.server`` serving a tiny random Qwen3.

These pin down what kb's client relies on: the endpoints answer, a chat request without a
``model`` field works and counts prompt tokens exactly as the chat template renders them
(English, Chinese, Thai), ``enable_thinking: false`` pre-fills an empty think block, and
naming another model gives a quick 404 that does not break the server.
"""

import http.client
import json
import time
from pathlib import Path

import pytest

from tests.tiny_model import MlxServer, build_tiny_model

SYSTEM = "You answer questions about the user's documents. Cite your sources."
QUESTIONS = {
    "en": "How many points did the Panthers defense give up?",
    "zh": "黑豹队的防守丢了多少分？",
    "th": "ทีมรับของแพนเธอร์สเสียไปกี่คะแนน",
}
NO_THINKING = {"enable_thinking": False}


def request(
    server: MlxServer, method: str, path: str, body: dict | None = None, timeout: float = 30
) -> tuple[int, bytes]:
    """One HTTP request (the server speaks HTTP/1.0: a connection per request)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {} if data is None else {"Content-Type": "application/json"}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def chat(server: MlxServer, body: dict, timeout: float = 30) -> tuple[int, dict]:
    status, raw = request(server, "POST", "/v1/chat/completions", body, timeout=timeout)
    return status, json.loads(raw)


def messages_for(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def template_token_count(model_dir: Path, messages: list[dict], **kwargs) -> int:
    """Ground truth: the prompt as transformers renders and tokenizes it."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kwargs)
    ids = out["input_ids"] if not isinstance(out, list) else out  # transformers 5: BatchEncoding
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    return len(ids)


def test_model_folder_is_deterministic_and_knows_the_chat_tokens(
    tiny_model_dir: Path, tokenizer_json: Path, tmp_path: Path
) -> None:
    from mlx_lm.utils import load

    again = build_tiny_model(tmp_path / "again", tokenizer_json)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (again / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name

    config = json.loads((tiny_model_dir / "config.json").read_text())
    _, tok = load(tiny_model_dir)
    vocab = tok.get_vocab()
    assert config["model_type"] == "qwen3"
    assert config["vocab_size"] == max(vocab.values()) + 1
    for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"):
        assert t in vocab, t
        assert tok.encode(t, add_special_tokens=False) == [vocab[t]], t
    assert tok.has_thinking
    assert vocab["<|im_end|>"] in tok.eos_token_ids
    assert config["eos_token_id"] == vocab["<|im_end|>"]


def test_health_and_models(mlx_server: MlxServer, tiny_model_dir: Path) -> None:
    status, body = request(mlx_server, "GET", "/health")
    assert status == 200
    assert json.loads(body) == {"status": "ok"}

    status, body = request(mlx_server, "GET", "/v1/models")
    assert status == 200
    assert body, "empty /v1/models body: the HF hub cache folder is missing"
    ids = [m["id"] for m in json.loads(body)["data"]]
    assert ids == [str(tiny_model_dir.resolve())]
    assert mlx_server.model == str(tiny_model_dir.resolve())


def test_listens_on_loopback_only(mlx_server: MlxServer) -> None:
    assert mlx_server.base_url == f"http://127.0.0.1:{mlx_server.port}/v1"
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, port = local.split(":")
            if state == "0A" and int(port, 16) == mlx_server.port:
                listening.append(addr)
    assert listening == ["0100007F"]  # 127.0.0.1, and no 0.0.0.0 / :: listener


@pytest.mark.parametrize("lang", sorted(QUESTIONS))
def test_chat_without_model_field(mlx_server: MlxServer, tiny_model_dir: Path, lang: str) -> None:
    messages = messages_for(QUESTIONS[lang])
    status, data = chat(
        mlx_server,
        {
            "messages": messages,
            "max_tokens": 8,
            "temperature": 0,
            "chat_template_kwargs": NO_THINKING,
        },
    )
    assert status == 200, data
    assert data["object"] == "chat.completion"
    assert data["model"] == "default_model"
    choice = data["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert "content" in choice["message"]  # may be null when the random model says nothing
    assert choice["finish_reason"] in ("stop", "length")
    usage = data["usage"]
    expected = template_token_count(tiny_model_dir, messages, **NO_THINKING)
    assert usage["prompt_tokens"] == expected
    assert 0 <= usage["completion_tokens"] <= 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_enable_thinking_false_prefills_an_empty_think_block(
    mlx_server: MlxServer, tiny_model_dir: Path
) -> None:
    messages = messages_for(QUESTIONS["en"])
    body = {"messages": messages, "max_tokens": 1, "temperature": 0}
    _, default = chat(mlx_server, body)
    _, off = chat(mlx_server, {**body, "chat_template_kwargs": NO_THINKING})
    # The server turns thinking on by default (the vocabulary has <think>/</think>), which
    # renders no think block; enable_thinking=false appends "<think>\n\n</think>\n\n".
    assert default["usage"]["prompt_tokens"] == template_token_count(tiny_model_dir, messages)
    assert off["usage"]["prompt_tokens"] == template_token_count(tiny_model_dir, messages, **NO_THINKING)
    assert off["usage"]["prompt_tokens"] > default["usage"]["prompt_tokens"]


def test_model_field_is_a_trap(mlx_server: MlxServer) -> None:
    messages = messages_for(QUESTIONS["en"])
    body = {"messages": messages, "max_tokens": 4, "temperature": 0, "chat_template_kwargs": NO_THINKING}

    # The exact --model string is the served model: fine.
    status, data = chat(mlx_server, {**body, "model": mlx_server.model})
    assert status == 200, data

    # Any other name makes the server try to load it (offline: fails) and answer 404.
    status, data = chat(mlx_server, {**body, "model": "some/other-model"}, timeout=15)  # no download tried
    assert status == 404
    assert isinstance(data.get("error"), str) and data["error"]

    # ... and it keeps serving afterwards.
    status, data = chat(mlx_server, body)
    assert status == 200, data
    status, raw = request(mlx_server, "GET", "/health")
    assert (status, json.loads(raw)) == (200, {"status": "ok"})


def test_timing_budget(
    mlx_server: MlxServer, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gen = json.loads((tiny_model_dir / "generation_config.json").read_text())
    no_stop = {str(i): -100 for i in gen["eos_token_id"]}  # always generate all 8 tokens
    body = {
        "messages": messages_for(QUESTIONS["en"]),
        "max_tokens": 8,
        "temperature": 0,
        "chat_template_kwargs": NO_THINKING,
    }
    chat(mlx_server, body)  # make sure the default model is loaded
    latencies = []
    for _ in range(3):
        started = time.monotonic()
        status, data = chat(mlx_server, {**body, "logit_bias": no_stop})
        latencies.append(time.monotonic() - started)
        assert status == 200, data
        assert data["usage"]["completion_tokens"] == 8
    with capsys.disabled():
        print(
            f"\n[mlx_lm.server] start-up {mlx_server.startup_s:.2f}s (incl. warm-up); "
            f"8-token chat completion {min(latencies) * 1000:.0f}-{max(latencies) * 1000:.0f} ms"
        )
    assert max(latencies) < 10
