"""Streamed answers: the client against the scripted server (behaviour) and a real mlx_lm.server."""

import asyncio

import aiohttp
import pytest

from knowledge.model.client import ModelBadResponse, ModelClient, ModelUnavailable
from tests import test_llm
from tests.fake_llm import Step, free_port

MESSAGES = [{"role": "user", "content": "hi"}]
served = test_llm.served  # the fixture: the scripted server and a session


class Seen:
    """What a stream showed: each text so far, and the reading progress."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.reading: list[tuple[int, int]] = []

    async def text(self, so_far: str) -> None:
        self.texts.append(so_far)

    async def progress(self, done: int, total: int) -> None:
        self.reading.append((done, total))


async def stream(client: ModelClient, seen: Seen, **kw):
    return await client.stream(MESSAGES, max_tokens=64, on_text=seen.text, on_reading=seen.progress, **kw)


async def test_a_stream_shows_the_text_as_it_grows_and_keeps_the_usage(served):
    fake, session = served
    fake.script = [Step(answer="The lake is 317 metres deep [1].", prefill_s=0.6, tokens_per_s=50)]
    seen = Seen()
    done = await stream(ModelClient(session, fake.base_url), seen)
    assert done.text == "The lake is 317 metres deep [1]." and done.finish_reason == "stop"
    assert not done.cut_off and done.completion_tokens == len(seen.texts) and done.prompt_tokens == 10
    assert seen.texts[0] == "The" and seen.texts[-1] == done.text
    assert all(b.startswith(a) for a, b in zip(seen.texts, seen.texts[1:], strict=False))
    assert seen.reading and all(total == 1000 for _, total in seen.reading)  # the keep-alive comments
    assert done.first_token_ms is not None and done.first_token_ms >= 500
    sent = fake.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["model"] == "default_model"


async def test_thinking_is_never_shown(served):
    fake, session = served
    fake.script = [Step(answer="<think>let me see</think>Forty-two.")]
    seen = Seen()
    done = await stream(ModelClient(session, fake.base_url), seen)
    assert done.text == "Forty-two." and all("think" not in t and "let me" not in t for t in seen.texts)


async def test_a_stream_cut_off_keeps_what_was_said(served):
    fake, session = served
    fake.script = [Step(answer="one two three four five six", cut_after=3, tokens_per_s=100)]
    seen = Seen()
    done = await stream(ModelClient(session, fake.base_url), seen)
    assert done.cut_off and done.text == "one two three"


async def test_a_stream_cut_before_any_text_is_the_model_unavailable(served):
    fake, session = served
    fake.script = [Step(answer="never said", cut_after=0)]
    with pytest.raises(ModelUnavailable):
        await stream(ModelClient(session, fake.base_url), Seen())


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("data: {not json\n\n", ModelBadResponse),
        ("data: " + "[" * 100_000 + "\n\n", ModelBadResponse),  # nesting deeper than json allows
        (b"data: \xff\xfe broken utf-8\n\n", ModelBadResponse),
        ("data: [1, 2]\n\n", ModelBadResponse),
        ('data: {"choices": 5}\n\n', ModelBadResponse),  # a chunk of the wrong shape
        ('data: {"choices": [{"delta": {"content": "x"}}]}\n\ndata: {"choices": {"a": 1}}\n\n', None),
    ],
)
async def test_unreadable_events_are_a_bad_response_not_a_crash(served, body, error):
    fake, session = served
    fake.script = [Step(body=body)]
    if error is None:  # after some text: what was said stays, cut off
        done = await stream(ModelClient(session, fake.base_url), Seen())
        assert done.text == "x" and done.cut_off
        return
    with pytest.raises(error):
        await stream(ModelClient(session, fake.base_url), Seen())


@pytest.mark.parametrize("body", [b"\xff\xfe", "[" * 100_000, '{"error": ' * 100_000])
async def test_an_unreadable_error_answer_is_a_bad_response_not_a_crash(served, body):
    fake, session = served
    fake.script = [Step(body=body, status=500)]
    with pytest.raises(ModelBadResponse, match="answered 500"):
        await stream(ModelClient(session, fake.base_url), Seen())


async def test_a_silent_server_times_out_but_a_long_stream_that_flows_does_not(served):
    fake, session = served
    fake.script = [Step(answer="late", delay_s=2.0)]  # nothing at all for 2 s
    with pytest.raises(ModelUnavailable, match="sent nothing for 0.5 s"):  # "late" never came back
        await stream(ModelClient(session, fake.base_url, timeout_s=0.5), Seen())
    assert len(fake.requests) == 1  # given up, not asked again
    fake.script = [Step(answer="one two three four five six seven eight", prefill_s=0.8, tokens_per_s=6)]
    done = await stream(ModelClient(session, fake.base_url, timeout_s=0.5), Seen())  # 2 s in all, never idle
    assert done.text == "one two three four five six seven eight" and not done.cut_off


async def test_a_dead_server_fails_at_once_with_the_fix():
    async with aiohttp.ClientSession() as session:
        client = ModelClient(session, f"http://127.0.0.1:{free_port()}/v1", model_hint="mlx-community/Q")
        with pytest.raises(ModelUnavailable, match="start it with"):
            await stream(client, Seen())


async def test_the_real_server_streams_with_usage(mlx_server):
    async with aiohttp.ClientSession() as session:
        client = ModelClient(session, mlx_server.base_url, timeout_s=60)
        seen = Seen()
        done = await client.stream(
            [{"role": "user", "content": "黑豹队的防守丢了多少分？"}],
            max_tokens=12,
            on_text=seen.text,
            on_reading=seen.progress,
        )
        whole = await client.chat([{"role": "user", "content": "黑豹队的防守丢了多少分？"}], max_tokens=12)
    assert (
        done.completion_tokens and done.completion_tokens <= 12 and done.prompt_tokens == whole.prompt_tokens
    )
    assert done.finish_reason in ("stop", "length") and not done.cut_off
    if done.text:  # a random model may say nothing visible; when it does, it arrived in pieces
        assert seen.texts[-1] == done.text


async def test_keep_alive_comments_forever_end_at_the_streams_deadline(served):
    fake, session = served
    fake.script = [Step(answer="never said", prefill_s=3600)]  # reading the prompt, forever
    client = ModelClient(session, fake.base_url, timeout_s=0.5, stream_timeout_s=1.5)
    with pytest.raises(ModelUnavailable, match="KB_LLM_STREAM_TIMEOUT_S"):
        await asyncio.wait_for(stream(client, Seen()), 60)  # the bound is the client's; 60 s: a safety net
    fake.script = [Step(answer="word " * 2000, tokens_per_s=20)]  # flowing, but longer than the deadline
    done = await asyncio.wait_for(stream(client, Seen()), 60)
    assert done.cut_off and done.text.startswith("word word") and done.text.count("word") < 2000


async def test_a_stream_longer_than_its_tokens_can_say_is_cut_at_its_cap(served):
    fake, session = served
    piece = 'data: {"choices": [{"delta": {"content": "' + "x" * 1000 + '"}}]}\n\n'
    fake.script = [Step(body=piece * 2000)]  # 2 MB of text for an answer of 64 tokens
    done = await stream(ModelClient(session, fake.base_url), Seen())
    assert done.cut_off and 0 < len(done.text) <= 64 * 32
    fake.script = [Step(body=": keepalive 1/2\n\n" * 200_000)]  # megabytes of comments, no answer
    with pytest.raises(ModelBadResponse, match="without an answer"):
        await stream(ModelClient(session, fake.base_url), Seen())


async def test_a_lone_surrogate_from_the_model_is_replaced_and_a_split_pair_is_joined(served):
    fake, session = served
    events = [
        '{"choices": [{"delta": {"content": "Tea \\ud800 and "}}]}',
        '{"choices": [{"delta": {"content": "\\ud83c"}}]}',  # an emoji's pair, split across two events
        '{"choices": [{"delta": {"content": "\\udf75."}, "finish_reason": "stop"}]}',
    ]
    fake.script = [Step(body="".join(f"data: {e}\n\n" for e in events) + "data: [DONE]\n\n")]
    seen = Seen()
    done = await stream(ModelClient(session, fake.base_url), seen)
    assert done.text == "Tea \ufffd and \U0001f375." and not done.cut_off
    assert all(t.encode("utf-8") for t in seen.texts)  # every text shown as it grew can be written
