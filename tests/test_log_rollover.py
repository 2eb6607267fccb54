"""The shared log, rotated while several kb processes write it: every line kept once, whole, in order."""

import logging
import re
import subprocess
import sys
import time
from pathlib import Path

from knowledge.logs import SharedRotatingFileHandler

ROOT = Path(__file__).resolve().parents[1]
WRITERS, LINES, MAX_BYTES, BACKUPS = 4, 400, 4096, 2000
# A writer: waits for the others, then logs numbered lines, every 40th longer than the file may grow
# (and than a write buffer), through the handler kb uses.
WRITER = f"""
import logging, sys, time
from pathlib import Path
from knowledge.logs import SharedRotatingFileHandler
path, who, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
handler = SharedRotatingFileHandler(path)
handler.maxBytes, handler.backupCount = {MAX_BYTES}, {BACKUPS}
handler.setFormatter(logging.Formatter("%(message)s"))
log = logging.getLogger("writer")
log.addHandler(handler)
log.propagate = False
deadline = time.monotonic() + 30
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.005)
for n in range({LINES}):
    log.warning("%s %05d %s", who, n, "x" * (10000 if n % 40 == 0 else 40 + n % 30))
handler.close()
"""


def test_several_processes_rotating_the_log_lose_no_line_and_split_none(tmp_path):
    path, go = tmp_path / "kb.jsonl", tmp_path / "go"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{w}", str(go)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(WRITERS)
    ]  # fmt: skip
    time.sleep(0.5)  # the interpreters start; they all begin writing together
    go.touch()
    stderr = []
    try:
        for writer in writers:
            stderr.append(writer.communicate(timeout=120)[1])
    finally:
        for writer in writers:
            writer.kill()  # only left running if the test failed
    assert all(writer.returncode == 0 for writer in writers), stderr
    assert stderr == [""] * WRITERS  # no "--- Logging error ---", no "kb: cannot write the log"

    backups = sorted(tmp_path.glob("kb.jsonl.[0-9]*"), key=lambda p: int(p.suffix[1:]), reverse=True)
    assert len(backups) < BACKUPS  # enough backups to hold everything: none was dropped
    assert [int(p.suffix[1:]) for p in backups] == list(range(len(backups), 0, -1))
    assert len(backups) >= 20  # rotated many times over
    seen: dict[str, list[int]] = {f"w{w}": [] for w in range(WRITERS)}
    for file in [*backups, path]:  # oldest first
        lines = file.read_text(encoding="utf-8").splitlines()
        assert lines, f"{file.name} is empty: the log was rotated twice in a row"
        assert file.stat().st_size <= MAX_BYTES or len(lines) == 1, file.name  # only a line too long alone
        for line in lines:
            found = re.fullmatch(r"(w\d) (\d{5}) (x+)", line)
            assert found, f"a partial or interleaved line in {file.name}: {line[:80]!r}…"
            who, n, filler = found[1], int(found[2]), found[3]
            assert len(filler) == (10000 if n % 40 == 0 else 40 + n % 30), line[:80]
            seen[who].append(n)
    for who, numbers in seen.items():
        assert numbers == list(range(LINES)), f"{who}: lines lost, repeated or out of order"


def test_a_log_that_cannot_be_written_is_said_once_and_written_again_when_it_can(tmp_path, capfd):
    path = tmp_path / "kb.jsonl"
    path.symlink_to("/dev/full")  # every write fails: ENOSPC, as on a full disk
    handler = SharedRotatingFileHandler(path)
    handler.setFormatter(logging.Formatter("%(message)s"))

    def write(text: str) -> None:
        handler.handle(logging.LogRecord("kb", logging.INFO, "", 0, text, None, None))

    try:
        write("lost 1")
        write("lost 2")
        said = capfd.readouterr().err
        assert said.count(f"kb: cannot write the log {path}") == 1 and "Logging error" not in said
        assert not list(tmp_path.glob("kb.jsonl.*[0-9]"))  # a device is never rotated
        path.unlink()
        path.touch()  # room again: a real file
        write("kept")
        write("kept too")
        assert path.read_text() == "kept\nkept too\n"
        assert capfd.readouterr().err == ""
    finally:
        handler.close()
