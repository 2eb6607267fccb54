"""kb service: the three services rendered for launchd (macOS) and systemd (Linux) from one description."""

import os
import plistlib
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote

import pytest

from cli import service
from knowledge.errors import ConfigError
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
        return subprocess.run([sys.executable, "-m", "cli", "--home", str(home), "service", *args],
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


# A reading of a unit file by systemd's rules (systemd.syntax(7), systemd.exec(5), systemd.service(5), as
# systemd 252 applies them), to check that what kb writes is read back as the paths it was written from.
_UNQUOTED_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "s": " ", "n": "\n", "t": "\t", "r": "\r"}


def _words(value: str, *, is_cunescaped: bool = True) -> list[str]:
    """systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE), word after word."""
    out, i = [], 0
    while True:
        while i < len(value) and value[i] in " \t\n\r":
            i += 1
        if i == len(value):
            return out
        word, quote = [], ""
        while i < len(value):
            char = value[i]
            if char == "\\" and is_cunescaped:
                i += 1
                word.append(_UNQUOTED_ESCAPES[value[i]])  # an escape systemd would not know fails here
            elif quote and char == quote:
                quote = ""
            elif quote:
                word.append(char)
            elif char in "\"'":
                quote = char
            elif char in " \t\n\r":
                break
            else:
                word.append(char)
            i += 1
        assert not quote, f"unterminated quote in {value!r}"
        out.append("".join(word))


def _specifiers(value: str, user_home: str) -> str:
    """%% is a percent sign, %h the user's home; kb writes no other specifier."""
    return re.sub(r"%(.)", lambda m: {"%": "%", "h": user_home}[m[1]], value)


def _exec_argument(word: str) -> str:
    """An argument after systemd's variable expansion at start ($$ is a dollar; ${KB_MODEL} is left named)."""
    parts = re.split(r"(\$\$|\$\{KB_MODEL\})", word)
    assert all("$" not in part for part in parts[::2]), f"an unescaped $ in {word!r}"
    return "".join("$" if part == "$$" else part for part in parts)


def read_unit(text: str, *, user_home: str = "/home/me") -> dict[str, list]:
    """Each setting of a unit as systemd reads it: words for the list settings, one string for the rest."""
    lines, settings = text.split("\n"), {}
    while lines:
        line = lines.pop(0).strip()
        while line.endswith("\\"):  # a continuation: the backslash becomes a space
            line = line[:-1] + " " + lines.pop(0).strip()
        if not line or line[0] in "#;[":
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if key == "Environment":
            read = [_specifiers(w, user_home) for w in _words(value)]
        elif key == "ExecStart":
            program, *arguments = [_specifiers(w, user_home) for w in _words(value)]
            read = [program, *map(_exec_argument, arguments)]
        elif key == "Documentation":
            read = [_specifiers(w, user_home) for w in _words(value, is_cunescaped=False)]
        else:  # WorkingDirectory=, EnvironmentFile=, Description=: the rest of the line, as it is
            read = [_specifiers(value, user_home)]
        settings.setdefault(key, []).extend(read)
    return settings


AWKWARD_HOMES = [
    "/home/me/My kb", '/home/me/say "hi" kb', "/home/me/back\\slash", "/home/me/100% kb", "/home/me/%h kb",
    "/home/me/我的 kb", "/home/me/$HOME kb", "/home/me/it's kb", "/home/me/a;b ; c", "/home/me/tab\u3000wide",
]  # fmt: skip


def awkward_place(home: str) -> service.Place:
    """A checkout at ``home``, its venv inside it when systemd can run a program from there (it refuses
    an executable whose path holds a quote or a backslash)."""
    bin_ = f"{home}/.venv/bin" if not re.search(r"[\"'\\]", home) else "/opt/kb 100% $x 我的/bin"
    return service.Place(home=home, bin=bin_, env_file=f"{home}/env", model="acme/tiny-model", port=8082)


