"""kb run, daemon, service, doctor, checkpoint, bot, logs, status and config: starting kb and looking after it.

The shape of ``status --json`` is a contract.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from cli.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Command
from cli.commands.ask import chat_until_done
from cli.commands.ingest import OUTCOMES, load_tokenizer
from knowledge.config import Settings, describe, read_dotenv
from knowledge.report.status import columns, probe_model, status_lines, status_report, summary_lines
from knowledge.retrieval.second import Second
from knowledge.words.catalog import ENGLISH, N_, terminal_words
from knowledge.words.replies import plain

# What kb run says when the bot takes the terminal chat's place (the owner typed make run, expecting a prompt)
BOT_ONLY = N_(
    "The Telegram bot is running (KB_TELEGRAM_TOKEN is set): chat with kb in Telegram. Lines typed here are "
    "not read; for a chat in this terminal, run kb chat in another one. Ctrl-C stops kb."
)


def _service_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument(
        "--only", metavar="NAMES", help="comma-separated: mlx, daemon, bot (default: all that apply)"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the files install would write; change nothing"
    )


def _logs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines as they come")
    p.add_argument(
        "-n", type=int, default=50, metavar="N", help="how many recent lines to show first (default 50)"
    )
    p.add_argument("--event", metavar="PREFIX", help="only events starting with PREFIX (e.g. ingest.)")


def _status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


def cmd_run(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb run: the daemon in the background and the terminal chat in the foreground."""
    from daemon.main import background
    from knowledge.wiring import load_language

    language = load_language(settings)  # once: the daemon, the chat or the bot, and the summary share it
    with background(settings, language[0], language[1]):
        if settings.telegram_token:
            from bot.main import serve

            report = status_report(
                settings, model=asyncio.run(check_model(settings)), counter=(language[0], language[2])
            )
            words = terminal_words(settings)
            print("\n".join(summary_lines(report, words)), file=out, flush=True)
            print(words.tr(BOT_ONLY), file=out, flush=True)
            return serve(settings, language=language)
        return chat_until_done(settings, language, out=out)


def cmd_daemon(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb daemon"""
    from daemon.main import serve

    return serve(settings, load_tokenizer(settings, background=True))


def cmd_service(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb service install|uninstall|status [--only NAMES] [--dry-run]"""
    import plistlib

    from cli import service

    wanted = [n.strip() for n in (args.only or "").split(",") if n.strip()]
    known = {s.name: s for s in service.SERVICES}
    if unknown := [n for n in wanted if n not in known]:
        print(f"kb: unknown service {', '.join(unknown)}; known: {', '.join(known)}", file=err)
        return EXIT_USAGE
    chosen = [known[n] for n in wanted] or list(service.SERVICES)
    if args.action == "install" and not wanted and not settings.telegram_token:
        chosen = [s for s in chosen if s.name != "bot"]
        print(
            "bot     skipped: KB_TELEGRAM_TOKEN is not set (put it in ~/.config/kb/env, then install again)",
            file=out,
        )
    place = service.Place(
        home=str(settings.home.resolve()), bin=str(Path(sys.executable).parent),
        env_file=str(Path.home() / ".config" / "kb" / "env"), model=settings.model or service.DEFAULT_MODEL,
        port=urlsplit(settings.llm_url).port or 8081,
    )  # fmt: skip
    host = service.Host("darwin" if sys.platform == "darwin" else "linux", Path.home(), os.getuid())
    if args.dry_run:
        environment = read_dotenv(Path(place.env_file), lenient=True)
        for one in chosen:
            print(f"# {host.file_of(one)}", file=out)
            if host.platform == "darwin":
                print(plistlib.dumps(service.plist_dict(one, place, environment)).decode(), file=out)
            else:
                print(service.unit_text(one, place), file=out)
        return EXIT_OK
    act = {"install": lambda: service.install(chosen, place, host), "uninstall": lambda: service.uninstall(chosen, host),
           "status": lambda: service.status(chosen, host)}[args.action]  # fmt: skip
    try:
        lines = act()
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"kb: {args.action} failed: {exc}", file=err)
        return EXIT_FAILED
    print("\n".join(lines), file=out)
    return EXIT_FAILED if any("not started" in line for line in lines) else EXIT_OK


