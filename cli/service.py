"""kb's three background services, described once and rendered for the host's service manager.

* ``mlx``    the model server (``mlx_lm.server`` with KB_MODEL, thinking off, on KB_LLM_URL's port);
* ``daemon`` the inbox daemon (``kb daemon``);
* ``bot``    the Telegram bot (``kb bot``; installed when KB_TELEGRAM_TOKEN is set).

On macOS each becomes a launchd agent (``~/Library/LaunchAgents/local.kb.NAME.plist``: run at
load, kept alive after a failure, logs under ``runs/logs/``); on Linux a systemd user unit
(``~/.config/systemd/user/kb-NAME.service``). Settings come from ``~/.config/kb/env`` (``KEY=value``
lines): systemd reads it itself (EnvironmentFile); a plist carries its values, so it is written
readable by its owner only. The units in ``systemd/`` are these renderings with ``%h/kb`` paths,
checked by the tests to be identical, so the two never drift.

Every value is written so that the service manager reads back exactly the path it was given, whatever
the path holds (spaces, quotes, ``%``, ``$``, "我的 kb"): a plist is XML written by plistlib; a unit follows
systemd.syntax(7) (words quoted with C escapes, ``%`` doubled, ``$`` doubled in arguments). A value
neither can hold (a newline, a control character; in a unit also a program path with a quote or a
backslash) is refused with a :class:`ConfigError` naming the setting, before anything is written.

Rendering is pure (:func:`unit_text`, :func:`plist_dict`); :func:`install`, :func:`uninstall` and
:func:`status` run the service manager's commands through a runner that tests replace.
"""

from __future__ import annotations

import plistlib
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from knowledge.config import SETTINGS, read_dotenv
from knowledge.errors import ConfigError
from knowledge.ingest.files import write_atomic

LABEL_PREFIX = "local.kb."
THINKING_OFF = '{"enable_thinking":false}'


@dataclass(frozen=True)
class Service:
    """One background service, whatever manages it."""

    name: str
    description: str
    command: tuple[str, ...]  # "{bin}" is the folder of kb's Python; "{model}", "{port}" from the settings
    restart_s: int
    stop_timeout_s: int
    after: tuple[str, ...] = ()
    needs_network: bool = False
    comment: str = ""


SERVICES = (
    Service(
        "mlx",
        "kb model server (mlx_lm.server, OpenAI-compatible, 127.0.0.1:8081)",
        (
            "{bin}/mlx_lm.server",
            "--model",
            "{model}",
            "--host",
            "127.0.0.1",
            "--port",
            "{port}",
            "--chat-template-args",
            THINKING_OFF,
        ),
        restart_s=10,
        stop_timeout_s=30,
        comment="The model server for kb: mlx_lm.server with KB_MODEL on 127.0.0.1:8081, thinking off.\n"
        "Set KB_MODEL in ~/.config/kb/env (default below); the first start downloads the model once.",
    ),  # fmt: skip
    Service(
        "daemon",
        "kb inbox daemon: converts and indexes files dropped into knowledge/inbox/",
        ("{bin}/kb", "daemon"),
        restart_s=5,
        stop_timeout_s=60,
        comment="kb inbox daemon. Install all three with: kb service install (or see README: Running kb as\n"
        "services). Settings (KB_*) go in ~/.config/kb/env, one KEY=value a line; it is optional.",
    ),
    Service(
        "bot",
        "kb Telegram bot: answers from the knowledge base, web candidates, file uploads",
        ("{bin}/kb", "bot"),
        restart_s=5,
        stop_timeout_s=30,
        after=("mlx",),
        needs_network=True,
        comment="kb Telegram bot. Needs KB_TELEGRAM_TOKEN and KB_TELEGRAM_ALLOWED_USERS in ~/.config/kb/env.",
    ),
)
DEFAULT_MODEL = next(s.default for s in SETTINGS if s.env == "KB_MODEL")


@dataclass(frozen=True)
class Place:
    """Where kb is installed and what the services need: the checkout (KB_HOME), its venv's bin
    folder, the settings file and the model server's model and port."""

    home: str
    bin: str
    env_file: str
    model: str
    port: int
    has_specifiers: bool = False  # its paths are written into a unit as they are, specifiers (%h) and all


# The units shipped in systemd/: kb checked out in ~/kb (systemd's %h is the user's home).
SHIPPED = Place(
    home="%h/kb", bin="%h/kb/.venv/bin", env_file="%h/.config/kb/env", model=DEFAULT_MODEL, port=8081,
    has_specifiers=True,
)  # fmt: skip


def unit_name(service: Service) -> str:
    return f"kb-{service.name}.service"


def label(service: Service) -> str:
    return LABEL_PREFIX + service.name


def command(service: Service, place: Place) -> list[str]:
    """The program and its arguments."""
    fill = {"{bin}": place.bin, "{model}": place.model, "{port}": str(place.port)}
    out = []
    for argument in service.command:
        for key, value in fill.items():
            argument = argument.replace(key, value)
        out.append(argument)
    return out


