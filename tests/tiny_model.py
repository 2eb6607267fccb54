"""A tiny random Qwen3 model and a real ``mlx_lm.server`` serving it, for tests.

No downloads: the model folder is built from a ``tokenizer.json`` the test suite trained
itself, the weights are random (seeded, so every build is identical), and the server runs
with the Hugging Face hub switched offline and bound to 127.0.0.1 only.

* ``build_tiny_model(folder, tokenizer_json)`` writes config.json, model.safetensors,
  tokenizer.json, tokenizer_config.json (with a Qwen3-style chat template) and
  generation_config.json, and returns the folder.
* ``start_mlx_server(model_dir)`` starts ``python -m mlx_lm server`` on a free port, waits
  until it answers, and returns an ``MlxServer`` (``.base_url``, ``.model``, ``.process``,
  ``.stop()``, usable as a context manager). Its stdout/stderr go to ``.log_path``; start-up
  failures raise ``MlxServerError`` with the tail of that log.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Qwen3's template, reduced to plain chat (no tools, no reasoning history): each message as
# <|im_start|>{role}\n{content}<|im_end|>\n, then the generation prompt; with
# enable_thinking=false an empty think block is pre-filled, exactly as Qwen3 does.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
THINK_TOKENS = ("<think>", "</think>")

# Small enough to build in well under a second and to generate quickly on a CPU.
TINY_QWEN3 = {
    "model_type": "qwen3",
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "torch_dtype": "float32",
}

SEED = 0

# `python -m mlx_lm server` is the same entry point as `python -m mlx_lm.server`; the latter
# prints "Calling `python -m mlx_lm.server...` directly is deprecated" since 0.32.
SERVER_COMMAND = (sys.executable, "-m", "mlx_lm", "server")


class MlxServerError(RuntimeError):
    """The server did not start (or stopped); the message ends with the tail of its log."""


def _tokenizer_with_chat_tokens(tokenizer_json: Path):
    """The fixture tokenizer plus Qwen3's chat and thinking tokens (the file is not modified)."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    # Already present in the trained tokenizer; add_special_tokens is a no-op for those.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    # Qwen3 has <think> and </think> as added tokens that are NOT special (special: false in
    # its tokenizer_config), so they survive decode(skip_special_tokens=True). One id each,
    # which is what mlx_lm's has_thinking looks for in the vocabulary.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    return tok


def build_tiny_model(folder: Path, tokenizer_json: Path) -> Path:
    """Write a tiny random Qwen3 model for ``mlx_lm`` into ``folder`` and return ``folder``.

    Deterministic: the same tokenizer gives byte-identical files.
    """
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen3

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    tok = _tokenizer_with_chat_tokens(Path(tokenizer_json))
    tok.save(str(folder / "tokenizer.json"))
    vocab = tok.get_vocab(with_added_tokens=True)
    vocab_size = max(vocab.values()) + 1
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS + THINK_TOKENS}
    missing = [t for t, i in ids.items() if i is None]
    if missing:
        raise ValueError(f"tokenizer lacks {missing}")
    eos_id = ids["<|im_end|>"]
    pad_id = ids["<|endoftext|>"]

    config = dict(TINY_QWEN3, vocab_size=vocab_size, eos_token_id=eos_id, bos_token_id=None)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    generation_config = {
        "bos_token_id": None,
        "eos_token_id": [eos_id, pad_id],  # Qwen3 stops on <|im_end|> and <|endoftext|>
        "pad_token_id": pad_id,
        "do_sample": False,
    }
    (folder / "generation_config.json").write_text(
        json.dumps(generation_config, indent=2) + "\n", encoding="utf-8"
    )

    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": TINY_QWEN3["max_position_embeddings"],
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )

    args = qwen3.ModelArgs.from_dict(config)
    mx.random.seed(SEED)
    model = qwen3.Model(args)
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    return folder


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether the server could bind ``port`` (it sets SO_REUSEADDR, so TIME_WAIT is fine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


class _PortTaken(MlxServerError):
    """The server could not bind its port (someone took it after we picked it)."""


# Talk to 127.0.0.1 directly even when the environment sets an HTTP proxy.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with _OPENER.open(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        with e:  # the error is the response too
            return e.code, e.read()


def _post_json(url: str, body: dict, timeout: float) -> tuple[int, bytes]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        with e:  # the error is the response too
            return e.code, e.read()


@dataclass(eq=False)
class MlxServer:
    """A running ``mlx_lm.server``."""

    process: subprocess.Popen
    host: str
    port: int
    model: str  # the exact --model argument (the resolved absolute folder path)
    log_path: Path
    workdir: Path
    startup_s: float = 0.0
    _owns_workdir: bool = field(default=False, repr=False)
    _log_file: object = field(default=None, repr=False)

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root_url}/v1"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def is_running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 10) -> None:
        """SIGTERM, wait, SIGKILL if needed; idempotent. Leaves no process behind."""
        p = self.process
        if p.poll() is None:
            # The server runs in its own session/process group (start_new_session), so
            # this reaches any helper it might have spawned too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=timeout_s)
        else:
            # The leader is gone; make sure nothing else in its group lingers.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
        _RUNNING.discard(self)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self._owns_workdir = False

    def __enter__(self) -> MlxServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# Servers not stopped yet; stopped at interpreter exit in case a caller forgot (or was
# interrupted), so that no mlx_lm.server outlives the test run.
_RUNNING: set[MlxServer] = set()


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_RUNNING):
        server.stop()