def cmd_doctor(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb doctor"""
    from cli.diagnose import doctor

    words = terminal_words(settings)
    findings = asyncio.run(doctor(settings, words=words))
    marks = {mark: words.tr(mark) for mark in MARKS}
    width = max(columns(mark) for mark in marks.values())
    for f in findings:
        mark = marks[MARKS[0] if f.is_ok else (MARKS[1] if f.is_warning else MARKS[2])]
        print(f"{padded(mark, width)}  {padded(f.name, 14)} {f.detail}", file=out)
        if f.fix:
            fix = words.tr("fix: {fix}", fix=f.fix)
            print(f"{'':<{width}}  {'':<14} {fix}", file=out)
    return EXIT_FAILED if any(not f.is_ok and not f.is_warning for f in findings) else EXIT_OK


MARKS = (N_("ok"), N_("warn"), N_("FAIL"))  # kb doctor's first column: passed, a warning, failed


def padded(text: str, width: int) -> str:
    """``text`` and spaces to ``width`` columns (a Chinese letter takes two)."""
    return text + " " * max(0, width - columns(text))


def cmd_checkpoint(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb checkpoint"""
    from cli.diagnose import checkpoint

    results = asyncio.run(checkpoint(settings))
    for r in results:
        print(
            f"{'pass' if r.is_pass else 'FAIL'}  {r.case.name:<44} {r.ms:>7.0f} ms  [{r.reply.mode}]",
            file=out,
        )
        if not r.is_pass:
            print("      got: " + " ".join(plain(r.reply, ENGLISH).split())[:200], file=out)
    passed = sum(r.is_pass for r in results)
    print(f"{passed}/{len(results)} cases passed", file=out)
    return EXIT_OK if passed == len(results) else EXIT_FAILED


def cmd_bot(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb bot"""
    from bot.main import serve

    return serve(settings)


def cmd_logs(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb logs [-f] [-n N] [--event PREFIX]"""
    from cli.logview import follow, format_line, last_lines

    path = settings.log_path
    if not path.exists() and not args.follow:
        print(terminal_words(settings).tr("no log yet at {path}", path=path), file=out)
        return EXIT_OK
    wanted = args.event or ""
    lines = last_lines(path, args.n, event_prefix=wanted) if path.exists() else []
    for line in lines:
        print(format_line(line), file=out)
    if args.follow:
        for line in follow(path, event_prefix=wanted):
            print(format_line(line), file=out, flush=True)
    return EXIT_OK


def cmd_status(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb status [--json]"""
    # the second embedder is tried now (about a second): whether it can be asked is part of the status
    report = status_report(settings, model=asyncio.run(check_model(settings)), second=Second())
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2), file=out)
        return EXIT_OK
    words = terminal_words(settings)
    print("\n".join(status_lines(report, words)), file=out)
    ingests = report["last_ingests"]
    if ingests:
        print(words.tr("last ingests"), file=out)
        for rec in ingests:  # type: ignore[union-attr]
            detail = rec.get("doc_id") or rec.get("error", "")
            status = str(rec["status"])
            if words.language != "en":  # the status in words; an error's English message left to kb logs
                status, detail = words.tr(OUTCOMES.get(status, status)), rec.get("doc_id") or ""
            print(f"  {rec['finished_at']}  {padded(status, 9)} {Path(rec['path']).name}  {detail}", file=out)
    return EXIT_OK


async def check_model(settings: Settings) -> dict[str, object]:
    """Ask the configured model server whether it is up (for status reports)."""
    from knowledge.wiring import http_session, model_client

    async with http_session() as session:
        return await probe_model(model_client(settings, session))


def cmd_config(args: argparse.Namespace, settings: Settings, *, out: TextIO, err: TextIO) -> int:
    """kb config"""
    for env, value, origin, help_text in describe(settings):
        print(f"{env:<26} {value!s:<44} [{origin}]  {help_text}", file=out)
    return EXIT_OK


COMMANDS = {
    "run": Command(
        cmd_run,
        help="start kb: the inbox daemon and a search prompt in this terminal (the Telegram bot instead of the "
        "prompt when KB_TELEGRAM_TOKEN is set)",
        description="Start kb: the inbox daemon in the background and the terminal chat in the foreground. When "
        "KB_TELEGRAM_TOKEN is set, the Telegram bot takes the chat's place: lines typed in this terminal are "
        "not read (it says so), chat in Telegram or run kb chat in another terminal. Ctrl-C stops kb.",
    ),
    "daemon": Command(
        cmd_daemon,
        help="watch knowledge/inbox/ and raw/ and keep the index up to date",
        description="Watch knowledge/inbox/: every complete file (unchanged for KB_SETTLE_S) is converted, kept "
        "under processed/ (or failed/ with NAME.error.json) and indexed, in arrival order. Edits and deletions "
        "in knowledge/raw/ update the index. Stops cleanly on SIGTERM/SIGINT. One daemon per knowledge base.",
    ),
    "service": Command(
        cmd_service,
        help="install, remove or show kb's background services (launchd on macOS, systemd on Linux)",
        description="kb's three services: mlx (the model server, KB_MODEL on KB_LLM_URL's port, thinking "
        "off), daemon (the inbox) and bot (Telegram; only when KB_TELEGRAM_TOKEN is set). On macOS they are "
        "launchd agents in ~/Library/LaunchAgents (local.kb.NAME.plist, logs in runs/logs/NAME.*.log); on "
        "Linux systemd user units in ~/.config/systemd/user (kb-NAME.service, journalctl --user -u kb-NAME). "
        "Settings come from ~/.config/kb/env (KEY=value lines). They run this checkout's .venv on this "
        "knowledge base (KB_HOME).",
        arguments=_service_arguments,
    ),
    "doctor": Command(
        cmd_doctor, help="check the model server, tokenizer, index, inbox, OCR, voice and Telegram settings"
    ),
    "checkpoint": Command(
        cmd_checkpoint,
        help="run fixed cases against the model server: does this model work with kb?",
        description="Builds a small throw-away knowledge base and asks fixed questions: answered from the right "
        "document with citations, a question it cannot answer, arithmetic, a prompt-injection document. "
        "Prints pass/fail per case with timings; exit 1 when any case fails.",
    ),
    "bot": Command(
        cmd_bot,
        help="the Telegram bot (long polling): answers, web candidates as buttons, files, photos and voice notes",
        description="Serve the owner's Telegram chats. Needs KB_TELEGRAM_TOKEN and KB_TELEGRAM_ALLOWED_USERS "
        "(numeric user ids); KB_TELEGRAM_API_URL points at another Bot API server. Stops cleanly on SIGTERM.",
    ),
    "logs": Command(
        cmd_logs, help="show the structured log readably (runs/logs/kb.jsonl)", arguments=_logs_arguments
    ),
    "status": Command(
        cmd_status, help="documents, chunks, tokenizer, inbox and recent ingests", arguments=_status_arguments
    ),
    "config": Command(cmd_config, help="print every setting, its value and where it came from"),
}
