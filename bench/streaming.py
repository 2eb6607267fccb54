"""Streaming benchmark: how soon an answer shows while the model writes it, in Telegram and a terminal.

A scripted model server takes ``--prefill-s`` (2 s) to "read the prompt", sending the keep-alive
comments ``mlx_lm.server`` sends, then streams the answer at ``--tokens-per-s`` (20) pieces a
second. Measured against the moment each piece left the server:

* Telegram (the bot on the Bot API stand-in, drafts; and again with drafts refused, edits): the
  first text on the owner's screen after the first token (target ≤ 1 s), updates a second while it
  streams (≤ 1 on average), the final message after the last token (≤ 1.5 s);
* the terminal (``kb chat`` on a pseudo-terminal): the first text drawn after the first token
  (≤ 0.2 s), the prompt back after the last token.

Medians of ``--runs`` (5) answers each; the whole run takes about a minute.

    python bench/streaming.py [--runs 5] [--prefill-s 2] [--tokens-per-s 20]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.bot_env import OWNER, running_bot  # noqa: E402
from tests.conftest import ingest_texts, make_settings, subprocess_env  # noqa: E402
from tests.fake_llm import FakeLLM, Step, ThreadedFakeLLM  # noqa: E402
from tests.terminal import Terminal  # noqa: E402

DOC = {
    "harbor.md": "# Harbor release checklist\n\nBefore a ship is released: 1. a signed cargo manifest; 2. a tide "
    "window of at least two hours; 3. a licensed pilot on board until the outer buoy.\n"
}
QUESTION = "What does the harbor release checklist require?"
ANSWER = (
    "The checklist asks for three things before a ship leaves: a signed cargo manifest filed with the harbor "
    "master [1], a departure inside a tide window of at least two hours [1], and a licensed pilot on board "
    "until the outer buoy [1]. All three are checked by the harbor master before release."
)
TARGETS = {"telegram_first_s": 1.0, "updates_per_s": 1.0, "telegram_final_s": 1.5, "terminal_first_s": 0.2}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def telegram_runs(runs: int, step: Step, *, drafts: bool) -> dict[str, list[float]]:
    """The bot answering ``runs`` times; per run: first text, updates a second, final message."""
    out: dict[str, list[float]] = {"first": [], "rate": [], "final": []}
    with tempfile.TemporaryDirectory() as tmp:
        site = ("http://127.0.0.1:9", 9, [])  # no web page is fetched here
        async with running_bot(Path(tmp) / "kb", site, transcribe=None, daemon=False) as (env, _):
            env.telegram.drafts_refused = not drafts
            ingest_texts(env.settings, DOC)
            env.llm.script = [step]
            for _ in range(runs):
                env.llm.streamed.clear()
                since = len(env.telegram.calls())
                drafts_before = len(env.telegram.drafts(OWNER))
                await env.say(QUESTION)
                final = await env.telegram.wait_for(
                    lambda c, since=since: c.index >= since and c.ok and c.params.get("parse_mode") == "HTML"
                    and "outer buoy" in c.params.get("text", ""), 60,
                )  # fmt: skip
                first_token, last_token = env.llm.streamed[0], env.llm.streamed[-1]
                shown = _shown(env, since, drafts_before, drafts)
                updates = [t for t, text in shown if text.startswith("The")] + [final.time]
                out["first"].append(updates[0] - first_token)
                # every change on the screen from the first text to the final message, the final included
                out["rate"].append((len(updates) - 1) / (updates[-1] - updates[0]))
                out["final"].append(final.time - last_token)
                await asyncio.sleep(0.5)
    return out


def _shown(env, since: int, drafts_before: int, drafts: bool) -> list[tuple[float, str]]:
    """(time, plain text) of each streamed update of one answer: drafts, or plain sends and edits."""
    if drafts:
        return [(d.time, d.text) for d in env.telegram.drafts(OWNER)[drafts_before:]]
    return [
        (c.time, c.params.get("text", ""))
        for c in env.telegram.calls()
        if c.index >= since and c.ok and c.method in ("sendMessage", "editMessageText")
        and not c.params.get("parse_mode")
    ]  # fmt: skip


def terminal_runs(runs: int, step: Step) -> dict[str, list[float]]:
    """``kb chat`` answering ``runs`` times; per run: first text drawn, prompt back."""
    out: dict[str, list[float]] = {"first": [], "prompt": []}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "kb"
        ingest_texts(make_settings(home), DOC)
        fake = FakeLLM(script=[step])
        with ThreadedFakeLLM(fake):
            env = subprocess_env(KB_LLM_URL=fake.base_url, KB_WEB_SEARCH="off", KB_LLM_TIMEOUT_S="30")
            with Terminal(home, "chat", env=env) as term:
                term.wait_for(lambda s: len(re.findall(r"^kb>", s, re.M)) >= 1)
                for n in range(2, runs + 2):
                    fake.streamed.clear()
                    before = term.screen.count("The checklist")
                    term.type(QUESTION)
                    term.wait_for(lambda s, before=before: s.count("The checklist") > before, timeout_s=60)
                    seen = time.monotonic()
                    out["first"].append(seen - fake.streamed[0])
                    term.wait_for(lambda s, n=n: len(re.findall(r"^kb>", s, re.M)) >= n, timeout_s=60)
                    out["prompt"].append(time.monotonic() - fake.streamed[-1])
                term.type("/quit")
                term.finish()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--prefill-s", type=float, default=2.0)
    parser.add_argument("--tokens-per-s", type=float, default=20.0)
    args = parser.parse_args()
    step = Step(answer=ANSWER, prefill_s=args.prefill_s, tokens_per_s=args.tokens_per_s)
    print(f"stand-in: {args.prefill_s:g} s reading the prompt, then {args.tokens_per_s:g} pieces/s; "
          f"medians of {args.runs} answers", flush=True)  # fmt: skip
    for drafts in (True, False):
        got = asyncio.run(telegram_runs(args.runs, step, drafts=drafts))
        how = "drafts" if drafts else "edits (drafts refused)"
        print(
            f"telegram, {how:22}  first text {median(got['first']):.2f} s after the first token "
            f"(≤ {TARGETS['telegram_first_s']:g}), {median(got['rate']):.2f} updates/s "
            f"(≤ {TARGETS['updates_per_s']:g}), final message {median(got['final']):.2f} s after the last "
            f"(≤ {TARGETS['telegram_final_s']:g})",
            flush=True,
        )
    term = terminal_runs(args.runs, step)
    print(
        f"terminal (kb chat)                first text {median(term['first']):.3f} s after the first token "
        f"(≤ {TARGETS['terminal_first_s']:g}), prompt back {median(term['prompt']):.2f} s after the last",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
