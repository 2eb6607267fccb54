"""The first minutes in a terminal: kb run / kb chat / kb ingest on a pseudo-terminal, read as a person reads them."""

import json
import os
import re
import time

import pytest

from tests.conftest import ingest_texts, make_settings, subprocess_env
from tests.fake_llm import FakeLLM, Step, ThreadedFakeLLM, answer, free_port
from tests.terminal import Terminal

NOTE = "# Zebrafish\n\nThe zebrafish sleeps at noon in the shallow pond.\n"
# Lines of the console renderer ("[info     ] ask.answered …") or event names; none belong in a quiet chat.
LOG_LINE = re.compile(r"\[(debug|info|warning|error)\s*\]|\b(ask|ingest|daemon|web|bot|index)\.[a-z_]+")


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"zebrafish.md": NOTE})
    return home


def prompts(n: int):
    """The chat has shown its prompt ``n`` times."""
    return lambda screen: len(re.findall(r"^kb>", screen, re.MULTILINE)) >= n


def chat(home, env: dict[str, str], *questions: str) -> str:
    """Ask questions in ``kb chat`` on a terminal, then /quit; the screen as the person left it."""
    with Terminal(home, "chat", env=env) as term:
        term.wait_for(prompts(1))
        for n, question in enumerate(questions, 2):
            term.type(question)
            term.wait_for(prompts(n))
        term.type("/quit")
        assert term.finish() == 0
    return term.screen


def reply_after(screen: str, question: str) -> str:
    """What was printed between a question and the next prompt."""
    return re.split(r"^kb>", screen.split(question, 1)[1], maxsplit=1, flags=re.MULTILINE)[0]


def test_chat_opens_with_a_summary_and_shows_a_dead_model_server_once(home):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    env = subprocess_env(KB_LLM_URL=dead, KB_WEB_SEARCH="off")
    screen = chat(home, env, "when does the zebrafish sleep", "where does the zebrafish sleep at noon")
    summary = screen.split("Ask a question")[0].splitlines()
    assert f"knowledge base  {home}: 1 document, 1 chunk (search by words only: KB_EMBED=off)" in summary
    start_hint = re.compile(
        rf"model server    not reachable at {re.escape(dead)} — start it with: \S*/mlx_lm\.server --model .*"
        r"""--chat-template-args '\{"enable_thinking": false\}'"""
    )
    assert any(start_hint.match(line) for line in summary), summary
    assert any(line.startswith("tokenizer       approximate (approx-v1)") for line in summary)
    assert "web search      off (KB_WEB_SEARCH)" in summary
    assert f"inbox           {home / 'knowledge' / 'inbox'} (drop files here to add them)" in summary
    assert len([line for line in summary if not line.startswith("kb warning:")]) == 5
    for question in ("when does the zebrafish sleep", "where does the zebrafish sleep at noon"):
        reply = reply_after(screen, question)
        assert "(model unavailable)" in reply and "sleeps at noon" in reply and "raw/zebrafish-" in reply
    warnings = [line for line in screen.splitlines() if line.startswith("kb warning:")]
    dead_server = [line for line in warnings if "ask.degraded" in line]
    assert len(dead_server) == 1 and "not reachable" in dead_server[0]
    assert len(dead_server[0]) <= 160  # one terminal line, never wrapped
    assert len(warnings) == len(set(warnings))  # each distinct warning once
    assert "[info" not in screen and "ask.no_evidence" not in screen


