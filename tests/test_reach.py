"""Any OpenAI-compatible model server: reachable when it lists its models at /v1/models; a /health it
has must say ok, and one it lacks (Ollama) is no failure. kb doctor and kb status say so."""

from __future__ import annotations

import aiohttp
import pytest

from knowledge.model.client import ModelClient, ModelUnavailable
from knowledge.model.reach import Reach
from knowledge.report.status import probe_model, summary_facts
from tests.conftest import make_settings
from tests.fake_llm import FakeLLM, ThreadedFakeLLM, ThreadedServer, free_port, start
from tests.model_servers import MODELS, OtherServer, start_other


@pytest.mark.parametrize(
    ("kind", "models", "health"),
    [
        ("ollama", ("qwen3:4b",), 404),
        ("llama.cpp", ("model.gguf",), 200),
        ("vllm", ("Qwen/Qwen3-4B-Instruct-2507",), 200),
    ],
)
async def test_a_server_that_lists_its_models_is_reachable_with_or_without_health(
    kind, models, health, tmp_path
):
    server = OtherServer(kind)
    runner = await start_other(server)
    try:
        async with aiohttp.ClientSession() as session:
            client = ModelClient(session, server.base_url, model_hint="M")
            reach = await client.check()
            state = await probe_model(client)
    finally:
        await runner.cleanup()
    assert (reach.models, reach.health, reach.models_error) == (models, health, "")
    assert reach.level == "ok" and reach.problem == ""
    assert sorted(server.seen) == ["/health", "/health", "/v1/models", "/v1/models"]  # asked at once, twice
    assert state["reachable"] is True and state["models"] == list(models) and "error" not in state
    report = {
        "model_server": state, "index_error": "-", "vectors": {}, "token_counter": {"exact": True, "name": "t"},
        "tokenizer": None, "web_search": {"on": False, "providers": []}, "inbox": 0, "inbox_path": "i", "home": "h",
    }  # fmt: skip
    assert (
        dict(summary_facts(report))["model server"] == f"reachable at {server.base_url}; serving {models[0]}"
    )


async def test_mlx_lm_server_is_judged_as_before():
    fake = FakeLLM()
    runner = await start(fake)
    try:
        async with aiohttp.ClientSession() as session:
            reach = await ModelClient(session, fake.base_url).check()
    finally:
        await runner.cleanup()
    assert reach == Reach(("fake-model",), 200) and reach.level == "ok"


async def test_a_server_that_answers_neither_is_not_the_model_server_and_says_why():
    other, loading = OtherServer("other"), OtherServer("llama.cpp", loading=True)
    runners = [await start_other(other), await start_other(loading)]
    try:
        async with aiohttp.ClientSession() as session:
            neither = await ModelClient(session, other.base_url).check()
            state = await probe_model(ModelClient(session, other.base_url))
            busy = await ModelClient(session, loading.base_url).check()
            with pytest.raises(ModelUnavailable, match="not reachable"):
                await ModelClient(session, f"http://127.0.0.1:{free_port()}/v1").check()
    finally:
        for runner in runners:
            await runner.cleanup()
    assert neither.level == "fail" and neither.models is None and neither.health == 404
    assert "neither /v1/models nor /health" in neither.problem and "answered 404" in neither.problem
    assert "is KB_LLM_URL the server's /v1 address?" in neither.problem
    assert state["reachable"] is True and "404" in state["error"] and "models" not in state
    assert busy.level == "fail" and busy.problem == (
        "/v1/models lists its models, but /health answered 503: "
        "{'code': 503, 'message': 'Loading model', 'type': 'unavailable_error'}"
    )


def test_a_server_with_health_but_no_model_list_is_a_warning():
    reach = Reach(None, 200, models_error="answered 404: Not Found")
    assert reach.level == "warn"
    assert reach.problem == "/health answers, but /v1/models gave no list of models: answered 404: Not Found"