@pytest.mark.parametrize("home", AWKWARD_HOMES)
@pytest.mark.parametrize("one", service.SERVICES, ids=[s.name for s in service.SERVICES])
def test_a_unit_reads_back_as_the_paths_it_was_rendered_from(one, home):
    spot = awkward_place(home)
    unit = read_unit(service.unit_text(one, spot))
    assert unit["WorkingDirectory"] == [home]
    assert unit["EnvironmentFile"] == [f"-{home}/env"]
    expected_env = f"KB_MODEL={service.DEFAULT_MODEL}" if one.name == "mlx" else f"KB_HOME={home}"
    assert unit["Environment"] == [expected_env]
    expected_argv = [
        "${KB_MODEL}" if template == "{model}" else argument
        for template, argument in zip(one.command, service.command(one, spot), strict=True)
    ]
    assert unit["ExecStart"] == expected_argv
    assert unit["Description"] == [one.description]
    (url,) = unit["Documentation"]
    assert (
        url.startswith("file:///") and url.isascii()
    )  # systemd ignores a documentation URL that is not ASCII
    assert unquote(url.removeprefix("file://")) == f"{home}/README.md"


def test_the_thinking_switch_reaches_the_model_server_as_json():
    """A quote inside an unquoted word is still a quote to systemd: the JSON must be quoted as a whole."""
    argv = read_unit(service.unit_text(service.SERVICES[0], place(Path("/home/me/kb"))))["ExecStart"]
    assert argv[argv.index("--chat-template-args") + 1] == '{"enable_thinking":false}'


@pytest.mark.parametrize(
    ("field", "value", "setting"),
    [
        ("home", "/home/me/new\nline", "WorkingDirectory="),
        ("home", "/home/me/tab\there", "WorkingDirectory="),
        ("home", "/home/me/kb\\", "WorkingDirectory="),  # a trailing backslash joins the next line to it
        ("home", "/home/me/kb ", "WorkingDirectory="),  # systemd strips the end of a line
        ("env_file", "/home/me/env\r", "EnvironmentFile="),
        ("bin", '/home/me/say "hi"/bin', "ExecStart="),
        ("bin", "/home/me/back\\slash/bin", "ExecStart="),
        ("bin", "/home/me/\x1b[31mred/bin", "ExecStart="),
        ("bin", "/home/me/\udcff/bin", "ExecStart="),  # a file name that is not UTF-8
    ],
)
def test_a_value_a_unit_cannot_hold_is_refused_naming_the_setting(field, value, setting):
    spot = replace(place(Path("/home/me/kb")), **{field: value})
    with pytest.raises(ConfigError, match=re.escape(setting)):
        service.unit_text(service.SERVICES[1], spot)


def test_install_writes_and_starts_nothing_when_one_unit_cannot_be_written(tmp_path):
    host = service.Host("linux", tmp_path / "user", 1000)
    run = Recorder()
    spot = replace(place(tmp_path), bin=str(tmp_path / 'say "hi"' / "bin"))
    with pytest.raises(ConfigError, match="ExecStart="):
        service.install(service.SERVICES, spot, host, run=run)
    assert not host.folder.exists() and run.calls == []


def test_a_launchd_agent_keeps_awkward_paths_exactly(tmp_path):
    home = str(tmp_path / 'My "kb" <&> 100% $x \\ 我的 kb')
    spot = service.Place(home=home, bin=f"{home}/.venv/bin", env_file=f"{home}/env", model="a/b", port=8082)
    agent = plistlib.loads(plistlib.dumps(service.plist_dict(service.SERVICES[1], spot, {"KB_X": "a&b<c>"})))
    assert agent["ProgramArguments"] == [f"{home}/.venv/bin/kb", "daemon"]
    assert agent["WorkingDirectory"] == agent["EnvironmentVariables"]["KB_HOME"] == home
    assert agent["EnvironmentVariables"]["KB_X"] == "a&b<c>"


@pytest.mark.parametrize(
    ("home", "environment", "key"),
    [
        ("/Users/me/new\nline", {}, "WorkingDirectory"),
        ("/Users/me/bell\x07", {}, "WorkingDirectory"),
        ("/Users/me/kb", {"KB_TELEGRAM_TOKEN": "123:abc\x00"}, "EnvironmentVariables KB_TELEGRAM_TOKEN"),
    ],
)
def test_a_launchd_agent_refuses_a_control_character_naming_the_key(home, environment, key):
    spot = replace(place(Path("/Users/me/kb")), home=home)
    with pytest.raises(ConfigError, match=key) as refused:
        service.plist_dict(service.SERVICES[1], spot, environment)
    assert "123:abc" not in str(refused.value)  # a setting's value may be a secret
