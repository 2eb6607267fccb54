"""A model server stuck sending keep-alive comments holds nothing: SIGTERM stops the bot at once,
its answer marked stopped (the stream's own deadline, KB_LLM_STREAM_TIMEOUT_S, is in test_llm_stream)."""

import signal
import subprocess
import sys

from tests.bot_env import OWNER, TOKEN
from tests.conftest import ingest_texts, make_settings, subprocess_env
from tests.fake_llm import FakeLLM, Step, ThreadedFakeLLM
from tests.fake_telegram import threaded_fake_telegram
from tests.test_daemon import wait_for


def test_sigterm_stops_a_bot_whose_answer_waits_on_a_model_that_only_sends_keep_alives(tmp_path):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"quillan.md": "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n"})
    llm = FakeLLM(script=[Step(answer="never", prefill_s=3600)])  # "reading the prompt", for an hour
    with threaded_fake_telegram(TOKEN) as telegram, ThreadedFakeLLM(llm):
        env = subprocess_env(KB_TELEGRAM_TOKEN=TOKEN, KB_TELEGRAM_ALLOWED_USERS=str(OWNER),
                             KB_TELEGRAM_API_URL=telegram.base_url, KB_LLM_URL=llm.base_url,
                             KB_WEB_SEARCH="off", KB_SUMMARIES="off")  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "cli", "--home", str(home), "bot"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        try:
            wait_for(lambda: telegram.calls("getUpdates"), timeout_s=30, what="the bot polling")
            telegram.push_message(OWNER, OWNER, "How deep is Lake Quillan?")
            wait_for(
                lambda: any(r.get("stream") for r in llm.requests), timeout_s=30, what="the answer's stream"
            )
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)  # a safety net: the stream alone would hold it for 600 s
        finally:
            proc.kill()
            out, err = proc.communicate()
        sent = [c.params["text"] for c in telegram.calls() if c.method in ("sendMessage", "editMessageText")]
    assert code == 0, err
    assert any("(stopped)" in text for text in sent), sent