# The server's environment, whatever its HF cache: offline, quiet, unbuffered, never through a proxy.
SERVER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_UPDATE_CHECK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONUNBUFFERED": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def server_env(hf_home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the server: offline, own HF cache (with hub/), unbuffered output."""
    env = dict(os.environ if base is None else base)
    (hf_home / "hub").mkdir(parents=True, exist_ok=True)  # /v1/models needs it to exist
    env.update(HF_HOME=str(hf_home), HF_HUB_CACHE=str(hf_home / "hub"), **SERVER_ENV)
    env.pop("HUGGINGFACE_HUB_CACHE", None)
    env.pop("TRANSFORMERS_CACHE", None)
    return env


def _wait_ready(server: MlxServer, deadline: float, warmup: bool) -> None:
    """Poll /health until 200; then (optionally) one 1-token completion to prove the model loaded.

    /health turns 200 as soon as the HTTP server is up and the generation thread is alive,
    which can be before the model finished loading (loading happens in that thread; if it
    fails the thread dies and /health says 503). The warm-up request waits for the load and
    also pays the first-call compilation so that tests see steady-state latency.
    """
    url = server.root_url + "/health"
    while True:
        # A failed bind kills only the server's main thread: the process stays alive (the
        # generation thread is not a daemon) and, if another program holds the port, /health
        # would reach that program. So look for the bind error in the log first.
        if "Address already in use" in server.log_tail(200):
            raise _PortTaken(f"mlx_lm.server could not bind 127.0.0.1:{server.port}")
        if server.process.poll() is not None:
            raise MlxServerError(
                f"mlx_lm.server exited with code {server.process.returncode} during start-up"
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise MlxServerError("mlx_lm.server did not answer GET /health in time")
        try:
            status, body = _get(url, timeout=min(2.0, remaining))
        except (OSError, urllib.error.URLError):
            time.sleep(0.05)
            continue
        if status == 200:
            break
        if status == 503:
            raise MlxServerError(f"mlx_lm.server is unhealthy: {body[:200]!r}")
        time.sleep(0.05)

    if not warmup:
        return
    # If loading the model fails after /health said 200, the request would wait forever in the
    # queue: wait in short slices and look at /health and the process in between.
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise MlxServerError("warm-up completion did not finish in time")
        try:
            status, body = _post_json(
                server.base_url + "/completions",
                {"prompt": "warm up", "max_tokens": 1, "temperature": 0.0},
                timeout=min(max(remaining, 0.5), 5.0),
            )
        except (OSError, urllib.error.URLError) as e:
            if server.process.poll() is not None:
                raise MlxServerError(f"mlx_lm.server exited during warm-up: {e!r}") from None
            try:
                health, _ = _get(url, timeout=2.0)
            except (OSError, urllib.error.URLError):
                health = None
            if health != 200:
                raise MlxServerError(f"mlx_lm.server unhealthy during warm-up ({health})") from None
            continue
        if status != 200:
            raise MlxServerError(f"warm-up completion answered {status}: {body[:300]!r}")
        return


def start_mlx_server(
    model_dir: Path,
    *,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    timeout_s: float = 60,
    workdir: Path | None = None,
    warmup: bool = True,
) -> MlxServer:
    """Start ``python -m mlx_lm server --model <model_dir>`` on 127.0.0.1 and wait until ready.

    ``port=None`` picks a free port (and retries with another one if it was taken in the
    meantime). ``workdir`` holds the server's HF_HOME and ``server.log``; by default a
    temporary folder that ``stop()`` removes. Raises ``MlxServerError`` with the log tail if
    the server exits or is not ready within ``timeout_s``; nothing is left running then, and
    the work folder with the full log is kept. ``warmup`` sends one 1-token completion before
    returning, so the model is known to be loaded and the first test does not pay for it.
    """
    host = "127.0.0.1"
    if port is not None and not port_is_free(port, host):
        raise MlxServerError(f"port {host}:{port} is already in use")
    model = str(Path(model_dir).resolve())
    owns = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="mlx-server-")) if owns else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    env = server_env(workdir / "hf")
    attempts = 1 if port is not None else 3

    for attempt in range(1, attempts + 1):
        p = port if port is not None else free_port(host)
        log_path = workdir / (f"server-{p}.log" if attempt > 1 else "server.log")
        log_file = open(log_path, "wb")  # noqa: SIM115 - closed by MlxServer.stop()
        cmd = [*SERVER_COMMAND, "--model", model, "--host", host, "--port", str(p), *extra_args]
        started = time.monotonic()
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(workdir),
            start_new_session=True,
        )
        server = MlxServer(
            process, host, p, model, log_path, workdir, _owns_workdir=False, _log_file=log_file
        )
        try:
            _wait_ready(server, started + timeout_s, warmup)
        except MlxServerError as e:
            server.stop()
            tail = server.log_tail()
            if isinstance(e, _PortTaken) and attempt < attempts:
                continue  # lost the race for an automatically chosen port: pick another
            # The work folder (and the full log) is kept for diagnosis.
            raise MlxServerError(
                f"{e}\ncommand: {' '.join(cmd)}\n--- tail of {log_path} ---\n{tail}"
            ) from None
        except BaseException:  # e.g. KeyboardInterrupt while waiting: leave nothing running
            server.stop()
            raise
        server.startup_s = time.monotonic() - started
        server._owns_workdir = owns
        _RUNNING.add(server)
        return server
    raise AssertionError("unreachable")
