"""Session fixtures: tiny Whisper model folders (see tests/tiny_whisper.py), built once per run, on first use.

* ``whisper_en``: hears "How deep is Lake Quillan?" in English, whatever the audio;
* ``whisper_zh``: hears "这个软件的内存有多大" (Simplified: kb must turn it Traditional);
* ``whisper_phantom``: hears "Thank you for watching!", Whisper's best-known phantom phrase;
* ``whisper_random``: random weights; slow and unpredictable, like a model that went wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import built_once
from tests.tiny_whisper import build_tiny_whisper

HEARD_EN = "How deep is Lake Quillan?"
HEARD_ZH = "这个软件的内存有多大"
HEARD_ZH_TRADITIONAL = "這個軟體的記憶體有多大"
PHANTOM = "Thank you for watching!"


MODELS = {  # fixture name: what its model is built to say
    "whisper_en": {"says": HEARD_EN, "language": "en"},
    "whisper_zh": {"says": HEARD_ZH, "language": "zh"},
    "whisper_phantom": {"says": PHANTOM, "language": "en"},
    "whisper_random": {"text_ctx": 64},
}


def _model(name: str):
    @pytest.fixture(scope="session", name=name)
    def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return built_once(tmp_path_factory, name, lambda d: build_tiny_whisper(d, **MODELS[name]))

    return folder


whisper_en, whisper_zh, whisper_phantom, whisper_random = (_model(name) for name in MODELS)
