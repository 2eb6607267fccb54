"""Session fixtures: a tiny random Qwen3 model folder and a real ``mlx_lm.server`` serving it.

Load with ``pytest_plugins = ["tests.model_fixtures"]`` (in conftest.py). Needs the
``tokenizer_json`` session fixture from tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import built_once
from tests.tiny_model import MlxServer, build_tiny_model, start_mlx_server


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer_json: Path) -> Path:
    """A folder ``mlx_lm`` loads: config.json, model.safetensors, tokenizer files (built once per run)."""
    return built_once(tmp_path_factory, "tiny-qwen3", lambda d: build_tiny_model(d, tokenizer_json))


@pytest.fixture(scope="session")
def mlx_server(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[MlxServer]:
    """One ``mlx_lm.server`` for the session on a free 127.0.0.1 port, ready to answer.

    Its log is ``mlx_server.log_path``; it is stopped (TERM, then KILL) at session end.
    """
    server = start_mlx_server(tiny_model_dir, workdir=tmp_path_factory.mktemp("mlx-server"))
    try:
        yield server
    finally:
        server.stop()
