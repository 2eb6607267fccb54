"""No secret (bot token, Brave key) in a log file, an error message or the terminal, whoever writes it."""

import io
import logging
import subprocess
import sys

import pytest
import structlog

from knowledge.logs import configure_logging, kept_logging
from knowledge.redact import redactor
from tests.conftest import subprocess_env
from tests.fake_telegram import threaded_fake_telegram

RIGHT = "123456:RIGHT-token-AAAAAAAAAAAAAAAAAAAAAAAAAAA"
WRONG = "123456:WRONGtokenBBBBBBBBBBBBBBBBBBBBBBBBBBB"  # well formed, so the stand-in answers 401
BRAVE = "BSA-brave-key-0123456789abcdef"


def test_a_failing_bot_start_leaves_the_token_in_no_log_and_on_no_terminal(tmp_path):
    with threaded_fake_telegram(RIGHT) as telegram:
        env = subprocess_env(KB_TELEGRAM_TOKEN=WRONG, KB_TELEGRAM_ALLOWED_USERS="42", KB_BRAVE_API_KEY=BRAVE,
                             KB_TELEGRAM_API_URL=telegram.base_url, KB_LLM_URL="http://127.0.0.1:9/v1")  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "cli", "--home", str(tmp_path), "bot"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
    assert done.returncode != 0
    assert "refused the bot token" in done.stderr
    logs = "\n".join(p.read_text() for p in (tmp_path / "runs" / "logs").glob("*"))
    for text in (done.stdout, done.stderr, logs):
        assert WRONG not in text and WRONG.split(":")[1] not in text and BRAVE not in text


@pytest.fixture
def restored_logging():
    """configure_logging changes process-wide state: put it back for the tests that follow."""
    with kept_logging():
        yield


def test_every_logger_is_redacted_in_the_file_and_on_the_console(tmp_path, restored_logging):
    console = io.StringIO()
    console.isatty = lambda: True  # type: ignore[method-assign]
    configure_logging(tmp_path / "kb.jsonl", console=console, secrets=[RIGHT, BRAVE])
    try:
        raise ValueError(f"bad key {BRAVE} for https://api.telegram.org/bot{RIGHT}/getMe")
    except ValueError:
        logging.getLogger("telegram.ext.Application").exception("library said %s", RIGHT)
        structlog.get_logger().error("web.failed", key=BRAVE, exc_info=True)
    logging.getLogger("httpx").warning(
        "HTTP Request: POST https://api.telegram.org/bot987654321:%s", "Z" * 35
    )
    for text in ((tmp_path / "kb.jsonl").read_text(), console.getvalue()):
        assert "[redacted]" in text and "web.failed" in text and "library said" in text
        assert RIGHT not in text and BRAVE not in text and "Z" * 35 not in text


def test_the_redactor_keeps_ordinary_text():
    redact = redactor(["", "1", BRAVE])
    assert redact("version 1.2, 12:30 and 3:1") == "version 1.2, 12:30 and 3:1"
    assert redact(f"key={BRAVE}") == "key=[redacted]"
