"""Progress bars: drawn on a terminal, nothing on a pipe; printed lines and log records never tear the bar."""

import fcntl
import io
import logging
import os
import select
import struct
import termios

from cli.progress import Progress
from tests.terminal import visible


def drain(fd: int) -> str:
    out = b""
    while select.select([fd], [], [], 0.3)[0]:
        out += os.read(fd, 65536)
    return out.decode()


def test_nothing_but_the_printed_lines_when_not_on_a_terminal():
    stream, out = io.StringIO(), io.StringIO()
    with Progress(3, label="ingest", unit="files", stream=stream) as bar:
        assert not bar.is_on
        for n in range(3):
            bar.describe(f"f{n}")
            bar.advance()
            bar.print(f"line {n}", out=out)
    assert stream.getvalue() == "" and out.getvalue() == "line 0\nline 1\nline 2\n"


def test_a_bar_on_a_terminal_lifts_itself_for_lines_and_log_records():
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    term = open(slave, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    root = logging.getLogger()
    console = logging.StreamHandler(term)
    console.setLevel(logging.WARNING)
    root.addHandler(console)
    try:
        with Progress(2, label="reindex", unit="documents", stream=term) as bar:
            assert bar.is_on and console not in root.handlers  # log records go around the bar meanwhile
            bar.advance()
            logging.getLogger("kb.test").warning("disk nearly full")
            logging.getLogger("kb.test").info("not for the console")
            bar.print("failed     x.pdf", out=term)
            bar.advance()
        assert console in root.handlers
        drawn = drain(master)
    finally:
        root.removeHandler(console)
        term.close()
        os.close(master)
    assert "reindex:" in drawn and "0/2 documents" in drawn
    lines = visible(drawn).splitlines()  # each line as left after the redraws
    assert "disk nearly full" in lines and "failed     x.pdf" in lines
    assert "not for the console" not in drawn
