"""Start-up benchmark: how soon kb is ready with no network at all.

Each command starts on a fresh knowledge base with no route anywhere: the model hub
(``HF_ENDPOINT``) and the model server (``KB_LLM_URL``) are closed local ports, the Hugging Face
cache is empty and ``HF_HUB_OFFLINE`` is unset (a new Mac on a plane). Timed from the process
start to the moment a person could go on:

* ``kb ask``     the answer printed and the process ended;
* ``kb run``     the ``kb>`` prompt on the terminal (a pseudo-terminal, as a person has);
* ``kb daemon``  the inbox folder made and ``daemon.start`` logged;
* ``kb bot``     the first ``getUpdates`` reaching a local Bot API stand-in;
* ``ctrl-c``     the other way: from Ctrl-C at the ``kb>`` prompt to the end of the process (target 1 s).

Median, minimum and maximum of ``--runs`` (5) runs each. ``--tree DIR`` runs another checkout's
code (a ``git worktree`` of an earlier commit, with this environment's packages) for a side by side.

    python bench/startup.py [--runs 5] [--tree DIR] [--only ask,run,daemon,bot,ctrl-c]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.terminal import Terminal  # noqa: E402

TARGET_S = 3.0
TARGETS_S = {"ctrl-c": 1.0}  # the others: TARGET_S
TOKEN = "123456:BENCH-token"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline_env(tmp: Path, **extra: str) -> dict[str, str]:
    """No KB_ settings but these, no hub, no model server, an empty hub cache, HF_HUB_OFFLINE unset."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "HF_"))}
    return {
        **env, "HF_HOME": str(tmp / "hf"), "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}",
        "KB_LLM_URL": f"http://127.0.0.1:{closed_port()}/v1", "KB_DDG_URL": f"http://127.0.0.1:{closed_port()}/lite/",
        **extra,
    }  # fmt: skip


def kb_command(tree: Path, home: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); from cli.main import main; "
            "sys.exit(main())", "--home", str(home), *args]  # fmt: skip


def time_ask(tree: Path, tmp: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(kb_command(tree, tmp / "kb", "ask", "hello"), env=offline_env(tmp),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"kb ask failed: {done.stderr[-500:]}")
    return took


def time_run(tree: Path, tmp: Path) -> float:
    t0 = time.perf_counter()
    with Terminal(tmp / "kb", env=offline_env(tmp), command=kb_command(tree, tmp / "kb", "run")) as term:
        term.wait_for(lambda screen: "kb>" in screen, timeout_s=300)
        took = time.perf_counter() - t0
        term.type("/quit")
        term.finish(timeout_s=60)
    return took


def time_ctrl_c(tree: Path, tmp: Path) -> float:
    """Seconds from Ctrl-C at the ``kb>`` prompt until the process has ended (with status 0)."""
    with Terminal(tmp / "kb", env=offline_env(tmp), command=kb_command(tree, tmp / "kb", "run")) as term:
        term.wait_for(lambda screen: "kb>" in screen, timeout_s=300)
        t0 = time.perf_counter()
        term.interrupt()
        status = term.finish(timeout_s=60)
        took = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"kb run ended with status {status} on Ctrl-C")
    return took


def time_daemon(tree: Path, tmp: Path) -> float:
    home = tmp / "kb"
    log = home / "runs" / "logs" / "kb.jsonl"

    def started() -> bool:
        return (
            (home / "knowledge" / "inbox").is_dir() and log.is_file() and '"daemon.start"' in log.read_text()
        )

    return time_until(kb_command(tree, home, "daemon"), offline_env(tmp), started, "kb daemon never started")


def time_bot(tree: Path, tmp: Path) -> float:
    from tests.fake_telegram import threaded_fake_telegram

    with threaded_fake_telegram(TOKEN) as telegram:
        env = offline_env(tmp, KB_TELEGRAM_TOKEN=TOKEN, KB_TELEGRAM_ALLOWED_USERS="42",
                          KB_TELEGRAM_API_URL=telegram.base_url)  # fmt: skip
        return time_until(
            kb_command(tree, tmp / "kb", "bot"),
            env,
            lambda: bool(telegram.calls("getUpdates")),
            "kb bot never polled",
        )


def time_until(command: list[str], env: dict[str, str], ready: Callable[[], bool], failure: str) -> float:
    """Seconds from starting a long-running kb command until ``ready()`` (polled), then it is stopped."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - t0 < 300:
            if ready():
                return time.perf_counter() - t0
            time.sleep(0.02)
        raise SystemExit(failure)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


MEASURES = {"ask": time_ask, "run": time_run, "daemon": time_daemon, "bot": time_bot, "ctrl-c": time_ctrl_c}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--tree", type=Path, default=ROOT, help="the checkout whose code runs (default: this one)"
    )
    parser.add_argument(
        "--only", default=",".join(MEASURES), help="comma-separated: ask, run, daemon, bot, ctrl-c"
    )
    args = parser.parse_args()
    print(
        f"kb start-up with no network, {args.tree}: seconds from process start, median (min-max) of {args.runs}"
    )
    results = {}
    for name in args.only.split(","):
        times = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="kb-start-") as tmp:
                times.append(MEASURES[name](args.tree.resolve(), Path(tmp)))
        median = statistics.median(times)
        results[name] = median
        target_s = TARGETS_S.get(name, TARGET_S)
        verdict = "met" if median <= target_s else "NOT met"
        print(
            f"  kb {name:<7} {median:6.2f} s  ({min(times):.2f}-{max(times):.2f})  target {target_s:g} s {verdict}"
        )
    print(json.dumps({k: round(v, 3) for k, v in results.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
