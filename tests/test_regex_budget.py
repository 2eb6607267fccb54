"""Every regular expression in kb's code, on 100 KB of hostile text, finishes within a bound.

A pattern with nested or overlapping repeats (``\\s+(.+?)\\s*#*\\s*$``) takes time cubic in
the length of a line an attacker wrote; a search that rescans the rest of the text from every
position is quadratic. Either turns one document, title or question into minutes of CPU.

The patterns are found, not listed: every compiled pattern a module holds (alone or in a
dict, list or tuple) and every literal pattern passed to ``re.sub``, ``re.match``… in the
source. Each runs the way the code runs it (a pattern only ever used with ``fullmatch`` is
tried with ``fullmatch``; an unknown use gets every method), in a child process per batch,
so a runaway pattern is named instead of hanging the suite.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FUZZ_SAMPLE_EVERY

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("knowledge", "daemon", "bot", "cli")
SIZE = 100_000
CALL_BOUND_S = 1.0  # linear patterns take milliseconds on 100 KB; quadratic ones take minutes
_RE_FUNCS = {"compile", "sub", "subn", "match", "search", "fullmatch", "findall", "finditer", "split"}
_SCANS = {"sub", "subn", "search", "findall", "finditer", "split"}

# Runs of these, with and without a tail that breaks a match at the very end.
ATOMS = [
    " ", "\t", "\n", "a", "y", "1", "1.", "1-", "-", "#", "# ", "a-", "a.", "a ", "a1", ".", "=", "'", "\\",
    "*", "(", "[1]", "<", "<a ", "<!--", "<meta ", "<|", "http://", "web-", "what is ", "\x80", "ราคา", "中",
]  # fmt: skip
TAILS = ("", "!x\x00")
# Anchored patterns only meet a long run after their own opening: these give them one.
PREFIXES = ("# ", "title:", "<meta ", "what is ", "1")
PREFIXED_ATOMS = (" ", "\t", "a", "1", "-", "#")


def hostile_texts() -> list[tuple[str, str]]:
    """(label, text) pairs of about 100 KB each."""
    out = [(repr(a), a * (SIZE // len(a)) + t) for a in ATOMS for t in TAILS]
    out += [(repr(p + a), p + a * SIZE + t) for p in PREFIXES for a in PREFIXED_ATOMS for t in TAILS]
    return out


def module_names() -> list[tuple[str, Path]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            out.append((name, path))
    return out


def inventory() -> list[dict]:
    """Every pattern, where it is, and the methods the code calls on it."""
    found: dict[tuple[object, int], dict] = {}
    for name, path in module_names():
        module = importlib.import_module(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        uses: dict[str, set[str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = node.func.value
                if isinstance(target, ast.Name):
                    uses.setdefault(target.id, set()).add(node.func.attr)

        def walk(obj: object, where: str, methods: set[str], depth: int = 0) -> None:
            if isinstance(obj, re.Pattern):
                _add(found, obj, where, methods)
            elif depth < 2 and isinstance(obj, dict):
                for key, value in obj.items():
                    walk(value, f"{where}[{key!r}]", {"compile"}, depth + 1)
            elif depth < 2 and isinstance(obj, list | tuple):
                for n, value in enumerate(obj):
                    walk(value, f"{where}[{n}]", {"compile"}, depth + 1)

        for attr, obj in vars(module).items():
            if getattr(obj, "__module__", name) == name or isinstance(obj, re.Pattern | dict | list | tuple):
                known = uses.get(attr, set()) & (_RE_FUNCS - {"compile"})
                walk(obj, f"{name}.{attr}", known or {"compile"})
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = node.func.value
                if (
                    isinstance(target, ast.Name) and target.id == "re" and node.func.attr in _RE_FUNCS
                    and node.args and isinstance(node.args[0], ast.Constant)
                ):  # fmt: skip
                    flags = 0
                    flag_nodes = [kw.value for kw in node.keywords if kw.arg == "flags"]
                    if node.func.attr == "compile" and len(node.args) > 1:
                        flag_nodes.append(node.args[1])
                    for flag_node in flag_nodes:
                        flags = eval(compile(ast.Expression(flag_node), path.name, "eval"), {"re": re})
                    pattern = re.compile(node.args[0].value, flags)
                    if node.func.attr == "compile" and (pattern.pattern, pattern.flags) in found:
                        continue  # a module's own pattern: its uses were read from the module
                    methods = {"compile"} if node.func.attr == "compile" else {node.func.attr}
                    _add(found, pattern, f"{name}:{node.lineno}", methods)

    return list(found.values())


def _add(found: dict, pattern: re.Pattern, where: str, methods: set[str]) -> None:
    key = (pattern.pattern, pattern.flags)
    entry = found.setdefault(
        key, {"where": where, "pattern": pattern.pattern, "flags": pattern.flags, "methods": set()}
    )
    entry["methods"] |= methods


def run_batch(entries: list[dict], every: int = 1) -> None:
    """In the child: time each pattern on every ``every``-th hostile string; print one JSON line per pattern."""
    import time

    for entry in entries:
        source = entry["pattern"]
        pattern = re.compile(source.encode("latin-1") if entry["is_bytes"] else source, entry["flags"])
        methods = set(entry["methods"])
        if "compile" in methods:  # used in ways this test cannot see: every way
            methods = {"search", "match", "fullmatch"}
        print(json.dumps({"start": entry["where"]}), flush=True)
        worst = (0.0, "")
        for label, text in hostile_texts()[::every]:
            subject = text.encode("utf-8") if entry["is_bytes"] else text
            t0 = time.perf_counter()
            if methods & _SCANS:
                for _ in pattern.finditer(subject):
                    pass
            if "match" in methods:
                pattern.match(subject)
            if "fullmatch" in methods:
                pattern.fullmatch(subject)
            took = time.perf_counter() - t0
            worst = max(worst, (took, label))
        print(json.dumps({"done": entry["where"], "worst_s": worst[0], "atom": worst[1]}), flush=True)


def _serialise(entries: list[dict]) -> list[dict]:
    out = []
    for e in entries:
        is_bytes = isinstance(e["pattern"], bytes)
        out.append({
            "where": e["where"], "flags": e["flags"], "methods": sorted(e["methods"]), "is_bytes": is_bytes,
            "pattern": e["pattern"].decode("latin-1") if is_bytes else e["pattern"],
        })  # fmt: skip
    return out


def test_the_inventory_finds_the_patterns_it_must():
    places = {e["where"] for e in inventory()}
    for expected in ("knowledge.convert.text._HEADING", "knowledge.websearch.plan._ARITHMETIC"):
        assert any(p.startswith(expected) for p in places), expected
    assert len(places) > 60


@pytest.mark.fuzz
def test_every_regex_finishes_on_100_kb_of_hostile_text(request):
    every = 1 if request.config.getoption("--fuzz-full") else FUZZ_SAMPLE_EVERY  # all texts in make fuzz
    entries = _serialise(inventory())
    slow: list[str] = []
    pending = entries
    while pending:
        child = subprocess.Popen(
            [sys.executable, "-c", "import json, sys; from tests.test_regex_budget import run_batch; "
             f"run_batch(json.load(sys.stdin), {every})"],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        child.stdin.write(json.dumps(pending))
        child.stdin.close()
        done: set[str] = set()
        current = None
        timer = _Deadline(child, seconds=30)
        for line in child.stdout:
            event = json.loads(line)
            if "start" in event:
                current = event["start"]
                timer.restart()
            else:
                done.add(event["done"])
                if event["worst_s"] > CALL_BOUND_S:
                    slow.append(f"{event['done']}: {event['worst_s']:.1f} s on {event['atom']} runs")
        timer.cancel()
        child.wait()
        if current is not None and current not in done:
            slow.append(f"{current}: did not finish (killed)")
            done.add(current)
        pending = [e for e in pending if e["where"] not in done]
    assert not slow, "patterns over the bound:\n" + "\n".join(slow)


class _Deadline:
    """Kill the child when one pattern runs past its time."""

    def __init__(self, child: subprocess.Popen, *, seconds: float) -> None:
        import threading

        self._child, self._seconds, self._threading = child, seconds, threading
        self._timer: threading.Timer | None = None
        self.restart()

    def restart(self) -> None:
        self.cancel()
        self._timer = self._threading.Timer(self._seconds, self._child.kill)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
