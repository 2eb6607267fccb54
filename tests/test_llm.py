"""The model client against a scripted OpenAI-compatible server on 127.0.0.1."""

import asyncio

import aiohttp
import pytest

from knowledge.model.client import ModelBadResponse, ModelClient, ModelUnavailable, strip_thinking
from tests.fake_llm import FakeLLM, Step, answer, free_port, start

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def served():
    fake = FakeLLM()
    runner = await start(fake)
    async with aiohttp.ClientSession() as session:
        yield fake, session
    await runner.cleanup()


def client(fake, session, **kw) -> ModelClient:
    return ModelClient(session, fake.base_url, model_hint="mlx-community/X", **kw)


async def test_request_shape_and_thinking_removed(served):
    fake, session = served
    fake.script = [answer("<think>let me think</think>The answer is 42.")]
    done = await client(fake, session).chat(MESSAGES, max_tokens=32, stop=["\n\n"])
    assert done.text == "The answer is 42." and done.prompt_tokens == 10 and done.finish_reason == "stop"
    sent = fake.requests[0]
    assert sent["model"] == "default_model"  # mlx_lm.server's name for the model it was started with
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}
    assert sent["max_tokens"] == 32 and sent["temperature"] == 0.0 and sent["stop"] == ["\n\n"]


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("<think>a</think>b", "b"), ("<think>never closed", ""), ("x</think>y", "xy"), ("plain", "plain")],
)
def test_strip_thinking(raw, clean):
    assert strip_thinking(raw) == clean


async def test_a_slow_server_times_out_and_never_hangs(served):
    fake, session = served
    fake.script = [Step(answer="late", delay_s=1.5)]
    with pytest.raises(ModelUnavailable, match="did not answer within 0.5 s"):  # "late" never came back
        await client(fake, session, timeout_s=0.5).chat(MESSAGES, max_tokens=8)
    assert len(fake.requests) == 1  # a timeout is not retried


async def test_one_dropped_connection_is_retried(served):
    fake, session = served
    fake.script = [Step(drop=True), answer("second try")]
    assert (await client(fake, session).chat(MESSAGES, max_tokens=8)).text == "second try"
    assert len(fake.requests) == 2


async def test_two_dropped_connections_fail(served):
    fake, session = served
    fake.script = [Step(drop=True)]
    with pytest.raises(ModelUnavailable, match="not reachable"):
        await client(fake, session).chat(MESSAGES, max_tokens=8)
    assert len(fake.requests) == 2


async def test_a_dead_server_says_how_to_start_it():
    async with aiohttp.ClientSession() as session:
        port = free_port()
        c = ModelClient(session, f"http://127.0.0.1:{port}/v1", model_hint="mlx-community/Qwen3-4B")
        with pytest.raises(ModelUnavailable) as err:
            await c.chat(MESSAGES, max_tokens=8)
        assert f"not reachable at http://127.0.0.1:{port}/v1 (ClientConnectorError)" in str(err.value)
        assert f"mlx_lm.server --model mlx-community/Qwen3-4B --port {port}" in str(err.value)


async def test_concurrent_requests_are_limited(served):
    fake, session = served
    fake.script = [Step(answer="x", delay_s=0.2)]
    c = client(fake, session, max_concurrency=1)
    await asyncio.gather(*(c.chat(MESSAGES, max_tokens=8) for _ in range(4)))
    assert fake.max_in_flight == 1 and len(fake.requests) == 4
    fake.max_in_flight = 0
    c2 = client(fake, session, max_concurrency=3)
    await asyncio.gather(*(c2.chat(MESSAGES, max_tokens=8) for _ in range(6)))
    assert fake.max_in_flight == 3


async def test_health_and_models(served):
    fake, session = served
    c = client(fake, session)
    assert (await c.health())["status"] == "ok"
    assert await c.models() == ["fake-model"]


NESTED = "[" * 100_000  # deeper than Python's json will go: RecursionError, not JSONDecodeError