def unit_text(service: Service, place: Place) -> str:
    """The systemd user unit of a service, each value written as systemd will read it back."""
    unit = _UnitValues(unit_name(service), place)
    # WorkingDirectory= first: a path the checkout cannot have is refused under the setting's plain name.
    home = unit.verbatim("WorkingDirectory=", place.home)
    env_file = unit.verbatim("EnvironmentFile=", place.env_file)
    exec_start = _exec_start(service, place, unit)
    variable = f"KB_MODEL={DEFAULT_MODEL}" if service.name == "mlx" else f"KB_HOME={place.home}"
    readme = f"{place.home}/README.md"
    # systemd ignores a documentation URL that is not ASCII: a real path is percent-encoded.
    readme = readme if place.has_specifiers else unit.specifiers("Documentation=", quote(readme))
    comment = "".join(f"# {line}\n" for line in service.comment.splitlines())
    after = " ".join(
        ["network-online.target"] * service.needs_network + [f"kb-{name}.service" for name in service.after]
    )
    lines = [
        "[Unit]",
        f"Description={unit.verbatim('Description=', service.description)}",
        f"Documentation=file://{readme}",
    ]
    if after:
        lines.append(f"After={after}")
    if service.needs_network:
        lines.append("Wants=network-online.target")
    lines += [
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={home}",
        f"Environment={unit.word('Environment=', variable)}",
        f"EnvironmentFile=-{env_file}",
        f"ExecStart={exec_start}",
        "Restart=on-failure",
        f"RestartSec={service.restart_s}",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={service.stop_timeout_s}",
        "",
        "[Install]",
        "WantedBy=default.target",
    ]
    return comment + "\n".join(lines) + "\n"


def _exec_start(service: Service, place: Place, unit: _UnitValues) -> str:
    """ExecStart=: the program and its arguments as words; the model is the unit's ${KB_MODEL} (the
    settings file may name another), expanded by systemd when it starts the program."""
    words = []
    for n, (template, argument) in enumerate(zip(service.command, command(service, place), strict=True)):
        if template == "{model}":
            words.append("${KB_MODEL}")
        elif n == 0:
            words.append(unit.program("ExecStart=", argument))
        else:  # systemd expands $NAME in an argument (not in the program's path): $$ is a dollar sign
            words.append(unit.word("ExecStart=", argument, dollars=True))
    return " ".join(words)


# Characters kb never writes into a service manager's file: C0 and C1 control characters, DEL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Where systemd splits or unquotes a word (its WHITESPACE and QUOTES, the escape, the command separator).
_NEEDS_QUOTES = re.compile(r"[\s\"'\\;]")


def _unwritable(value: str) -> str | None:
    """Why a value cannot be written into a service manager's file, or None."""
    if found := _CONTROL.search(value):
        return f"a control character ({found.group()!r})"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "bytes that are not UTF-8"
    return None


@dataclass(frozen=True)
class _UnitValues:
    """Values written into one unit file by systemd.syntax(7), each refused (naming its setting) when
    systemd could not read it back as it was."""

    unit: str
    place: Place

    def refuse(self, setting: str, value: str, why: str) -> ConfigError:
        return ConfigError(
            f"cannot write {setting} of {self.unit}: {value!r} {why}, which systemd cannot read back; "
            "move kb (or the file the setting names) to a path without it"
        )

    def specifiers(self, setting: str, value: str) -> str:
        """``value`` with each ``%`` doubled: systemd reads ``%x`` as a specifier in every setting kb
        writes (SHIPPED's paths keep theirs)."""
        if why := _unwritable(value):
            raise self.refuse(setting, value, f"holds {why}")
        return value if self.place.has_specifiers else value.replace("%", "%%")

    def verbatim(self, setting: str, value: str) -> str:
        """A setting systemd takes as the rest of its line (WorkingDirectory=, EnvironmentFile=): no quotes,
        no escapes, so no way to keep a space at either end or a backslash at the end (it joins the next line)."""
        if value != value.strip(" ") or value.endswith("\\"):
            raise self.refuse(setting, value, "has a space at an end or a backslash at its end")
        return self.specifiers(setting, value)

    def word(self, setting: str, value: str, *, dollars: bool = False) -> str:
        """One word of a list setting (Environment=, ExecStart=): in double quotes with C escapes when
        systemd would split or unquote it; with ``dollars`` (an argument of ExecStart=), each ``$`` doubled."""
        text = self.specifiers(setting, value)
        text = text.replace("$", "$$") if dollars else text
        if text and not _NEEDS_QUOTES.search(text):
            return text
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def program(self, setting: str, path: str) -> str:
        """The program of ExecStart=: systemd refuses one whose path holds a quote or a backslash, however
        quoted ("Executable name contains special characters"), and never expands its $."""
        if found := re.search(r"[\"'\\]", path):
            raise self.refuse(setting, path, f"is a program path holding {found.group()!r}")
        return self.word(setting, path)


