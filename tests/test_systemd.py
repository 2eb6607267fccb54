"""The user units pass systemd's own checker once their paths point at a real install."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UNITS = sorted((ROOT / "systemd").glob("*.service"))


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_unit_passes_systemd_analyze_verify(unit, tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed to check the units (Debian: systemd)"
    kb = Path(sys.executable).parent / "kb"
    assert kb.exists(), "the kb console script is installed next to this Python"
    mlx = Path(sys.executable).parent / "mlx_lm.server"
    assert mlx.exists(), "mlx_lm.server is installed next to this Python (the mlx extra)"
    text = (
        unit.read_text()
        .replace("%h/kb/.venv/bin/kb", str(kb))
        .replace("%h/kb/.venv/bin/mlx_lm.server", str(mlx))
        .replace("%h/kb", str(ROOT))
    )
    (tmp_path / unit.name).write_text(text)
    result = subprocess.run([analyze, "verify", str(tmp_path / unit.name)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "ExecStart=%h/kb/.venv/bin/" in unit.read_text() and "Restart=on-failure" in unit.read_text()