async def test_every_request_names_kb_llm_model_which_ollama_and_vllm_need(tmp_path):
    from knowledge.model.client import ModelBadResponse
    from knowledge.wiring import model_client
    from tests.model_servers import ANSWER

    servers = [OtherServer(kind) for kind in ("ollama", "vllm", "llama.cpp")]
    runners = [await start_other(server) for server in servers]
    try:
        async with aiohttp.ClientSession() as session:
            for server in servers:
                named = model_client(
                    make_settings(tmp_path, KB_LLM_URL=server.base_url, KB_LLM_MODEL=MODELS[server.kind]),
                    session,
                )
                assert (await named.chat(MESSAGES, max_tokens=16)).text == ANSWER
                streamed = await named.stream(MESSAGES, max_tokens=16, on_text=_ignore)
                assert streamed.text == ANSWER
                unnamed = model_client(make_settings(tmp_path, KB_LLM_URL=server.base_url), session)
                if server.kind == "llama.cpp":  # any name will do
                    assert (await unnamed.chat(MESSAGES, max_tokens=16)).text == ANSWER
                    continue
                with pytest.raises(ModelBadResponse) as refused:
                    await unnamed.stream(MESSAGES, max_tokens=16, on_text=_ignore)
                assert "answered 404" in str(refused.value) and "'default_model'" in str(refused.value)
                assert "set KB_LLM_MODEL to one the server lists" in str(refused.value)
    finally:
        for runner in runners:
            await runner.cleanup()
    for server in servers:
        assert [chat["model"] for chat in server.chats][:2] == [MODELS[server.kind]] * 2
        assert all("model" in chat for chat in server.chats)


MESSAGES = [{"role": "user", "content": "When is the kettle descaled?"}]


async def _ignore(text: str) -> None:
    return None


def test_kb_doctor_passes_ollama_and_fails_a_server_that_is_something_else(tmp_path, run_kb):
    with ThreadedServer(OtherServer("ollama"), start_other) as ollama:
        ok = run_kb(
            "--home", str(tmp_path), "doctor", env={"KB_LLM_URL": ollama.base_url, "KB_LLM_MODEL": "qwen3:4b"}
        )
        unnamed = run_kb("--home", str(tmp_path), "doctor", env={"KB_LLM_URL": ollama.base_url})
        other = run_kb(
            "--home", str(tmp_path), "doctor", env={"KB_LLM_URL": ollama.base_url, "KB_LLM_MODEL": "llama3"}
        )
    assert f"ok    model server   {ollama.base_url} answers; serving qwen3:4b" in ok.stdout
    assert f"model server   {ollama.base_url} answers, but the server has no default_model" in unnamed.stdout
    assert "fix: set KB_LLM_MODEL to the name of the model to use, one of: qwen3:4b" in unnamed.stdout
    assert "KB_LLM_MODEL=llama3 is not among the models the server lists (qwen3:4b)" in other.stdout
    with ThreadedServer(OtherServer("vllm"), start_other) as vllm:
        ok = run_kb("--home", str(tmp_path), "doctor", env={"KB_LLM_URL": vllm.base_url})
    assert f"ok    model server   {vllm.base_url} answers; serving Qwen/Qwen3-4B-Instruct-2507" in ok.stdout
    with ThreadedServer(OtherServer("other"), start_other) as other:
        bad = run_kb("--home", str(tmp_path), "doctor", env={"KB_LLM_URL": other.base_url})
    assert bad.returncode == 1
    assert f"FAIL  model server   {other.base_url} answers, but neither /v1/models nor /health" in bad.stdout
    assert "fix: set KB_LLM_URL to the server's OpenAI-compatible address, ending in /v1" in bad.stdout
    assert "Ollama http://127.0.0.1:11434/v1" in bad.stdout
    with ThreadedServer(OtherServer("llama.cpp", loading=True), start_other) as loading:
        busy = run_kb("--home", str(tmp_path), "doctor", env={"KB_LLM_URL": loading.base_url})
    assert "FAIL  model server" in busy.stdout and "/health answered 503" in busy.stdout
    assert "fix: wait until it has loaded its model, or restart it" in busy.stdout
    with ThreadedFakeLLM(FakeLLM()) as mlx:  # mlx_lm.server: /health and /v1/models, as before
        kept = run_kb("--home", str(tmp_path), "doctor", env={"KB_LLM_URL": mlx.base_url})
    assert f"ok    model server   {mlx.base_url} answers; serving fake-model" in kept.stdout


def test_kb_status_names_the_servers_models(tmp_path, run_kb):
    import json

    settings = make_settings(tmp_path / "kb")
    with ThreadedServer(OtherServer("ollama"), start_other) as ollama:
        env = {"KB_LLM_URL": ollama.base_url, "KB_EMBED": "off"}
        text = run_kb("--home", str(settings.home), "status", env=env)
        shown = run_kb("--home", str(settings.home), "status", "--json", env=env)
    assert f"model server    reachable at {ollama.base_url}; serving qwen3:4b" in text.stdout
    model = json.loads(shown.stdout)["model_server"]
    assert model["reachable"] is True and model["models"] == ["qwen3:4b"] and "error" not in model