@pytest.mark.parametrize(
    ("step", "says"),
    [
        (Step(status=500), "answered 500: scripted failure"),
        (Step(body="{not json"), "invalid JSON"),
        (Step(body='{"choices": []}'), "not a chat completion"),
        (Step(body='{"error": "Cannot find an appropriate cached snapshot"}', status=404), "404"),
        (Step(body=b"\xff\xfe"), "not UTF-8"),
        (Step(body=b'{"choices": [{"message": {"content": "caf\xe9"}}]}'), "not UTF-8"),  # Latin-1
        (Step(body=NESTED), "nested too deeply"),
        (Step(body='{"a": ' * 100_000), "nested too deeply"),
        (Step(body='"a string"'), "not a chat completion"),
        (Step(body='{"choices": 5}'), "not a chat completion"),
        (Step(body='{"choices": [{"message": "hello"}]}'), "not a chat completion"),
        (Step(body=NESTED, status=500), "answered 500"),
        (Step(body=b"\xff\xfe", status=503), "answered 503"),
    ],
)
async def test_bad_and_unreadable_answers_are_a_bad_response_not_a_crash(served, step, says):
    fake, session = served
    fake.script = [step]
    with pytest.raises(ModelBadResponse, match=says):
        await client(fake, session).chat(MESSAGES, max_tokens=8)


async def test_usage_and_finish_reason_of_the_wrong_shape_are_unknown(served):
    fake, session = served
    fake.script = [
        Step(
            body='{"choices": [{"message": {"content": "Yes."}, "finish_reason": 7}],'
            ' "usage": {"prompt_tokens": "many", "completion_tokens": [1]}}'
        )
    ]
    done = await client(fake, session).chat(MESSAGES, max_tokens=8)
    assert done.text == "Yes." and done.finish_reason is None
    assert done.prompt_tokens is None and done.completion_tokens is None


@pytest.mark.parametrize(
    ("endpoint", "step", "says"),
    [
        ("health", Step(body=b"\xff\xfe"), "not UTF-8"),
        ("health", Step(body=NESTED), "nested too deeply"),
        ("health", Step(body="[1, 2]"), "not answer with a JSON object"),
        ("health", Step(body=NESTED, status=500), "answered 500"),
        ("health", Step(body=b"\xff\xfe", status=502), "answered 502"),
        ("models", Step(body=b"\xff\xfe"), "not UTF-8"),
        ("models", Step(body='{"data": ' * 100_000), "nested too deeply"),
        ("models", Step(body='{"data": 7}'), "unexpected /v1/models answer"),
        ("models", Step(body='{"data": ["x"]}'), "unexpected /v1/models answer"),
        ("models", Step(body='{"data": [{"id": 5}]}'), "unexpected /v1/models answer"),
        ("models", Step(body='{"data": {"id": "x"}}'), "unexpected /v1/models answer"),
    ],
)
async def test_health_and_models_that_are_unreadable_are_a_bad_response(served, endpoint, step, says):
    fake, session = served
    setattr(fake, f"{endpoint}_step", step)
    with pytest.raises(ModelBadResponse, match=says):
        await getattr(client(fake, session), endpoint)()


async def test_a_lone_surrogate_in_an_answer_is_replaced_once_for_every_reader(served):
    fake, session = served
    fake.script = [Step(body='{"choices": [{"message": {"content": "Oolong \\ud800 tea \\ud83c\\udf75"}}]}')]
    done = await client(fake, session).chat(MESSAGES, max_tokens=32)
    assert done.text == "Oolong \ufffd tea \U0001f375" and done.text.encode("utf-8")


async def test_an_answer_larger_than_its_tokens_could_say_is_refused_unread(served):
    fake, session = served
    fake.script = [Step(body='{"choices": [{"message": {"content": "' + "x" * 4_000_000 + '"}}]}')]
    with pytest.raises(ModelBadResponse, match="more than"):
        await client(fake, session).chat(MESSAGES, max_tokens=32)
