"""The command line in Traditional Chinese and in Thai, as a Taiwanese owner (``LANG=zh_TW.UTF-8``) and a
Thai owner (``KB_LANGUAGE=th``) use it: every line kb prints (kb doctor's checks with the model server down
and up, kb rm and kb restore, kb backup, its check and kb restore-backup, their refusals, kb status, kb
search and kb ls, usage errors kb raises itself, kb's own errors, the progress bars on a terminal) holds no English word
outside the names, units, paths, URLs and commands that stay as they are (tests/english.py decides)."""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import struct
import subprocess
import termios
from pathlib import Path

import pytest

from cli.main import main
from knowledge.words.catalog import Words
from tests.conftest import SAFE_ENV, subprocess_env
from tests.english import english_words
from tests.fake_llm import FakeLLM, ThreadedFakeLLM, free_port
from tests.terminal import visible

TITLE = "押金與租約"
NOTE = f"# {TITLE}\n\n押金是兩個月的租金，退租後三十天內退還。\n\nเงินมัดจำสองเดือน คืนภายในสามสิบวัน\n"
# How each owner's terminal says its language: the locale for the Taiwanese owner, the setting for the Thai
OWNERS = {
    "zh-Hant": {"LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_TW.UTF-8"},
    "th": {"LC_ALL": "", "LC_MESSAGES": "", "LANG": "C.UTF-8", "KB_LANGUAGE": "th"},
}