def test_run_answers_without_log_lines_while_the_daemon_indexes(home):
    settings = make_settings(home)
    with ThreadedFakeLLM(FakeLLM(script=[answer("It sleeps at noon [1].")])) as fake:
        env = subprocess_env(KB_LLM_URL=fake.base_url, KB_SETTLE_S="0.1", KB_WEB_SEARCH="off")
        with Terminal(home, "run", env=env) as term:
            screen = term.wait_for(prompts(1))
            assert f"model server    reachable at {fake.base_url}" in screen
            (settings.inbox / "heron.md").write_text("# Heron\n\nThe grey heron fishes at dawn.\n")
            # The daemon in this process indexes the dropped file; /status counts it.
            deadline, n = time.monotonic() + 90, 1
            while time.monotonic() < deadline and "2 documents" not in screen.rsplit("/status", 1)[-1]:
                time.sleep(0.3)
                term.type("/status")
                n += 1
                screen = term.wait_for(prompts(n))
            assert (
                f"knowledge base  {home}: 2 documents, 2 chunks (search by words only: KB_EMBED=off)"
                in screen
            )
            term.type("when does the zebrafish sleep")
            term.wait_for(lambda s: "It sleeps at noon [1]." in s and s.rstrip().endswith("kb>"))
            term.type("/quit")
            assert term.finish() == 0
    screen = term.screen
    reply = reply_after(screen, "when does the zebrafish sleep")
    assert reply.strip().startswith("It sleeps at noon [1].") and "[1] Zebrafish — raw/zebrafish-" in reply
    warnings = [line for line in screen.splitlines() if line.startswith("kb warning:")]
    assert [w.split(":")[1].strip() for w in warnings] == ["tokenizer.fallback"]  # no tokenizer.json here
    assert not LOG_LINE.search(screen), screen
    # The log file still has everything the console left out.
    events = [json.loads(line)["event"] for line in settings.log_path.read_text().splitlines()]
    assert "ingest.done" in events and "ask.answered" in events


def test_kb_log_level_still_brings_the_log_lines_back(home):
    with ThreadedFakeLLM(FakeLLM(script=[answer("It sleeps at noon [1].")])) as fake:
        env = subprocess_env(KB_LLM_URL=fake.base_url, KB_WEB_SEARCH="off", KB_LOG_LEVEL="info")
        screen = chat(home, env, "when does the zebrafish sleep")
    assert re.search(r"\[info\s*\] ask\.answered", screen)


@pytest.mark.parametrize(
    "content", ["", "  \n\t ", "<think>The user asks about zebrafish; the passage says noon.</think>\n"]
)
def test_an_empty_answer_shows_the_passages_and_says_the_model_returned_nothing(home, content):
    with ThreadedFakeLLM(FakeLLM(script=[answer(content)])) as fake:
        env = subprocess_env(KB_LLM_URL=fake.base_url, KB_WEB_SEARCH="off")
        screen = chat(home, env, "when does the zebrafish sleep")
    reply = reply_after(screen, "when does the zebrafish sleep")
    assert "The model returned an empty answer" in reply and "sleeps at noon in the shallow pond" in reply
    assert "[1] Zebrafish — raw/zebrafish-" in reply and "nothing on this" not in reply


