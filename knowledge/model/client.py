"""Client for the OpenAI-compatible model server (``mlx_lm.server``, llama.cpp, Ollama, vLLM).

* Chat completions with ``max_tokens``, ``temperature`` and ``stop``; thinking is off by
  default (``chat_template_kwargs: {"enable_thinking": false}``) and any ``<think>…</think>``
  that still reaches the text is removed.
* Every request names its model (KB_LLM_MODEL): Ollama and vLLM choose the model by it. The default,
  ``default_model``, is ``mlx_lm.server``'s own name for the model it was started with (any other name
  makes it load that model, downloading it first); llama-server takes any name.
* Timeouts on connect and on the whole request; one retry when the connection drops; a
  per-client limit on concurrent requests (default 1: the server's batching has had
  cross-request and deadlock bugs under concurrent load).
* Every failure is a ``ModelError`` whose message says what to do; a reply that cannot be read
  (not UTF-8, JSON nested deeper than Python parses, JSON of the wrong shape, a garbage event) is a
  ``ModelBadResponse``, never a foreign exception, so an answer degrades to the passages.
* Answers can stream (``stream``): server-sent events read as they come, the keep-alive comments
  ``mlx_lm.server`` sends while it reads the prompt reported as progress, the usage chunk asked
  for so the exact token counts are still known; a stream cut off keeps what was said. A stream has
  one deadline (``stream_timeout_s`` for the whole answer, keep-alive comments or not) and a size cap (the
  text ``max_tokens`` can say, the bytes such an answer takes): past either it ends, cut off.
* The model's text is made safe once, here, for every consumer (the terminal, the zh-Hant
  conversion, the index, Telegram): a surrogate pair split across events is joined, a lone
  surrogate (JSON may carry ``\\ud800``) becomes U+FFFD.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from knowledge.config import DEFAULT_LLM_MODEL
from knowledge.errors import ModelError
from knowledge.model.reach import Reach
from knowledge.model.untrusted import safe_messages
from knowledge.text import has_surrogates, one_line

if TYPE_CHECKING:  # aiohttp is imported where a request is made: a command that asks no model never loads it
    import aiohttp

_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL)
TOKEN_CHARS = 32  # the most text one token says (a run of spaces, a long word): a stream's text cap
STREAM_BYTES = 2**20  # a stream may take this much besides its text's share (events, keep-alive comments)
EVENT_BYTES_PER_TOKEN = 1024  # a token's event is ~200 bytes of JSON: five times that, to spare


class ModelUnavailable(ModelError):
    """The server cannot be reached or did not answer in time; ``fix``, when known, how to start it
    (the message ends with it; ``said`` is the message without it)."""

    def __init__(self, said: str, fix: str = "") -> None:
        super().__init__(f"{said}: start it with: {fix}" if fix else said)
        self.said, self.fix = said, fix


class ModelBadResponse(ModelError):
    """The server answered with an error or with something that is not a completion."""


@dataclass(frozen=True)
class Completion:
    """One answer: its text (reasoning removed), why it stopped, token counts and time taken."""

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    elapsed_ms: float
    cut_off: bool = False  # the stream ended before the model finished (the text is what was said)
    first_token_ms: float | None = None  # streamed: when the first text arrived


def model_text(text: str) -> str:
    """The model's words as kb keeps them: surrogate pairs joined, a lone surrogate made U+FFFD (pure)."""
    if not has_surrogates(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def stream_caps(max_tokens: int) -> tuple[int, int]:
    """The most text (characters) and bytes a stream of ``max_tokens`` tokens is read for (pure)."""
    return max_tokens * TOKEN_CHARS, STREAM_BYTES + max_tokens * EVENT_BYTES_PER_TOKEN


def strip_thinking(text: str) -> str:
    """Remove ``<think>…</think>`` blocks (and an unclosed one that runs to the end)."""
    return _THINK.sub("", text).replace("</think>", "").strip()


def visible(raw: str) -> str:
    """What of a streamed text can be shown: reasoning removed, and a ``<think>`` still arriving
    (``<th``…) held back."""
    shown = strip_thinking(raw)
    for n in range(len("<think>") - 1, 0, -1):
        if shown.endswith("<think>"[:n]):
            return shown[:-n].rstrip()
    return shown


def chat_payload(
    messages: Sequence[dict[str, str]],
    *,
    model: str,
    max_tokens: int,
    temperature: float,
    stop: Sequence[str] | None,
    enable_thinking: bool,
    stream: bool = False,
) -> dict[str, object]:
    """The JSON body of a chat completion request for ``model``; ``stream`` asks for server-sent events
    with the usage chunk at the end."""
    payload: dict[str, object] = {
        "model": model,
        "messages": safe_messages(messages),
        "max_tokens": max_tokens,
        "temperature": temperature,
        "chat_template_kwargs": {"enable_thinking": enable_thinking},
    }
    if stop:
        payload["stop"] = list(stop)
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    return payload


def parse_completion(body: object, elapsed_ms: float) -> Completion:
    """A Completion from a chat completion response body; ModelBadResponse when it is not one."""
    try:
        choice = body["choices"][0]  # type: ignore[index]
        message = choice["message"]
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise TypeError("content is not a string")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ModelBadResponse(
            f"the model server sent something that is not a chat completion ({exc})"
        ) from exc
    # optional parts of the wrong shape are unknown, not a failure: the text is the answer
    usage = body.get("usage")  # type: ignore[union-attr]
    usage = usage if isinstance(usage, dict) else {}
    finish_reason = choice.get("finish_reason")
    return Completion(
        text=strip_thinking(model_text(content)),
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        elapsed_ms=elapsed_ms,
    )


class ModelClient:
    """Talks to one OpenAI-compatible server through the caller's aiohttp session."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        model: str = DEFAULT_LLM_MODEL,
        model_hint: str = "",
        connect_timeout_s: float = 5.0,
        timeout_s: float = 120.0,
        stream_timeout_s: float = 600.0,
        max_concurrency: int = 1,
        enable_thinking: bool = False,
    ) -> None:
        import aiohttp  # already loaded by whoever made the session

        self.session = session
        self.base_url = base_url.rstrip("/")
        self.model = model  # the name each request carries
        self.model_hint = model_hint  # the Hub id the start command names
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        # a stream is not cut while it flows (keep-alive comments while the prompt is read, then the
        # text): it fails when nothing at all has come for timeout_s, or when stream_timeout_s is over
        self.stream_reads = aiohttp.ClientTimeout(sock_read=timeout_s, sock_connect=connect_timeout_s)
        self.timeout_s = timeout_s
        self.stream_timeout_s = stream_timeout_s  # a whole stream, keep-alive comments or not
        self.enable_thinking = enable_thinking
        self._slots = asyncio.Semaphore(max_concurrency)

    @property
    def start_hint(self) -> str:
        """The command that starts the server kb expects: mlx_lm.server from kb's own environment
        (it is installed there, not on PATH), thinking off."""
        model = self.model_hint or "MODEL"
        port = urlsplit(self.base_url).port or 8081
        server = Path(sys.executable).parent / "mlx_lm.server"
        program = str(server) if server.is_file() else "mlx_lm.server"
        return (
            f"{program} --model {model} --port {port} "
            """--chat-template-args '{"enable_thinking": false}'"""
        )

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
    ) -> Completion:
        """One chat completion; raises ModelUnavailable or ModelBadResponse."""
        payload = chat_payload(
            messages,
            model=self.model,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            enable_thinking=self.enable_thinking,
        )
        async with self._slots:
            t0 = time.perf_counter()
            body = await self._post_json("/chat/completions", payload, max_bytes=stream_caps(max_tokens)[1])
            return parse_completion(body, (time.perf_counter() - t0) * 1000)

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int,
        on_text: Callable[[str], Awaitable[None]],
        on_reading: Callable[[int, int], Awaitable[None]] | None = None,
        temperature: float = 0.0,
    ) -> Completion:
        """One chat completion streamed: ``on_text(text so far)`` as it grows (reasoning removed),
        ``on_reading(done, total)`` while the server reads the prompt. Raises ModelUnavailable or
        ModelBadResponse when nothing was said; a stream cut off after some text returns it, with
        ``cut_off`` set. The whole stream ends within ``stream_timeout_s`` (a server that sends keep-alive
        comments forever holds nothing) and past the text and bytes ``max_tokens`` can take."""
        payload = chat_payload(
            messages, model=self.model, max_tokens=max_tokens, temperature=temperature, stop=None,
            enable_thinking=self.enable_thinking, stream=True,
        )  # fmt: skip
        import aiohttp

        async with self._slots:
            t0 = time.perf_counter()
            state = _Streamed(t0, *stream_caps(max_tokens))
            deadline = asyncio.timeout(self.stream_timeout_s)
            try:
                async with deadline:
                    await self._read_stream(payload, state, on_text, on_reading)
            except ModelError:
                if not state.raw:
                    raise
                state.cut_off = True  # what was said before the unreadable event stays
            except ValueError as exc:  # a line longer than aiohttp's buffer
                if not state.raw:
                    raise ModelBadResponse(f"the model server sent an unreadable stream ({exc})") from exc
                state.cut_off = True
            except (TimeoutError, aiohttp.ClientError) as exc:
                if not state.raw:
                    if deadline.expired():
                        raise ModelUnavailable(
                            f"the model server at {self.base_url} did not answer within {self.stream_timeout_s:g} s"
                            " (KB_LLM_STREAM_TIMEOUT_S); is it overloaded or stuck?"
                        ) from exc
                    if isinstance(exc, TimeoutError):
                        raise ModelUnavailable(
                            f"the model server at {self.base_url} sent nothing for {self.timeout_s:g} s"
                            " (KB_LLM_TIMEOUT_S); is it overloaded or stuck?"
                        ) from exc
                    raise self._unreachable(exc) from exc
                state.cut_off = True
            return state.completion()

    async def _read_stream(
        self,
        payload: dict[str, object],
        state: _Streamed,
        on_text: Callable[[str], Awaitable[None]],
        on_reading: Callable[[int, int], Awaitable[None]] | None,
    ) -> None:
        """Read the events into ``state`` until [DONE], the end of the body or a cap."""
        async with self.session.post(
            self.base_url + "/chat/completions", json=payload, timeout=self.stream_reads
        ) as resp:
            if resp.status != 200:
                raise ModelBadResponse(refusal_text(resp.status, await resp.read(), self.model))
            async for raw in resp.content:
                if await state.feed(raw, on_text, on_reading):
                    return

    async def health(self) -> dict[str, object]:
        """GET /health (served at the server root, beside /v1)."""
        root = self.base_url.removesuffix("/v1")
        return await self._get_json(root + "/health")

    async def models(self) -> list[str]:
        """Model ids the server lists."""
        return model_ids(await self._get_json(self.base_url + "/models"))

    async def check(self) -> Reach:
        """Ask ``/v1/models`` and ``/health`` at once: what they said (see knowledge.model.reach);
        ModelUnavailable when nothing answers at all."""
        root = self.base_url.removesuffix("/v1")
        listed, health = await asyncio.gather(
            self._get(self.base_url + "/models"), self._get(root + "/health"), return_exceptions=True
        )
        for got in (listed, health):
            if isinstance(got, BaseException) and not isinstance(got, ModelUnavailable):
                raise got
        if isinstance(listed, ModelUnavailable) and isinstance(health, ModelUnavailable):
            raise listed
        models, models_error = None, ""
        if isinstance(listed, ModelUnavailable):
            models_error = listed.said
        elif listed[0] != 200:
            models_error = f"answered {listed[0]}: {_error_text(listed[1])}"
        else:
            try:
                models = tuple(model_ids(_json(listed[1], what="a list of models")))
            except ModelBadResponse as exc:
                models_error = str(exc)
        if isinstance(health, ModelUnavailable):
            return Reach(models, None, models_error, health.said)
        said = "" if health[0] == 200 else f"answered {health[0]}: {_error_text(health[1])}"
        return Reach(models, health[0], models_error, said)

    async def _post_json(self, path: str, payload: dict[str, object], *, max_bytes: int) -> object:
        import aiohttp

        url = self.base_url + path
        for attempt in (1, 2):
            try:
                async with self.session.post(url, json=payload, timeout=self.timeout) as resp:
                    raw = await _read_capped(resp, max_bytes)
                    if resp.status != 200:
                        raise ModelBadResponse(refusal_text(resp.status, raw, self.model))
                    return _json(raw)
            except (
                aiohttp.ServerDisconnectedError,
                aiohttp.ClientPayloadError,
                aiohttp.ClientOSError,
            ) as exc:
                if attempt == 2 or isinstance(exc, aiohttp.ClientConnectorError):
                    raise self._unreachable(exc) from exc
            except TimeoutError as exc:
                raise ModelUnavailable(
                    f"the model server at {self.base_url} did not answer within {self.timeout_s:g} s"
                    " (KB_LLM_TIMEOUT_S); is it overloaded or stuck?"
                ) from exc
            except aiohttp.ClientError as exc:
                raise self._unreachable(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _get(self, url: str) -> tuple[int, bytes]:
        """The HTTP status and body of a GET; ModelUnavailable when nothing answers."""
        import aiohttp

        try:
            async with self.session.get(url, timeout=self.timeout) as resp:
                return resp.status, await resp.read()
        except TimeoutError as exc:
            raise ModelUnavailable(f"the model server at {self.base_url} did not answer in time") from exc
        except aiohttp.ClientError as exc:
            raise self._unreachable(exc) from exc

    async def _get_json(self, url: str) -> dict[str, object]:
        status, raw = await self._get(url)
        if status != 200:
            raise ModelBadResponse(f"{url} answered {status}: {_error_text(raw)}")
        body = _json(raw)
        if not isinstance(body, dict):
            raise ModelBadResponse(f"{url} did not answer with a JSON object")
        return body

    def _unreachable(self, exc: BaseException) -> ModelUnavailable:
        return ModelUnavailable(
            f"model server not reachable at {self.base_url} ({type(exc).__name__})", fix=self.start_hint
        )


class _Streamed:
    """What a stream has said so far: its text, how it ended, its usage."""

    def __init__(self, t0: float, max_chars: int, max_bytes: int) -> None:
        self.t0 = t0
        self.max_chars, self.max_bytes = max_chars, max_bytes
        self.read_bytes = 0
        self.raw = ""
        self.finish_reason: str | None = None
        self.usage: dict[str, object] = {}
        self.cut_off = False
        self.done = False
        self.first_token_ms: float | None = None
        self._shown = ""

    async def feed(
        self,
        line: bytes,
        on_text: Callable[[str], Awaitable[None]],
        on_reading: Callable[[int, int], Awaitable[None]] | None,
    ) -> bool:
        """Take one line of the event stream; True at its end ([DONE], or a cap reached: cut off).
        ModelBadResponse for an event that cannot be read."""
        self.read_bytes += len(line)
        if self.read_bytes > self.max_bytes:
            return self._capped(f"more than {self.max_bytes} bytes")
        line = line.strip()
        if not line:
            return False
        if line.startswith(b":"):  # ": keepalive 1200/4800" while the prompt is read
            parts = line[1:].decode("utf-8", errors="replace").split()
            if on_reading is not None and len(parts) == 2 and parts[0] == "keepalive" and "/" in parts[1]:
                done, _, total = parts[1].partition("/")
                if done.isdigit() and total.isdigit():
                    await on_reading(int(done), int(total))
            return False
        if not line.startswith(b"data:"):
            return False
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return True
        chunk = _json(data, what="an event")
        if not isinstance(chunk, dict):
            raise ModelBadResponse("the model server sent an event that is not a JSON object")
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise ModelBadResponse("the model server sent an event that is not a chat completion chunk")
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str) and content:
                if self.first_token_ms is None:
                    self.first_token_ms = (time.perf_counter() - self.t0) * 1000
                self.raw += content[: self.max_chars - len(self.raw)]
                shown = visible(model_text(_held_back(self.raw)))
                if shown != self._shown:
                    self._shown = shown
                    await on_text(shown)
                if len(self.raw) >= self.max_chars:
                    return self._capped(f"more than {self.max_chars} characters")
        return False

    def _capped(self, what: str) -> bool:
        """The stream is past its cap: it ends here, cut off (nothing said: the server is not a model)."""
        if not self.raw:
            raise ModelBadResponse(f"the model server sent {what} without an answer")
        self.cut_off = True
        return True

    def completion(self) -> Completion:
        if not self.done and self.finish_reason is None:
            self.cut_off = True
        if self.cut_off and not self.raw:
            raise ModelUnavailable("the model server ended the answer before it said anything")
        return Completion(
            text=strip_thinking(model_text(self.raw)),
            finish_reason=self.finish_reason,
            prompt_tokens=_int_or_none(self.usage.get("prompt_tokens")),
            completion_tokens=_int_or_none(self.usage.get("completion_tokens")),
            elapsed_ms=(time.perf_counter() - self.t0) * 1000,
            cut_off=self.cut_off,
            first_token_ms=self.first_token_ms,
        )


async def _read_capped(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """A reply's body, read until ``max_bytes``; ModelBadResponse past it (no answer is that long)."""
    parts, size = [], 0
    async for part in resp.content.iter_chunked(65536):
        size += len(part)
        if size > max_bytes:
            raise ModelBadResponse(f"the model server sent more than {max_bytes} bytes for one answer")
        parts.append(part)
    return b"".join(parts)


def _held_back(text: str) -> str:
    """A streamed text without its last character while that is the first half of a surrogate pair
    whose second half is still to come."""
    return text[:-1] if text and "\ud800" <= text[-1] <= "\udbff" else text


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json(raw: bytes, *, what: str = "a reply") -> object:
    """The JSON value of a reply body or event; ModelBadResponse when it cannot be read (JSON is UTF-8,
    RFC 8259; a nesting bomb is a RecursionError, not a JSONDecodeError)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelBadResponse(
            f"the model server sent {what} that is not UTF-8 text (byte {exc.start}): "
            "is KB_LLM_URL the model server?"
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelBadResponse(
            f"the model server sent {what} that is invalid JSON ({exc.msg} at {exc.pos})"
        ) from exc
    except RecursionError as exc:
        raise ModelBadResponse(
            f"the model server sent {what} whose JSON is nested too deeply to read"
        ) from exc


def model_ids(body: object) -> list[str]:
    """The model ids of a ``/v1/models`` answer; ModelBadResponse when it is not a list of models."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not all(
        isinstance(m, dict) and isinstance(m.get("id"), str) for m in data
    ):
        raise ModelBadResponse(
            "unexpected /v1/models answer: its data is not a list of models with an id each"
        )
    return [m["id"] for m in data]


def refusal_text(status: int, raw: bytes, model: str) -> str:
    """What a chat completion that failed with HTTP ``status`` says; a 404 (Ollama and vLLM: no model by
    that name) also says which name was sent and where to set another."""
    said = f"the model server answered {status}: {_error_text(raw)}"
    if status == 404:
        said += f" (the request named the model {model!r}: set KB_LLM_MODEL to one the server lists, see kb doctor)"
    return said


def _error_text(raw: bytes) -> str:
    """What an error answer says, as one short line, whatever its bytes."""
    text = raw[:100_000].decode("utf-8", errors="replace")  # an error worth reading is short
    try:
        body = json.loads(text)
        if isinstance(body, dict) and "error" in body:
            return one_line(model_text(str(body["error"])), 300)
    except (ValueError, RecursionError):  # not JSON, or a nesting bomb: the text as it is
        pass
    return one_line(text, 300) or "(empty body)"
