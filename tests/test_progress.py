"""Progress bars: drawn on a terminal, a line a minute on a pipe for a long job; lines and log records never tear the bar."""

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


def test_a_long_job_on_a_pipe_says_how_far_it_is_once_a_minute_in_the_readers_language():
    from knowledge.words.catalog import Words

    now, stream = [0.0], io.StringIO()
    with Progress(7143, label="embed", unit="chunks", stream=stream, clock=lambda: now[0]) as bar:
        for _ in range(10):
            now[0] += 15.0  # ten batches of 128, a quarter of a minute each
            bar.advance(128)
    assert stream.getvalue().splitlines() == [
        "embed: 512/7,143 chunks (7%)",
        "embed: 1,024/7,143 chunks (14%)",
    ]
    thai, now[0] = io.StringIO(), 0.0
    with Progress(
        300, label="ฝังเวกเตอร์", unit="ส่วน", stream=thai, words=Words("th"), clock=lambda: now[0]
    ) as bar:
        now[0] = 61.0
        bar.advance(30)
    assert thai.getvalue().startswith("ฝังเวกเตอร์") and "30/300 ส่วน (10%)" in thai.getvalue()
    short = io.StringIO()
    with Progress(199, label="embed", unit="chunks", stream=short, clock=lambda: now[0]) as bar:
        now[0] += 3600.0
        bar.advance(199)
    assert short.getvalue() == ""  # a short job says nothing beside its own summary


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
