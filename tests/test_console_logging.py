"""What the console shows of the log in a quiet session (one short line per distinct warning) and what the file keeps."""

import fcntl
import io
import json
import logging
import os
import select
import struct
import termios

import pytest
import structlog

from knowledge.logs import WarnOnce, brief_line, configure_logging, kept_logging


@pytest.mark.parametrize(
    ("event", "width", "line"),
    [
        ({"event": "tokenizer.fallback", "level": "warning", "reason": "no tokenizer.json", "counter": "approx-v1"},
         100, "kb warning: tokenizer.fallback: no tokenizer.json"),
        ({"event": "ingest.failed", "level": "warning", "file": "a.pdf", "stage": "convert", "error": "damaged"},
         100, "kb warning: ingest.failed a.pdf: damaged"),
        ({"event": "ask.degraded", "level": "warning", "error": "not\n  reachable\tat all"},
         100, "kb warning: ask.degraded: not reachable at all"),
        ({"event": "ask.degraded", "level": "warning", "error": "x" * 200},
         60, "kb warning: ask.degraded: " + "x" * 33 + "…"),
        ({"event": "daemon.inbox_replaced", "level": "error"}, 100, "kb error: daemon.inbox_replaced"),
    ],
)  # fmt: skip
def test_brief_line(event, width, line):
    assert brief_line(event, width=width) == line
    assert len(brief_line(event, width=width)) <= width


@pytest.fixture
def logging_restored():
    """Put the process's logging back as it was: other tests must not write to this test's files."""
    with kept_logging():
        yield


def test_configuring_logs_never_makes_a_library_louder(logging_restored):
    logging.getLogger("pypdf").setLevel(logging.CRITICAL)  # as the PDF converter sets it
    configure_logging(None, console=io.StringIO())
    assert logging.getLogger("pypdf").level == logging.CRITICAL
    assert logging.getLogger("watchdog").level == logging.WARNING


def test_a_quiet_console_shows_each_distinct_warning_once_and_the_file_keeps_everything(
    tmp_path, logging_restored
):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    console = open(slave, "w", encoding="utf-8")  # noqa: SIM115 - closed below, after the handlers
    log_path = tmp_path / "logs" / "kb.jsonl"
    try:
        configure_logging(log_path, console_level="warning", console=console, once=WarnOnce())
        log = structlog.get_logger()
        log.info("ask.answered", passages=2)
        for _ in range(3):
            log.warning("ask.degraded", error="model server not reachable")
        log.warning("ingest.failed", file="a.pdf", error="damaged")
        log.warning("ingest.failed", file="b.pdf", error="damaged")
        console.flush()
        shown = b""
        while select.select([master], [], [], 0.5)[0]:
            shown += os.read(master, 65536)
    finally:
        configure_logging(None, console=io.StringIO())  # let go of the terminal before closing it
        console.close()
        os.close(master)
    assert shown.decode().splitlines() == [
        "kb warning: ask.degraded: model server not reachable",
        "kb warning: ingest.failed a.pdf: damaged",
        "kb warning: ingest.failed b.pdf: damaged",
    ]
    events = [json.loads(line)["event"] for line in log_path.read_text().splitlines()]
    assert events == [
        "ask.answered",
        "ask.degraded",
        "ask.degraded",
        "ask.degraded",
        "ingest.failed",
        "ingest.failed",
    ]


def test_library_chatter_stays_out_of_the_log_file_too(tmp_path):
    import logging

    import structlog

    from knowledge.logs import configure_logging

    path = tmp_path / "kb.jsonl"
    configure_logging(path, console=io.StringIO())
    logging.getLogger("httpcore.http11").debug("receive_response_headers.started request=<Request [b'POST']>")
    logging.getLogger("hpack.hpack").debug("Decoded 0, consumed 1 bytes")
    logging.getLogger("markdown_it.rules_block.code").debug("entering code: StateBlock(line=0)")
    # a library no list names (uvicorn's own loggers keep their records to themselves once it has run)
    logging.getLogger("rarelib.server").info("Waiting for application startup.")
    logging.getLogger("rarelib.server").warning("Invalid HTTP request received.")
    structlog.get_logger().debug("embed.batch", chunks=2)
    text = path.read_text()
    assert "embed.batch" in text and "receive_response_headers" not in text and "hpack" not in text
    assert "entering code" not in text and "Waiting for application" not in text  # any library, listed or not
    assert "Invalid HTTP request received" in text  # a library's warning is kept


def test_the_log_is_rotated_even_while_two_processes_write_it(tmp_path):
    import logging

    from knowledge.logs import SharedRotatingFileHandler

    path = tmp_path / "kb.jsonl"
    first, second = SharedRotatingFileHandler(path), SharedRotatingFileHandler(path)  # two processes
    for handler in (first, second):
        handler.maxBytes = 400
        handler.setFormatter(logging.Formatter("%(message)s"))

    def write(handler, text):
        handler.emit(logging.LogRecord("kb", logging.INFO, "", 0, text, None, None))

    for n in range(20):
        write(first, f"first {n} " + "x" * 40)
    write(second, "second, after the first rotated the file")
    current = path.read_text()
    assert "second, after the first rotated" in current  # not lost into the renamed file
    assert (tmp_path / "kb.jsonl.1").is_file() and len(list(tmp_path.glob("kb.jsonl.*"))) <= 5
    assert all(p.stat().st_size <= 500 for p in tmp_path.glob("kb.jsonl*"))
    first.close()
    second.close()


def test_a_library_thread_that_dies_is_a_log_record_not_a_traceback_on_the_chat(tmp_path, monkeypatch):
    import json
    import threading

    import structlog

    from knowledge.logs import configure_logging

    monkeypatch.setattr(threading, "excepthook", threading.excepthook)  # put back after the test
    path, console = tmp_path / "kb.jsonl", io.StringIO()
    configure_logging(path, console=console)

    def dies() -> None:
        raise RecursionError("maximum recursion depth exceeded")

    thread = threading.Thread(target=dies, name="inotify-reader")
    thread.start()
    thread.join()
    structlog.reset_defaults()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    crash = next(r for r in records if r["event"] == "thread.crashed")
    assert crash["thread"] == "inotify-reader" and "RecursionError" in crash["error"]
    assert "Traceback" in crash["exception"]
