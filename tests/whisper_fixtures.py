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


@pytest.fixture(scope="session")
def whisper_en(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(
        tmp_path_factory, "whisper-en", lambda d: build_tiny_whisper(d, says=HEARD_EN, language="en")
    )


@pytest.fixture(scope="session")
def whisper_zh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(
        tmp_path_factory, "whisper-zh", lambda d: build_tiny_whisper(d, says=HEARD_ZH, language="zh")
    )


@pytest.fixture(scope="session")
def whisper_phantom(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(
        tmp_path_factory, "whisper-phantom", lambda d: build_tiny_whisper(d, says=PHANTOM, language="en")
    )


@pytest.fixture(scope="session")
def whisper_random(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "whisper-random", lambda d: build_tiny_whisper(d, text_ctx=64))
