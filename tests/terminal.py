"""kb on a pseudo-terminal, as a person runs it: stdin, stdout and stderr are one terminal.

``Terminal`` starts a command on a fresh pty, collects everything it draws (escape sequences
removed, so tests read what a person reads), and types lines into it.
"""

from __future__ import annotations

import codecs
import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

# Run a command in a new session whose controlling terminal is stdin (as a login shell's is).
# Ctrl-C and Ctrl-\\ back to their defaults, as a login shell has them (a test run started as a
# background job of a script inherits them ignored).
_TAKE_THE_TERMINAL = (
    "import fcntl, os, signal, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGQUIT, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)

# Cursor movement, colours, bracketed paste and the like.
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]")


def visible(raw: str) -> str:
    """What a person reads at the end: control sequences dropped, a line redrawn after ``\\r`` overwritten."""
    return "\n".join(_overwrite(line) for line in _ESCAPES.sub("", raw).split("\n"))


def _overwrite(line: str) -> str:
    shown: list[str] = []
    for part in line.split("\r"):  # each part is written again from the first column
        shown[: len(part)] = part
    return "".join(shown).rstrip()


class Terminal:
    """A kb command on its own pseudo-terminal of ``columns`` x ``rows``."""

    def __init__(
        self,
        home: Path,
        *args: str,
        env: dict[str, str],
        columns: int = 160,
        rows: int = 40,
        command: list[str] | None = None,
    ) -> None:
        """``command`` instead of ``kb --home HOME ARGS``. The terminal is the command's controlling
        terminal, as a shell's is: Ctrl-C (:meth:`interrupt`) signals its foreground process group."""
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

        command = command or [sys.executable, "-m", "cli", "--home", str(home), *args]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _TAKE_THE_TERMINAL, *command],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm", "COLUMNS": str(columns)},
        )
        os.close(slave)
        self.master = master
        self.raw = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @property
    def screen(self) -> str:
        """Everything drawn so far, as the terminal shows it now (a bar that was cleared is gone)."""
        return visible(self.raw)

    @property
    def drawn(self) -> str:
        """Everything drawn so far, redrawn lines included (to see that a progress bar was there)."""
        return _ESCAPES.sub("", self.raw)

    def wait_for(self, is_there: Callable[[str], bool] | str, *, timeout_s: float = 90.0) -> str:
        """Read until ``is_there(screen)`` (or the text appears); fails with the screen when it never does."""
        check = (lambda screen: is_there in screen) if isinstance(is_there, str) else is_there
        deadline = time.monotonic() + timeout_s
        while not check(self.screen):
            if time.monotonic() > deadline or not self._read(timeout_s=0.5) and self.proc.poll() is not None:
                raise AssertionError(f"never saw what was expected; the screen:\n{self.screen}")
        return self.screen

    def type(self, line: str) -> None:
        """Type a line and press Enter."""
        os.write(self.master, (line + "\r").encode())

    def interrupt(self) -> None:
        """Press Ctrl-C."""
        os.write(self.master, b"\x03")

    def finish(self, *, timeout_s: float = 60.0) -> int:
        """Read until the command exits; its exit status."""
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(timeout_s=0.2)
        while self._read(timeout_s=0.1):
            pass
        return self.proc.wait(timeout=max(deadline - time.monotonic(), 1))

    def close(self) -> None:
        """Stop the command if it still runs, and close the terminal."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self.master)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, *, timeout_s: float) -> bool:
        if not select.select([self.master], [], [], timeout_s)[0]:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the command closed its end of the terminal
            return False
        self.raw += self._decoder.decode(data)
        return bool(data)