class Owner:
    """kb run in this process as the owner's terminal starts it (their locale or KB_LANGUAGE); every
    command's output kept (``said``: the command line and what it printed on stdout and stderr)."""

    def __init__(self, home: Path, language: str, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("HF_HUB_OFFLINE", SAFE_ENV["HF_HUB_OFFLINE"])  # the hub reads it from the process
        monkeypatch.setenv("HF_HUB_VERBOSITY", "error")
        self.home, self.language, self.words = home, language, Words(language)
        self.said: list[tuple[str, str]] = []

    def __call__(self, *args: str, err=None, **env: str) -> subprocess.CompletedProcess:
        out, errors = io.StringIO(), err or io.StringIO()
        argv = ["--home", str(self.home), *args]
        code = main(argv, stdout=out, stderr=errors, env=subprocess_env(**OWNERS[self.language], **env))
        shown = out.getvalue() + (errors.getvalue() if err is None else "")
        self.said.append((" ".join(args), shown))
        return subprocess.CompletedProcess(
            ["kb", *argv], code, out.getvalue(), "" if err else errors.getvalue()
        )

    def leaks(self) -> dict[str, list[str]]:
        """The English words in what each command printed (none is the test)."""
        return {cmd: found for cmd, text in self.said if (found := english_words(text, quoted=[TITLE]))}


@pytest.mark.parametrize("language", ["zh-Hant", "th"])
def test_a_taiwanese_and_a_thai_owner_read_the_command_line_in_their_language(
    tmp_path, monkeypatch, language
):
    kb, w = Owner(tmp_path / "kb", language, monkeypatch), Words(language)
    note = tmp_path / "押金.md"
    note.write_text(NOTE, encoding="utf-8")
    folder = tmp_path / "筆記"
    folder.mkdir()
    (folder / "ups.md").write_text("# 不斷電系統\n\nUPS 電池 2026 年 3 月換過。\n", encoding="utf-8")

    assert kb("search", "押金").returncode == 1  # nothing indexed yet
    assert kb("status", KB_SEARCH_K="many").returncode == 2  # a setting kb cannot use
    ingested = kb("ingest", str(note))
    assert ingested.returncode == 0 and w.tr("indexed") in ingested.stdout
    assert kb("sources", "add", str(folder), "--name", "home-notes").returncode == 0
    assert kb("ingest", str(tmp_path / "nowhere.md")).returncode == 2

    down = kb("doctor", KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_TELEGRAM_TOKEN="123:abc")
    assert down.returncode == 1
    assert (
        w.tr("model server") in down.stdout and w.tr("FAIL") in down.stdout and "mlx_lm.server" in down.stdout
    )
    with ThreadedFakeLLM(FakeLLM()) as server:
        up = kb("doctor", KB_LLM_URL=server.base_url)
        kb("status", KB_LLM_URL=server.base_url)
    assert (
        up.returncode == 0
        and w.tr("{url} answers; serving {models}", url=server.base_url, models="fake-model") in up.stdout
    )
    assert w.tr("source {name}", name="home-notes") in up.stdout

    found = kb("search", "押金")
    assert found.returncode == 0 and TITLE in found.stdout and w.tr("the documents answer it") in found.stdout
    assert kb("search", "-k", "0", "押金").returncode == 2  # not quietly the default count
    listed = kb("ls")
    doc_id = next(line.split()[0] for line in listed.stdout.splitlines() if TITLE in line)
    kb("ls", "不存在的字")
    assert kb("sources", "rm").returncode == 2

    archive = tmp_path / "備份.tar.gz"
    made = kb("backup", str(archive))
    assert made.returncode == 0 and archive.is_file()
    assert kb("backup", "--verify", str(archive)).returncode == 0
    assert kb("backup", str(archive)).returncode == 1  # never over an existing archive
    assert kb("backup", "--verify", str(note)).returncode == 1  # not a backup
    restored = kb("restore-backup", str(archive), "--home", str(tmp_path / "restored"))
    assert restored.returncode == 0 and (tmp_path / "restored" / "knowledge").is_dir()
    assert kb("restore-backup", str(archive), "--home", str(tmp_path / "restored")).returncode == 1

    assert w.tr("the trash is empty") in kb("restore").stdout
    removed = kb("rm", doc_id)
    assert removed.returncode == 0 and "kb restore" in removed.stdout
    trash_id = re.search(r"kb restore ([\w-]+)", removed.stdout).group(1)
    assert kb("rm", "no-such-document").returncode == 1
    assert trash_id in kb("restore").stdout
    assert kb("restore", trash_id).returncode == 0
    assert kb("restore", "no-such-entry").returncode == 1

    assert kb.leaks() == {}
    assert len(kb.said) == 25 and all(text.strip() for _, text in kb.said)  # every command said something


def on_terminal(kb: Owner, *args: str) -> str:
    """What a command draws on its terminal's stderr (a pseudo-terminal: the progress bar is on)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal 100 columns wide
    term = open(slave, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        assert kb(*args, err=term).returncode == 0
        term.flush()
        drawn = b""
        while select.select([master], [], [], 0.3)[0]:
            drawn += os.read(master, 65536)
    finally:
        term.close()
        os.close(master)
    return drawn.decode("utf-8", "replace")


@pytest.mark.parametrize("language", ["zh-Hant", "th"])
def test_the_progress_bars_are_labelled_in_the_owners_language(tmp_path, monkeypatch, language):
    kb, w = Owner(tmp_path / "kb", language, monkeypatch), Words(language)
    notes = tmp_path / "筆記"
    notes.mkdir()
    for n in range(3):
        (notes / f"第{n}篇.md").write_text(f"# 第 {n} 篇\n\n押金筆記 {n}。\n", encoding="utf-8")
    drawn = {
        "ingest": on_terminal(kb, "ingest", str(notes)),
        "reindex": on_terminal(kb, "reindex"),
        "backup": on_terminal(kb, "backup", str(tmp_path / "備份")),
    }
    labels = {
        "ingest": ("ingest", "files"),
        "reindex": ("reindex", "documents"),
        "backup": ("backup", "files"),
    }
    for job, text in drawn.items():
        label, unit = (w.tr(word) for word in labels[job])
        counted = re.search(
            rf"\d+/(\d+) {unit}", text
        )  # every file or document counted, in the owner's words
        assert w.tr("{name}: {what}", name=label, what="") in text and counted, (job, text)
        assert int(counted.group(1)) >= 3, (job, text)
        assert english_words(visible(text)) == [], (job, visible(text))
