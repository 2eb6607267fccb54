"""A full disk (or a file-size limit) and a damaged index: said as such, never as an empty knowledge
base, and nothing stored is lost.

A full disk is made real for one process with RLIMIT_FSIZE (the kernel refuses any write past the
limit, as it refuses one on a full disk; it works for root too), and SQLITE_FULL with
``max_page_count``."""

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from knowledge.answer.reply import Reply, Said
from knowledge.errors import IndexUnreadable
from knowledge.ingest.lock import WriterLock
from knowledge.store.connection import index_problem
from knowledge.store.index import Index
from knowledge.words.catalog import Words
from tests.conftest import ingest_texts, make_settings, subprocess_env
from tests.fake_llm import free_port

NOTE = "# Zebrafish\n\nThe zebrafish sleeps at noon in the shallow pond.\n"
SHM_BYTES = 32768  # what SQLite grows a new -shm file to: past a 16 KiB limit, it cannot


def limited(max_bytes: int):
    """A child process that may write no file past ``max_bytes`` (SIGXFSZ ignored: the write fails)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return limit


def kb(home, *args: str, max_bytes: int, **env: str) -> subprocess.CompletedProcess:
    """kb as a process that may write no file past ``max_bytes`` (a full disk)."""
    return subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(home), *args],
        capture_output=True, text=True, timeout=120, env=subprocess_env(**env),
        preexec_fn=limited(max_bytes),
    )  # fmt: skip


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"zebrafish.md": NOTE})
    index = make_settings(home).index_path
    assert not index.with_name(index.name + "-shm").exists()  # closed cleanly: no -shm left
    return home


def test_the_index_is_searched_and_answered_from_when_no_file_can_grow(home):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    found = kb(home, "search", "zebrafish", max_bytes=16384)
    assert found.returncode == 0, found.stderr
    assert "sleeps at noon" in found.stdout and "reindex" not in found.stdout + found.stderr
    asked = kb(home, "ask", "--json", "when does the zebrafish sleep", max_bytes=16384,
               KB_LLM_URL=dead, KB_WEB_SEARCH="off")  # fmt: skip
    reply = json.loads(asked.stdout)
    assert reply["mode"] == "degraded" and "sleeps at noon" in reply["text"]
    listed = kb(home, "ls", max_bytes=16384)
    assert listed.returncode == 0 and "Zebrafish" in listed.stdout


def test_a_damaged_index_is_said_as_such_and_never_sent_to_the_web(home, run_kb):
    index = make_settings(home).index_path
    index.write_bytes(b"this is not an SQLite database, it was overwritten" * 100)
    asked = run_kb(
        "--home", str(home), "ask", "--json", "when does the zebrafish sleep",
        env={"KB_LLM_URL": f"http://127.0.0.1:{free_port()}/v1"},
    )  # fmt: skip
    reply = json.loads(asked.stdout)
    assert reply["mode"] == "unavailable" and reply["door"]["by"] == "index"
    assert "damaged" in reply["text"] and "kb reindex" in reply["text"]
    assert "nothing on this" not in reply["text"] and not reply["candidates"]
    searched = run_kb("--home", str(home), "search", "zebrafish")
    assert searched.returncode == 1 and "damaged" in searched.stderr and "kb reindex" in searched.stderr


def test_the_phone_is_told_in_words_and_in_its_language():
    from bot.render import reply_blocks

    reply = Reply("", "unavailable", said=(Said("index-unreadable", {"reason": "disk-full", "detail": "x"}),))
    english = " ".join(reply_blocks(reply, Words("en")))
    assert "disk is full" in english and "nothing is lost" in english and "kb.sqlite3" not in english
    chinese = " ".join(reply_blocks(reply, Words("zh-Hant")))
    assert "磁碟" in chinese and "disk" not in chinese


def test_what_sqlite_and_the_kernel_say_is_told_apart(tmp_path):
    with Index(tmp_path / "kb.sqlite3") as index:
        index.conn.execute("PRAGMA max_page_count = 20")
        with pytest.raises(sqlite3.DatabaseError) as full:
            for n in range(10_000):
                index.conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"k{n}", "x" * 500))
    assert index_problem(full.value, free_bytes=10**12) == "disk-full"
    assert index_problem(OSError(28, "No space left on device"), free_bytes=10**12) == "disk-full"
    io = sqlite3.OperationalError("disk I/O error")
    io.sqlite_errorname = "SQLITE_IOERR_WRITE"
    assert index_problem(io, free_bytes=1024) == "disk-full"
    assert index_problem(io, free_bytes=10**12) == "io-error"
    (tmp_path / "bad.sqlite3").write_bytes(b"garbage" * 1000)
    with pytest.raises(IndexUnreadable) as bad:
        Index(tmp_path / "bad.sqlite3", readonly=True)
    assert bad.value.reason == "damaged"
    assert index_problem(sqlite3.OperationalError("database is locked"), free_bytes=None) == "busy"


def test_rm_and_restore_end_in_a_sentence_when_nothing_can_be_written(home, run_kb):
    listed = run_kb("--home", str(home), "ls", "--json")
    [doc] = json.loads(listed.stdout)
    gone = kb(home, "rm", doc["id"], max_bytes=0)
    assert gone.returncode == 1, gone.stdout + gone.stderr
    assert "Traceback" not in gone.stderr and gone.stderr.startswith("kb: "), gone.stderr
    still = run_kb("--home", str(home), "search", "zebrafish")
    assert "sleeps at noon" in still.stdout  # nothing lost


def test_the_writer_lock_holds_when_its_holder_line_cannot_be_written(tmp_path):
    code = (
        "import sys; from pathlib import Path; from knowledge.ingest.lock import WriterLock\n"
        "lock = WriterLock(Path(sys.argv[1]), role='test'); lock.acquire(); print('held', flush=True)\n"
        "sys.stdin.readline(); lock.release(); print('released')\n"
    )
    path = tmp_path / "writer.lock"
    path.write_bytes(b"")
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=subprocess_env(), preexec_fn=limited(0),
    )  # fmt: skip
    try:
        before = []  # what the child wrote before it held the lock (its warning that the line is unwritten)
        for line in iter(child.stdout.readline, ""):
            if line.strip() == "held":
                break
            before.append(line)
        else:
            raise AssertionError(f"the lock was never held: {before} {child.stderr.read()}")
        with pytest.raises(Exception, match="another kb process is writing"):
            WriterLock(path, role="second").acquire(wait_s=0)
        out, err = child.communicate("\n", timeout=30)
    finally:
        child.kill()
    assert "released" in out and "Traceback" not in err


def test_the_daemon_waits_for_room_instead_of_dying_and_stops_on_sigterm(home):
    daemon = subprocess.Popen(
        [sys.executable, "-m", "cli", "--home", str(home), "daemon"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=subprocess_env(KB_SETTLE_S="0.1"), preexec_fn=limited(16384),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and "trying again" not in line:
            line = daemon.stderr.readline()
            if not line and daemon.poll() is not None:
                break
        assert "trying again every" in line and "cannot" in line, line
        assert daemon.poll() is None  # still there, not in a restart loop
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=10) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert os.path.exists(make_settings(home).index_path)


def test_kb_rm_says_the_disk_is_full_when_the_running_daemon_cannot_be_asked(home, run_kb):
    from daemon.main import background
    from knowledge.model.tokenizer import ApproxCounter

    [doc] = json.loads(run_kb("--home", str(home), "ls", "--json").stdout)
    with background(make_settings(home), ApproxCounter()):
        gone = kb(home, "rm", "--wait", "5", doc["id"], max_bytes=0)
    assert gone.returncode == 1 and "Traceback" not in gone.stderr, gone.stderr
    assert "cannot ask kb's daemon to remove" in gone.stderr and "the disk is full" in gone.stderr
    assert (
        "sleeps at noon" in run_kb("--home", str(home), "search", "zebrafish").stdout
    )  # nothing was removed


def test_an_index_whose_log_holds_pages_is_not_read_stale_on_a_full_disk(home, tmp_path, run_kb):
    """A copy taken while a writer had it open: the -wal holds the newest document, there is no -shm.
    With room, SQLite replays the log; without, kb says it cannot read rather than leave that document out."""
    import shutil

    settings = make_settings(home)
    holder = sqlite3.connect(settings.index_path)  # keeps the -wal from being checkpointed away on close
    try:
        holder.execute("SELECT count(*) FROM documents").fetchone()
        ingest_texts(settings, {"heron.md": "# Heron\n\nThe grey heron fishes at dawn by the weir.\n"})
        copy = make_settings(tmp_path / "copy")
        copy.index_path.parent.mkdir(parents=True)
        for suffix in ("", "-wal"):
            shutil.copyfile(f"{settings.index_path}{suffix}", f"{copy.index_path}{suffix}")
    finally:
        holder.close()
    assert os.path.getsize(f"{copy.index_path}-wal") > 0 and not os.path.exists(f"{copy.index_path}-shm")
    full = kb(copy.home, "search", "heron", max_bytes=16384)
    assert full.returncode == 1 and "the disk is full" in full.stderr, full.stdout + full.stderr
    roomy = run_kb("--home", str(copy.home), "search", "heron")
    assert "fishes at dawn" in roomy.stdout, roomy.stderr


def test_a_fresh_index_without_its_tables_reads_as_empty_not_busy(tmp_path):
    from knowledge.errors import IndexMissing

    path = tmp_path / "kb.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE other (x)").connection.close()
    with pytest.raises(IndexMissing, match="holds nothing yet"):
        Index(path, readonly=True)


def test_kb_doctor_warns_before_the_disk_fills_and_fails_when_it_has():
    from pathlib import Path

    from cli.diagnose import disk_finding

    home = Path("/kb")
    assert disk_finding(home, 50 * 2**30).is_ok
    low = disk_finding(home, 2**30)
    assert not low.is_ok and low.is_warning and "1.0 GiB free" in low.detail
    full = disk_finding(home, 10 * 2**20)
    assert not full.is_ok and not full.is_warning and "10 MiB free" in full.detail and "kb rm" in full.fix


def test_a_conversation_that_cannot_be_remembered_still_gets_its_answer_first(home):
    from knowledge.conversation.store import Conversations
    from tests.fake_llm import FakeLLM, ThreadedFakeLLM, answer

    store = Conversations(make_settings(home).conversations_path)  # a conversation under way
    turn = store.current("cli:pond")
    store.add_turn(turn.id, message="what lives in the pond", standalone="what lives in the pond",
                   answer="The zebrafish [1].", cited=[])  # fmt: skip
    with ThreadedFakeLLM(FakeLLM(script=[answer("At noon, in the shallow pond [1].")])) as llm:
        env = {"KB_LLM_URL": llm.base_url, "KB_WEB_SEARCH": "off", "KB_REWRITE_TIMEOUT_S": "5"}
        asked = kb(
            home, "ask", "--conversation", "pond", "when does the zebrafish sleep", max_bytes=2048, **env
        )
        data = kb(
            home, "ask", "--json", "--conversation", "pond", "when does it sleep", max_bytes=2048, **env
        )
    assert asked.returncode == 0, asked.stderr
    said = asked.stdout
    assert (
        said.index("At noon, in the shallow pond") < said.index("(Not remembered:") < said.index("Sources:")
    )
    reply = json.loads(data.stdout)
    assert "At noon" in reply["text"] and reply["note"].startswith("(Not remembered:")
    assert [t.message for t in store.current("cli:pond").turns] == ["what lives in the pond"]


def test_not_remembered_says_the_disk_is_full_in_the_owners_language():
    from bot.render import reply_blocks

    reply = Reply("At noon [1].", "local", said=(Said("not-remembered-disk-full"),))
    english = reply_blocks(reply, Words("en"))
    assert english[0].startswith("At noon") and "disk is full" in english[-1]
    chinese = " ".join(reply_blocks(reply, Words("zh-Hant")))
    assert "磁碟" in chinese and "disk" not in chinese
    thai = " ".join(reply_blocks(reply, Words("th")))
    assert "disk" not in thai


async def test_the_bot_answers_first_and_then_says_the_conversation_was_not_remembered(tmp_path, varn_site):
    from tests.bot_env import drop_note, running_bot, wait_indexed
    from tests.fake_llm import answer

    async with running_bot(tmp_path / "kb", varn_site) as (env, _):
        drop_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
        await wait_indexed(env, 1)
        env.settings.conversations_path.parent.mkdir(parents=True, exist_ok=True)
        env.settings.conversations_path.write_bytes(b"not a database: overwritten" * 200)
        env.llm.script = [answer("It is 317 metres deep [1].")]
        await env.say("How deep is Lake Quillan?")
        call = await env.bot_said(
            lambda c: "317 metres deep" in c.params["text"] and "Sources" in c.params["text"]
        )
    text = call.params["text"]
    assert text.index("It is 317 metres deep") < text.index("(Not remembered: the conversation file cannot")
    assert "went wrong" not in text
    labels = [b["text"] for row in call.params["reply_markup"]["inline_keyboard"] for b in row]
    assert labels == ["Sources"]  # no 👍 / 👎: a vote could not be kept either
