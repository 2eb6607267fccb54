"""kb service: the three services rendered for launchd (macOS) and systemd (Linux) from one description."""

import os
import plistlib
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from knowledge import service
from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent)


def place(home: Path) -> service.Place:
    return service.Place(
        home=str(home), bin=BIN, env_file=str(home / "env"), model="acme/tiny-model", port=8082
    )


@pytest.mark.parametrize("one", service.SERVICES, ids=[s.name for s in service.SERVICES])
def test_the_units_in_systemd_are_the_rendered_ones(one):
    assert (ROOT / "systemd" / service.unit_name(one)).read_text() == service.unit_text(one, service.SHIPPED)


@pytest.mark.parametrize("one", service.SERVICES, ids=[s.name for s in service.SERVICES])
def test_an_installed_unit_passes_systemd_analyze_verify(one, tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed to check the units (Debian: systemd)"
    unit = tmp_path / service.unit_name(one)
    unit.write_text(service.unit_text(one, place(ROOT)))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_launchd_agents_carry_the_programs_the_settings_and_the_logs(tmp_path):
    env = {"KB_TELEGRAM_TOKEN": "123:abc", "KB_MODEL": "acme/tiny-model"}
    agents = {
        s.name: plistlib.loads(plistlib.dumps(service.plist_dict(s, place(tmp_path), env)))
        for s in service.SERVICES
    }
    assert agents["mlx"]["ProgramArguments"] == [
        f"{BIN}/mlx_lm.server", "--model", "acme/tiny-model", "--host", "127.0.0.1", "--port", "8082",
        "--chat-template-args", '{"enable_thinking":false}',
    ]  # fmt: skip
    assert agents["daemon"]["ProgramArguments"] == [f"{BIN}/kb", "daemon"]
    assert agents["bot"]["ProgramArguments"] == [f"{BIN}/kb", "bot"]
    for name, agent in agents.items():
        assert agent["Label"] == f"local.kb.{name}" and agent["RunAtLoad"] is True
        assert agent["KeepAlive"] == {"SuccessfulExit": False}  # restarted after a failure only
        assert agent["EnvironmentVariables"]["KB_HOME"] == str(tmp_path)
        assert agent["EnvironmentVariables"]["KB_TELEGRAM_TOKEN"] == "123:abc"
        assert agent["StandardErrorPath"] == str(tmp_path / "runs" / "logs" / f"{name}.err.log")
        assert agent["WorkingDirectory"] == str(tmp_path)


class Recorder:
    """A stand-in for launchctl: records each call, answers as told."""

    def __init__(self, printed: str = "") -> None:
        self.calls: list[list[str]] = []
        self.printed = printed

    def __call__(self, argv):
        self.calls.append(list(argv))
        return subprocess.CompletedProcess(
            argv, 0, stdout=self.printed if argv[1] == "print" else "", stderr=""
        )


def test_launchd_install_status_and_uninstall_round_trip(tmp_path):
    (tmp_path / "env").write_text(
        "# settings\nexport KB_TELEGRAM_TOKEN='123:abc'\nKB_TELEGRAM_ALLOWED_USERS=42\n"
    )
    host = service.Host("darwin", tmp_path / "user", 501)
    run = Recorder(printed="gui/501/local.kb.daemon = {\n\tstate = running\n\tpid = 4242\n}")
    said = service.install(service.SERVICES, place(tmp_path), host, run=run)
    agents = host.user_home / "Library" / "LaunchAgents"
    for one in service.SERVICES:
        path = agents / f"local.kb.{one.name}.plist"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it carries the bot token
        assert plistlib.loads(path.read_bytes())["EnvironmentVariables"]["KB_TELEGRAM_ALLOWED_USERS"] == "42"
        assert ["launchctl", "bootstrap", "gui/501", str(path)] in run.calls
    assert all(line.endswith("started") for line in said)
    assert service.status(service.SERVICES[1:2], host, run=run) == [
        f"daemon  running ({agents / 'local.kb.daemon.plist'})"
    ]
    said = service.uninstall(service.SERVICES, host, run=run)
    assert not list(agents.glob("*.plist")) and all("removed" in line for line in said)
    assert ["launchctl", "bootout", "gui/501/local.kb.bot"] in run.calls


def test_kb_service_on_linux_installs_and_removes_user_units_through_systemctl(tmp_path):
    """The real CLI with a stand-in systemctl on PATH that records its calls (the machine's own is not touched)."""
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    log = tmp_path / "systemctl.calls"
    (stand_in / "systemctl").write_text(
        f'#!/bin/sh\necho "$@" >> {log}\n[ "$2" = is-active ] && echo active\nexit 0\n'
    )
    (stand_in / "systemctl").chmod(0o755)
    home = tmp_path / "kb"
    env = subprocess_env(
        HOME=str(tmp_path / "user"), PATH=f"{stand_in}:{os.environ['PATH']}", KB_TELEGRAM_TOKEN=""
    )

    def kb(*args):
        return subprocess.run([sys.executable, "-m", "knowledge.front.cli", "--home", str(home), "service", *args],
                              capture_output=True, text=True, env=env, timeout=60)  # fmt: skip

    installed = kb("install")
    assert installed.returncode == 0, installed.stderr
    units = tmp_path / "user" / ".config" / "systemd" / "user"
    assert sorted(p.name for p in units.iterdir()) == [
        "kb-daemon.service",
        "kb-mlx.service",
    ]  # no token: no bot
    assert "bot     skipped: KB_TELEGRAM_TOKEN is not set" in installed.stdout
    assert f"ExecStart={BIN}/kb daemon" in (units / "kb-daemon.service").read_text()
    assert f"Environment=KB_HOME={home}" in (units / "kb-daemon.service").read_text()
    calls = log.read_text().splitlines()
    assert "--user enable --now kb-daemon.service" in calls and "--user daemon-reload" in calls
    shown = kb("status", "--only", "daemon")
    assert shown.stdout.strip() == f"daemon  active ({units / 'kb-daemon.service'})"
    removed = kb("uninstall")
    assert removed.returncode == 0 and not list(units.iterdir())
    assert "--user disable --now kb-mlx.service" in log.read_text().splitlines()
    assert kb("install", "--only", "nope").returncode == 2
