"""``/open N`` in kb chat on a pseudo-terminal, read as a person reads it: the passage the last answer cites
as [N], then where its document is opened (an Obsidian vault's note by its obsidian:// link and the file's
path with the lines, a plain folder's file by its path, an inbox file by its original), in the terminal's
language. Real folders added with kb sources add; the model server is down (the passages are the answer)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.store.index import Index
from tests.conftest import make_settings, subprocess_env
from tests.fake_llm import free_port
from tests.test_scope import kb_with
from tests.test_terminal_session import chat, reply_after
from tests.test_web_duplicates import import_page

HERON = (
    "---\ncreated: 2024-03-01\n---\n\n# Heron notes\n\nSpring came late.\n\n"
    "The grey heron nests by the mill pond in March.\n"
)
INBOX = {"geese.md": "# Geese\n\nThe geese rest by the mill pond in autumn.\n"}
SOURCES = {
    "vault": {"Birds/heron notes.md": HERON},
    "docs": {"pond.md": "# Pond\n\nThe mill pond is cleaned when the heron has gone.\n"},
}
QUESTION = "when does the grey heron nest by the mill pond"
URL = "https://birds.example/herons"
PAGE = "Grey herons nest in colonies by a pond or a mill race from February."


@pytest.fixture
def home(tmp_path: Path, run_kb) -> Path:
    home = kb_with(tmp_path, run_kb, INBOX, SOURCES)
    (tmp_path / "vault" / ".obsidian").mkdir()  # the vault is an Obsidian vault
    settings = make_settings(home)
    with Index(settings.index_path) as index:  # a page imported from the web, as kb import-url leaves it
        import_page(Ingestor(settings, index, ApproxCounter()), settings, "herons.html", PAGE, URL)
    return home


def numbers(reply: str) -> dict[str, int]:
    """The sources of an answer as the chat lists them: title → its number."""
    return {m[2]: int(m[1]) for m in re.finditer(r"^\[(\d+)\] (.+?) — ", reply, re.MULTILINE)}


def env(**more: str) -> dict[str, str]:
    # every passage passes the gate (KB_MIN_RELEVANCE=0), so the reply without the model cites one of each kind
    return subprocess_env(
        KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_WEB_SEARCH="off", KB_MIN_RELEVANCE="0", **more
    )


def test_open_n_shows_the_passage_and_where_its_file_is_opened(tmp_path, home):
    # First what the cited numbers are (the ranking decides them), then each opened in one chat.
    first = numbers(reply_after(chat(home, env(), QUESTION), QUESTION))
    assert {"Heron notes", "Pond", "Geese", "Lake Quillan"} <= set(first)  # the page has its own title
    heron, pond, geese, web = first["Heron notes"], first["Pond"], first["Geese"], first["Lake Quillan"]
    missing = max(first.values()) + 1
    screen = chat(home, env(), "/open 9", QUESTION, f"/open {heron}", f"/open {pond}", f"/open {geese}",
                  f"/open {web}", f"/open {missing}", "/open", "/help")  # fmt: skip
    assert "There is no answer to open a source of yet: ask a question first, then /open N." in reply_after(
        screen, "kb> /open 9"
    )
    vault = reply_after(screen, f"kb> /open {heron}")
    assert f"[{heron}] Heron notes — vault:Birds/heron notes.md:" in vault
    assert "The grey heron nests by the mill pond in March." in vault and "created:" not in vault
    assert "Open it in Obsidian: obsidian://open?vault=vault&file=Birds%2Fheron%20notes.md" in vault
    lines = re.search(r"notes\.md:(\d+)-(\d+)", vault)
    assert lines is not None
    file = tmp_path / "vault" / "Birds" / "heron notes.md"
    assert f"The file on your computer: {file}:{lines[1]}-{lines[2]}" in vault
    cited = file.read_text().splitlines()[int(lines[1]) - 1 : int(lines[2])]
    assert "The grey heron nests by the mill pond in March." in cited  # the lines are the file's
    plain = reply_after(screen, f"kb> /open {pond}")
    assert "The mill pond is cleaned when the heron has gone." in plain and "obsidian://" not in plain
    assert f"The file on your computer: {tmp_path / 'docs' / 'pond.md'}:" in plain
    inbox = reply_after(screen, f"kb> /open {geese}")
    assert "The geese rest by the mill pond in autumn." in inbox
    assert f"The original file: {home / 'knowledge' / 'inbox' / 'processed' / 'geese.md'}" in inbox
    page = reply_after(screen, f"kb> /open {web}")
    assert PAGE in page and f"Original: {URL}" in page and "The file on your computer" not in page
    said = reply_after(screen, f"kb> /open {missing}")
    assert f"The last answer has no source [{missing}]; its sources are [1]," in said
    assert "usage: /open N" in reply_after(screen, "kb> /open\n")
    assert "/open N    the passage the last answer cites as [N]" in reply_after(screen, "kb> /help")


@pytest.mark.parametrize(
    ("language", "obsidian", "file", "help_line"),  # a full-width colon needs no space after it
    [
        (
            "zh_TW.UTF-8",
            "在 Obsidian 中開啟：obsidian://",
            "你電腦上的檔案：/",
            "上一個回答以 [N] 註明的段落",
        ),
        (
            "th_TH.UTF-8",
            "เปิดใน Obsidian: obsidian://",
            "ไฟล์บนคอมพิวเตอร์ของคุณ: /",
            "ข้อความที่คำตอบล่าสุดอ้างอิงเป็น [N]",
        ),
    ],
)
def test_open_speaks_the_terminals_language(home, language, obsidian, file, help_line):
    first = numbers(reply_after(chat(home, env(), QUESTION), QUESTION))
    heron = first["Heron notes"]
    screen = chat(home, env(LANG=language, LC_ALL=""), "/open 9", QUESTION, f"/open {heron}", "/help")
    assert "/open N" in reply_after(screen, "kb> /open 9") and "ask a question" not in screen
    opened = reply_after(screen, f"kb> /open {heron}")
    assert "obsidian://open?vault=vault&file=Birds%2Fheron%20notes.md" in opened
    assert "Open it in Obsidian" not in opened and "The file on your computer" not in opened
    assert obsidian in opened and file in opened
    assert help_line in reply_after(screen, "kb> /help")
