"""Tiny Whisper models for mlx-whisper, built by the test suite: no downloads, a few megabytes each.

``build_tiny_whisper(folder)`` writes ``config.json`` and ``weights.safetensors`` (float16, as the
mlx-community conversions are) of a one-layer Whisper with the multilingual v3 vocabulary (51866
tokens: the tokenizer comes from mlx_whisper's own assets, so the vocabulary size must match).

* ``says=None``: every weight random (seeded). What it transcribes is noise, and slowly: its
  repetitive output makes Whisper retry at every fallback temperature, so it is the model a
  timeout test uses.
* ``says="How deep is Lake Quillan?"``: the same random encoder, but the decoder is wired to say
  exactly that, whatever the audio. Its attention outputs are zero and its one MLP is a linear map
  that sends each token's embedding to the next token of a fixed chain

      <|startoftranscript|> → <|lang|> → <|transcribe|> → <|0.00|> → the text's tokens → <|2.00|> → <|endoftext|>

  so the next token depends only on the current one (no position, no audio). Language detection
  sees ``language`` first; the no-speech probability is ~0 and the average log-probability ~0,
  so Whisper keeps the segment and kb's filters decide on the text alone.
"""

from __future__ import annotations

import json
from pathlib import Path

N_VOCAB_V3 = 51866  # multilingual, 100 languages (large-v3 and large-v3-turbo)
N_STATE = 32
SEED = 0

DIMENSIONS = {
    "n_mels": 128,  # large-v3's mel bins
    "n_audio_ctx": 1500,  # fixed by Whisper's 30 s window (3000 mel frames, stride 2)
    "n_audio_state": N_STATE,
    "n_audio_head": 1,
    "n_audio_layer": 1,
    "n_vocab": N_VOCAB_V3,
    "n_text_ctx": 448,
    "n_text_state": N_STATE,
    "n_text_head": 1,
    "n_text_layer": 1,
}

# Scales of the wiring: a chain token's embedding has length EMBED_NORM; the MLP adds NEXT_GAIN times
# the next token's direction, so after the final LayerNorm the next token's logit is ~24 and every
# other token's is below ~3: its probability is 1 - 1e-6.
EMBED_NORM = 3.0
NEXT_GAIN = 30.0
OTHER_STD = 0.01


def build_tiny_whisper(
    folder: Path, *, says: str | None = None, language: str = "en", text_ctx: int = 448
) -> Path:
    """Write a tiny Whisper model into ``folder`` (random, or wired to say ``says`` in ``language``).

    ``text_ctx`` is the decoder's context; Whisper samples at most half of it per 30 s window, so a
    random model with a small one gives up sooner.
    """
    import mlx.core as mx
    import numpy as np
    from mlx.utils import tree_flatten

    from knowledge.speech.transcribe import skip_word_timing

    skip_word_timing()  # as kb's transcriber does: scipy and numba are not needed here either
    from mlx_whisper import whisper

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    mx.random.seed(SEED)
    dimensions = dict(DIMENSIONS, n_text_ctx=text_ctx)
    model = whisper.Whisper(whisper.ModelDimensions(**dimensions), mx.float16)
    weights = {k: np.array(v.astype(mx.float32)) for k, v in tree_flatten(model.parameters())}
    if says is not None:
        _wire_decoder(weights, _chain(says, language))
    arrays = {k: mx.array(v).astype(mx.float16) for k, v in weights.items()}
    mx.save_safetensors(str(folder / "weights.safetensors"), arrays)
    config = dict(dimensions, model_type="whisper")
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return folder


def _chain(says: str, language: str) -> list[int]:
    """The token ids the wired decoder walks through, from <|startoftranscript|> to <|endoftext|>."""
    from mlx_whisper.tokenizer import get_tokenizer

    tok = get_tokenizer(True, num_languages=N_VOCAB_V3 - 51765 - 1, language=language, task="transcribe")
    text = tok.encode(" " + says.strip())
    end = tok.timestamp_begin + 100  # <|2.00|>
    chain = [
        tok.sot,
        tok.to_language_token(language),
        tok.transcribe,
        tok.timestamp_begin,
        *text,
        end,
        tok.eot,
    ]
    if len(set(chain)) != len(chain):
        raise ValueError(f"{says!r} repeats a token; the wired decoder needs each token once")
    if len(chain) >= N_STATE:
        raise ValueError(f"{says!r} is too long for a {N_STATE}-wide model")
    return chain


def _wire_decoder(weights: dict, chain: list[int]) -> None:
    """Make the decoder map each chain token to the next one (see the module docstring)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    # Orthonormal directions with zero mean, so that LayerNorm only rescales them.
    basis = rng.standard_normal((N_STATE, len(chain)))
    basis -= basis.mean(axis=0, keepdims=True)
    directions, _ = np.linalg.qr(basis)
    u = directions.T  # u[i] is the direction of chain[i]

    embedding = rng.standard_normal((N_VOCAB_V3, N_STATE)) * OTHER_STD
    for i, token in enumerate(chain):
        embedding[token] = EMBED_NORM * u[i]
    weights["decoder.token_embedding.weight"] = embedding
    weights["decoder.positional_embedding"] = np.zeros_like(weights["decoder.positional_embedding"])

    prefix = "decoder.blocks.0."
    for attention in ("attn", "cross_attn"):
        weights[prefix + attention + ".out.weight"] *= 0
        weights[prefix + attention + ".out.bias"] *= 0
    # mlp_ln(EMBED_NORM * u[i]) = sqrt(N_STATE) * u[i]; the MLP must add NEXT_GAIN * u[i + 1].
    shift = sum(np.outer(u[i + 1], u[i]) for i in range(len(chain) - 1)) * (NEXT_GAIN / np.sqrt(N_STATE))
    hidden = weights[prefix + "mlp1.weight"].shape[0]
    mlp1 = np.zeros((hidden, N_STATE))
    mlp1[:N_STATE] = shift
    mlp1[N_STATE : 2 * N_STATE] = -shift
    mlp2 = np.zeros((N_STATE, hidden))
    mlp2[:, :N_STATE] = np.eye(N_STATE)
    mlp2[:, N_STATE : 2 * N_STATE] = -np.eye(N_STATE)  # gelu(z) - gelu(-z) = z: the MLP is linear
    weights[prefix + "mlp1.weight"], weights[prefix + "mlp2.weight"] = mlp1, mlp2
    weights[prefix + "mlp1.bias"] = np.zeros(hidden)
    weights[prefix + "mlp2.bias"] = np.zeros(N_STATE)
    for norm in ("attn_ln", "cross_attn_ln", "mlp_ln"):
        weights[prefix + norm + ".weight"] = np.ones(N_STATE)
        weights[prefix + norm + ".bias"] = np.zeros(N_STATE)
    weights["decoder.ln.weight"] = np.ones(N_STATE)
    weights["decoder.ln.bias"] = np.zeros(N_STATE)