def plist_dict(service: Service, place: Place, environment: dict[str, str]) -> dict[str, object]:
    """The launchd agent of a service (``environment``: the settings file's values)."""
    logs = Path(place.home) / "runs" / "logs"
    env = {**environment, "KB_HOME": place.home, "PATH": f"{place.bin}:/usr/bin:/bin:/usr/sbin:/sbin"}
    agent = {
        "Label": label(service),
        "ProgramArguments": command(service, place),
        "WorkingDirectory": place.home,
        "EnvironmentVariables": env,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # restarted after a failure, not after a clean stop
        "ThrottleInterval": service.restart_s,
        "ExitTimeOut": service.stop_timeout_s,
        "ProcessType": "Background" if service.name != "mlx" else "Interactive",
        "StandardOutPath": str(logs / f"{service.name}.out.log"),
        "StandardErrorPath": str(logs / f"{service.name}.err.log"),
    }
    for key, value in agent.items():  # plistlib escapes XML itself, but cannot write most control characters
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and (why := _unwritable(text)):
                raise ConfigError(
                    f"cannot write {key} of {label(service)}: {text!r} holds {why}; move kb to a path without it"
                )
    for variable, text in env.items():
        if why := _unwritable(text):  # the value is not shown: it may be the bot token
            raise ConfigError(
                f"cannot write EnvironmentVariables {variable} of {label(service)}: it holds {why}"
            )
    return agent


Run = Callable[[Sequence[str]], subprocess.CompletedProcess]


def run(argv: Sequence[str]) -> subprocess.CompletedProcess:
    """Run a service manager command, its output captured."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60)


@dataclass(frozen=True)
class Host:
    """The service manager of this machine and where its files go."""

    platform: str  # "darwin" or "linux"
    user_home: Path
    uid: int

    @property
    def folder(self) -> Path:
        if self.platform == "darwin":
            return self.user_home / "Library" / "LaunchAgents"
        return self.user_home / ".config" / "systemd" / "user"

    def file_of(self, service: Service) -> Path:
        if self.platform == "darwin":
            return self.folder / f"{label(service)}.plist"
        return self.folder / unit_name(service)


def install(services: Sequence[Service], place: Place, host: Host, *, run: Run = run) -> list[str]:
    """Write and start each service; one line per service saying what was done.

    Every file is rendered before any is written: a path a service manager cannot carry is refused
    (:class:`ConfigError`) with nothing installed."""
    environment = read_dotenv(Path(place.env_file), lenient=True)
    if host.platform == "darwin":
        rendered = [plistlib.dumps(plist_dict(service, place, environment)) for service in services]
    else:
        rendered = [unit_text(service, place).encode() for service in services]
    host.folder.mkdir(parents=True, exist_ok=True)
    Path(place.home, "runs", "logs").mkdir(parents=True, exist_ok=True)
    said = []
    for service, data in zip(services, rendered, strict=True):
        path = host.file_of(service)
        _write_private(path, data)
        if host.platform == "darwin":
            run(["launchctl", "bootout", f"gui/{host.uid}/{label(service)}"])  # an older one, if loaded
            done = run(["launchctl", "bootstrap", f"gui/{host.uid}", str(path)])
        else:
            run(["systemctl", "--user", "daemon-reload"])
            done = run(["systemctl", "--user", "enable", "--now", unit_name(service)])
        state = "started" if done.returncode == 0 else f"written, not started: {_first_line(done)}"
        said.append(f"{service.name:<7} {path} {state}")
    return said


def uninstall(services: Sequence[Service], host: Host, *, run: Run = run) -> list[str]:
    """Stop each service and remove its file."""
    said = []
    for service in services:
        path = host.file_of(service)
        if host.platform == "darwin":
            run(["launchctl", "bootout", f"gui/{host.uid}/{label(service)}"])
        else:
            run(["systemctl", "--user", "disable", "--now", unit_name(service)])
        existed = path.exists()
        path.unlink(missing_ok=True)
        said.append(f"{service.name:<7} {'removed' if existed else 'was not installed'} ({path})")
    if host.platform != "darwin":
        run(["systemctl", "--user", "daemon-reload"])
    return said


def status(services: Sequence[Service], host: Host, *, run: Run = run) -> list[str]:
    """One line per service: installed or not, running or not."""
    said = []
    for service in services:
        path = host.file_of(service)
        if not path.exists():
            said.append(f"{service.name:<7} not installed")
            continue
        if host.platform == "darwin":
            out = run(["launchctl", "print", f"gui/{host.uid}/{label(service)}"])
            found = re.search(r"^\s*state = (\S+)", out.stdout or "", re.MULTILINE)
            state = found.group(1) if out.returncode == 0 and found else "not loaded"
        else:
            out = run(["systemctl", "--user", "is-active", unit_name(service)])
            state = (out.stdout or "").strip() or "unknown"
        said.append(f"{service.name:<7} {state} ({path})")
    return said


def _write_private(path: Path, data: bytes) -> None:
    """Write a file readable by its owner only (it may carry the bot token), atomically."""
    write_atomic(path, data)  # its temporary file is made 0600 by mkstemp, and renamed with that mode


def _first_line(done: subprocess.CompletedProcess) -> str:
    text = (done.stderr or done.stdout or f"exit {done.returncode}").strip()
    return text.splitlines()[0][:200] if text else f"exit {done.returncode}"
