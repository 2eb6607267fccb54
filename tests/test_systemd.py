"""The user units pass systemd's own checker once their paths point at a real install."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote

import pytest

from cli import service

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


def _stub_venv(bin_dir: Path) -> None:
    """Executables where a unit's ExecStart= points (systemd-analyze checks that they exist)."""
    bin_dir.mkdir(parents=True)
    for name in ("kb", "mlx_lm.server"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)


def _awkward_place(root: Path) -> service.Place:
    """kb checked out in a folder whose name holds every character a unit file treats specially."""
    home = root / 'say "hi" \\ 100% %h $x it\'s 我的 kb'
    home.mkdir(parents=True)
    bin_dir = (
        root / "venv 100% %h $x 我的" / "bin"
    )  # systemd runs no program whose path has a quote or backslash
    _stub_venv(bin_dir)
    return service.Place(home=str(home), bin=str(bin_dir), env_file=str(home / "env"), model="a/b", port=8082)


@pytest.mark.parametrize("one", service.SERVICES, ids=[s.name for s in service.SERVICES])
def test_a_unit_for_an_awkward_path_passes_systemd_analyze_verify_without_a_warning(one, tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed to check the units (Debian: systemd)"
    unit = tmp_path / "units" / service.unit_name(one)
    unit.parent.mkdir()
    unit.write_text(service.unit_text(one, _awkward_place(tmp_path)))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # "Invalid environment assignment, ignoring: kb" is only a warning


def _systemd_reads(units: Path, one: service.Service, user_home: Path) -> dict[str, list[str]]:
    """What systemd itself made of a unit: its test mode (`systemd --test --user`) dumps each loaded unit."""
    manager = next(
        (p for p in (Path("/usr/lib/systemd/systemd"), Path("/lib/systemd/systemd")) if p.exists()), None
    )
    assert manager is not None, "systemd is needed to check what it reads of a unit (Debian: systemd)"
    as_user: list[str] = []
    if os.geteuid() == 0:  # systemd refuses its test mode to root: read the unit as nobody
        setpriv = shutil.which("setpriv")
        assert setpriv, "systemd's test mode refuses root: setpriv (util-linux) is needed to read as nobody"
        as_user = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    runtime = user_home / "run"
    runtime.mkdir(mode=0o700)
    if as_user:
        os.chown(runtime, 65534, 65534)
    env = {"PATH": os.environ["PATH"], "HOME": str(user_home), "XDG_RUNTIME_DIR": str(runtime),
           "XDG_CONFIG_HOME": str(user_home / "config"), "SYSTEMD_UNIT_PATH": f"{units}:",
           "SYSTEMD_LOG_TARGET": "console"}  # fmt: skip
    done = subprocess.run([*as_user, str(manager), "--test", "--user", f"--unit={service.unit_name(one)}"],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    complaints = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith(f"{units}/")]
    assert complaints == []  # "….service:10: Invalid environment assignment, ignoring: kb" is only a warning
    section = done.stdout.split(f"-> Unit {service.unit_name(one)}:\n", 1)[1].split("\t-> Unit ", 1)[0]
    read: dict[str, list[str]] = {}
    for line in section.splitlines():
        key, _, value = line.strip().partition(": ")
        read.setdefault(key, []).append(value)
    return read


def _dumped_words(line: str) -> list[str]:
    """The words of a command line as systemd's dump quotes them (shell_maybe_quote: a word with a special
    character in double quotes, with a backslash before each of \\ " ` $)."""
    words = re.findall(r'"((?:[^"\\]|\\.)*)"|(\S+)', line)
    return [re.sub(r"\\(.)", r"\1", quoted) if quoted else plain for quoted, plain in words]


@pytest.mark.parametrize("one", service.SERVICES, ids=[s.name for s in service.SERVICES])
def test_systemd_reads_an_awkward_path_back_exactly(one):
    with tempfile.TemporaryDirectory(prefix="kb-units-") as folder:  # not under tmp_path: nobody must read it
        root = Path(folder)
        root.chmod(0o755)
        spot = _awkward_place(root / "kb")
        (root / "units").mkdir()
        (root / "units" / service.unit_name(one)).write_text(service.unit_text(one, spot))
        for path in root.rglob("*"):
            path.chmod(path.stat().st_mode | 0o755 if path.is_dir() else path.stat().st_mode | 0o644)
        (root / "user").mkdir(mode=0o755)
        read = _systemd_reads(root / "units", one, root / "user")
    assert read["WorkingDirectory"] == [spot.home]
    assert read["EnvironmentFile"] == [f"-{spot.env_file}"]
    expected_env = f"KB_MODEL={service.DEFAULT_MODEL}" if one.name == "mlx" else f"KB_HOME={spot.home}"
    assert read["Environment"] == [expected_env]
    (url,) = read["Documentation"]
    assert unquote(url.removeprefix("file://")) == f"{spot.home}/README.md"
    # The command line as systemd will start it: the program's path as it is; in the arguments, $$ is a
    # dollar sign and ${KB_MODEL} the model the settings name.
    argv = _dumped_words(read["Command Line"][0])
    expected = [
        "${KB_MODEL}" if template == "{model}" else argument if n == 0 else argument.replace("$", "$$")
        for n, (template, argument) in enumerate(zip(one.command, service.command(one, spot), strict=True))
    ]
    assert argv == expected