def test_ingest_shows_progress_on_a_terminal_and_a_summary(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for n in range(6):
        (src / f"note{n}.md").write_text(f"# Note {n}\n\nThe number of this note is {n}.\n")
    (src / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf\n")
    home = tmp_path / "kb"
    with Terminal(home, "ingest", str(src), env=subprocess_env()) as term:
        assert term.finish() == 1
    screen = term.screen
    assert re.search(r"ingest: +\d+%\|.*\| \d/7 files", term.drawn)  # tqdm's bar, drawn on stderr
    assert re.search(r"^6 indexed, 1 failed in \d+\.\d s$", screen, re.MULTILINE)
    assert re.search(
        r"^failed     broken\.pdf: ", screen, re.MULTILINE
    )  # what needs attention keeps its line
    assert "indexed    note" not in screen and "ingest:" not in screen  # the bar counted the rest, then left

    with Terminal(home, "reindex", env=subprocess_env()) as term:
        assert term.finish() == 0
    assert re.search(r"reindex: +\d+%\|.*\| \d/6 documents", term.drawn)
    assert "reindex:" not in term.screen  # the bar is gone once the summary is there
    assert re.search(r"^reindexed 6 documents, 6 chunks with approx-v1 in ", term.screen, re.MULTILINE)


def test_status_and_a_scripted_server_agree_with_the_summary(home):
    with ThreadedFakeLLM(FakeLLM(script=[Step(answer="ok")])) as fake:
        env = subprocess_env(KB_LLM_URL=fake.base_url)
        with Terminal(home, "status", env=env) as term:
            assert term.finish() == 0
    lines = term.screen.splitlines()
    assert lines[:5] == [
        f"knowledge base  {home}: 1 document, 1 chunk (search by words only: KB_EMBED=off)",
        f"model server    reachable at {fake.base_url}; serving fake-model",
        "tokenizer       approximate (approx-v1): set KB_TOKENIZER to the model's tokenizer.json",
        "web search      on (DuckDuckGo Lite)",
        f"inbox           {home / 'knowledge' / 'inbox'} (drop files here to add them)",
    ]


def test_ctrl_c_at_the_prompt_leaves_the_chat_at_once_with_status_0(home):
    env = subprocess_env(KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_WEB_SEARCH="off")
    with Terminal(home, "run", env=env) as term:
        term.wait_for(prompts(1))
        term.interrupt()
        status = term.finish(timeout_s=10)  # a safety net; the seconds: bench/startup.py --only ctrl-c
    assert status == 0, (status, term.screen)
    assert "Traceback" not in term.screen and "KeyboardInterrupt" not in term.screen


def test_make_run_ends_with_status_0_on_ctrl_c(home):
    """`make run` (the README's first command): Ctrl-C reaches kb alone, so make does not die of it."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = subprocess_env(
        KB_HOME=str(home), KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_WEB_SEARCH="off"
    )
    with Terminal(home, env=env, command=["make", "-s", "-C", str(root), "run"]) as term:
        term.wait_for(prompts(1))
        term.interrupt()
        status = term.finish(timeout_s=10)
    assert status == 0, term.screen
    assert "Error 130" not in term.screen and "Interrupt" not in term.screen


def test_a_warning_while_the_prompt_waits_is_written_above_it_and_what_was_typed_stays(home):
    from tests import pdfs

    env = subprocess_env(
        KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_WEB_SEARCH="off", KB_SETTLE_S="0.1"
    )
    with Terminal(home, "run", env=env) as term:
        term.wait_for(prompts(1))
        os.write(term.master, b"how deep")  # typed, Enter not pressed yet
        term.wait_for("how deep")
        bad = pdfs.encrypted(pdfs.text_pdf([["secret"]]), user_password="pw")
        (home / "knowledge" / "inbox" / "locked.pdf").write_bytes(bad)  # the daemon fails it: a warning
        term.wait_for(lambda screen: "ingest.failed" in screen and screen.rstrip().endswith("kb> how deep"))
        lines = term.screen.rstrip().splitlines()
        assert lines[-1] == "kb> how deep" and lines[-2].startswith("kb warning: ingest.failed locked.pdf")
        term.type("")  # Enter: the question typed before the warning is asked
        term.wait_for(prompts(2))
        term.type("/quit")
        assert term.finish() == 0


# Two or more English words in a row: none may be kb's own on a Chinese or Thai terminal.
ENGLISH_RUN = re.compile(r"\b[A-Za-z][a-z'’]*(?: [A-Za-z][a-z'’]*)+\b")


def kb_wrote(screen: str, *theirs: str) -> list[str]:
    """English runs on the screen, leaving out what is not kb's own words: the owner's lines, the
    documents' titles, paths, settings, commands and the log's warnings (kept in English for kb logs)."""
    out = []
    for line in screen.splitlines():
        if line.startswith(("kb warning:", "kb> ")):
            continue
        for quoted in theirs:
            line = line.replace(quoted, " ")
        line = re.sub(r"\S*/\S*|\bKB_\w+(=\S+)?|\bkb \w+|https?://\S+", " ", line)
        out += ENGLISH_RUN.findall(line)
    return out


@pytest.mark.parametrize(
    ("environment", "labels", "prompt"),
    [
        ({"LANG": "zh_TW.UTF-8"}, ["知識庫", "模型伺服器", "收件匣"], "Traditional Chinese"),
        ({"LANG": "zh_TW.UTF-8", "KB_LANGUAGE": "th"}, ["คลังความรู้", "เซิร์ฟเวอร์โมเดล", "กล่องรับเข้า"], "Thai"),
    ],
)
def test_the_terminal_speaks_its_locale_or_kb_language(tmp_path, environment, labels, prompt):
    home = tmp_path / "kb"
    note = "# 斑馬魚\n\n斑馬魚在中午睡覺，睡在淺水池塘裡。\nปลาม้าลายนอนตอนเที่ยง\n"
    ingest_texts(make_settings(home), {"zebrafish.md": NOTE, "banma.md": note})
    said = "斑馬魚在中午睡覺 [1]。" if prompt != "Thai" else "ปลาม้าลายนอนตอนเที่ยง [1]"
    question = "斑馬魚在什麼時候睡覺" if prompt != "Thai" else "ปลาม้าลายนอนตอนไหน"
    llm = FakeLLM(script=[answer(said)])
    with ThreadedFakeLLM(llm) as fake:
        env = subprocess_env(KB_LLM_URL=fake.base_url, KB_WEB_SEARCH="off", LC_ALL="", **environment)
        screen = chat(home, env, question, "/help", "/frobnicate", "/status", "/new")
    summary = screen.split("kb>")[0].splitlines()
    assert [next(line for line in summary if line.startswith(label)) for label in labels]
    reply = reply_after(screen, question)
    assert said in reply and "[1] 斑馬魚 — raw/banma-" in reply
    assert f"Answer in {prompt}" in llm.requests[-1]["messages"][0]["content"]
    assert "/new" in reply_after(screen, "kb> /help") and "/frobnicate" in reply_after(screen, "kb> /frob")
    assert kb_wrote(screen, "Zebrafish", "Ctrl-D", "Ctrl-C") == [], screen


def test_a_chinese_terminal_says_web_sources_refusals_and_an_empty_model_in_words(tmp_path):
    from tests.fake_llm import ThreadedServer, web_step
    from tests.fake_search import FakeSearch, Result, ddg_results, start_fake_search

    home = tmp_path / "kb"
    note = "# 斑馬魚\n\n斑馬魚在中午睡覺，睡在淺水池塘裡。\nปลาม้าลายนอนตอนเที่ยง\n"
    ingest_texts(make_settings(home), {"zebrafish.md": NOTE, "banma.md": note})
    search = FakeSearch()
    page = "https://varn.example/quillan"
    search.script["ddg"] = [
        ddg_results("q", [Result("The Varn valley and Lake Quillan", page, "奎蘭湖的深度")])
    ]
    llm = FakeLLM(
        responder=web_step("奎蘭湖 深度", "1: YES", "[1] 奎蘭湖深三百一十七公尺。", lambda body: answer(""))
    )
    with ThreadedServer(search, start_fake_search) as s, ThreadedFakeLLM(llm) as fake:
        env = subprocess_env(KB_LLM_URL=fake.base_url, KB_DDG_URL=s.ddg_url, LANG="zh_TW.UTF-8", LC_ALL="")
        screen = chat(home, env, "斑馬魚在什麼時候睡覺", "奎蘭湖有多深？", "/import web-3")
    empty = reply_after(screen, "斑馬魚在什麼時候睡覺")
    assert "模型什麼都沒有回傳。" in empty and "it returned nothing" not in empty
    web = reply_after(screen, "奎蘭湖有多深？")
    assert f"奎蘭湖深三百一十七公尺。 [web-1] （來源：{page}）" in web and "[source:" not in web
    refused = reply_after(screen, "kb> /import web-3")
    assert "已拒絕：最近一次搜尋沒有這一筆——請從它的清單中選" in refused and "not-in-latest" not in refused
    assert kb_wrote(screen, "The Varn valley and Lake Quillan", "Zebrafish", "Ctrl-D", "Ctrl-C") == [], screen


def test_a_chinese_terminal_says_the_model_server_is_not_running_in_words_and_how_to_start_it(home):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    env = subprocess_env(KB_LLM_URL=dead, KB_WEB_SEARCH="off", LANG="zh_TW.UTF-8", LC_ALL="")
    reply = reply_after(chat(home, env, "where does the zebrafish sleep at noon"), "sleep at noon")
    assert "模型伺服器沒有在執行。用這個指令啟動：" in reply and "mlx_lm.server --model" in reply
    said = "\n".join(line for line in reply.splitlines() if not line.startswith("kb warning:"))  # the log's
    assert "Mac" not in said and "not reachable" not in said, said


def test_kb_run_with_a_token_says_in_the_owners_language_that_the_bot_takes_the_chats_place(tmp_path):
    from tests.fake_telegram import OWNER, TOKEN, threaded_fake_telegram

    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"zebrafish.md": NOTE})
    with threaded_fake_telegram(TOKEN) as telegram:
        env = subprocess_env(
            KB_TELEGRAM_TOKEN=TOKEN, KB_TELEGRAM_ALLOWED_USERS=str(OWNER), KB_TELEGRAM_API_URL=telegram.base_url,
            KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_WEB_SEARCH="off", LANG="zh_TW.UTF-8", LC_ALL="",
        )  # fmt: skip
        with Terminal(home, "run", env=env) as term:
            said = term.wait_for("Ctrl-C")
            deadline = time.monotonic() + 30
            while not telegram.calls("getUpdates") and time.monotonic() < deadline:  # polling: Ctrl-C is kb's
                time.sleep(0.05)
            term.type("斑馬魚在什麼時候睡覺")  # read by nobody: no answer, no search
            term.interrupt()
            assert term.finish() == 0
            screen = term.drawn
    assert "Telegram 機器人正在執行" in said and "在這裡輸入的文字不會被讀取" in said and "kb chat" in said
    assert "知識庫" in said and "serving the Telegram bot" not in said, said
    assert "kb>" not in screen and telegram.calls("getUpdates")


@pytest.mark.parametrize(
    ("environment", "question", "said"),
    [
        ({"LANG": "zh_TW.UTF-8"}, "斑馬魚在什麼時候睡覺", "索引已損壞——請用這個指令從 raw/ 重建：kb reindex"),
        ({"LANG": "th_TH.UTF-8"}, "ปลาม้าลายนอนตอนไหน", "ดัชนีเสียหาย — สร้างใหม่จาก raw/ ด้วย: kb reindex"),
    ],
)
def test_a_damaged_index_is_said_in_the_terminals_language_with_its_fix(
    tmp_path, environment, question, said
):
    home = tmp_path / "kb"
    index = home / "knowledge" / "index" / "kb.sqlite3"
    index.parent.mkdir(parents=True)
    index.write_bytes(b"this is no SQLite file " * 400)
    env = subprocess_env(
        KB_LLM_URL=f"http://127.0.0.1:{free_port()}/v1", KB_WEB_SEARCH="off", LC_ALL="", **environment
    )
    screen = chat(home, env, question)
    summary, reply = screen.split("kb>")[0], reply_after(screen, question)
    assert said in summary and said in reply, screen
    assert "not a database" not in screen and kb_wrote(screen, "Ctrl-D", "Ctrl-C") == [], screen
    with Terminal(home, "ask", question, env=env) as term:
        assert term.finish() == 0
    shown = "\n".join(
        line for line in term.screen.splitlines() if not LOG_LINE.search(line)
    )  # the log's, English
    assert said in shown and kb_wrote(shown) == [], term.screen


INGESTED = {
    "zh_TW.UTF-8": [
        "已索引     a.md → raw/a-",
        "重複       b.md = doc-",
        "失敗       empty.txt：檔案是空的 → inbox/failed/empty.txt",
        "已索引 1 · 重複 1 · 失敗 1，用時 ",
        "失敗原因：檔案是空的 1（原始檔案和 NAME.error.json 在 inbox/failed/）",
    ],
    "th_TH.UTF-8": [
        "ทำดัชนีแล้ว   a.md → raw/a-",
        "ซ้ำ         b.md = doc-",
        "ล้มเหลว     empty.txt: ไฟล์ว่างเปล่า → inbox/failed/empty.txt",
        "ทำดัชนีแล้ว 1 · ซ้ำ 1 · ล้มเหลว 1 ใน ",
        "สาเหตุที่ไฟล์ล้มเหลว: ไฟล์ว่างเปล่า 1",
    ],
}


@pytest.mark.parametrize("locale", list(INGESTED))
def test_kb_ingest_says_what_became_of_each_file_in_the_terminals_language(tmp_path, locale):
    import subprocess
    import sys

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# 押金\n\n押金是兩個月。\n")
    (folder / "b.md").write_text("# 押金\n\n押金是兩個月。\n")
    (folder / "empty.txt").write_text("")
    env = subprocess_env(LANG=locale, LC_ALL="")
    done = subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(tmp_path / "kb"), "ingest", str(folder)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    shown, lines = done.stdout.splitlines(), INGESTED[locale]
    assert done.returncode == 1 and len(shown) == len(lines), done.stdout + done.stderr
    assert all(line.startswith(start) for line, start in zip(shown, lines, strict=True)), shown
    assert kb_wrote(done.stdout, "NAME.error.json") == [], shown
