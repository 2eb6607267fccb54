"""The MCP server's pure parts, as tables: the HTTP guard's verdicts, the size caps, kb doctor's warning."""

from __future__ import annotations

import gc
import os
import warnings

import pytest

from cli.diagnose import mcp_finding
from mcpserver.bounds import MAX_QUERY_CHARS, TooLong, check_query, fit_texts, take_lines
from mcpserver.http import marked, refusal, serving

TOKEN = "s3cret-token"


@pytest.mark.parametrize(
    ("headers", "token", "verdict"),
    [
        ({"host": "127.0.0.1:8765"}, "", None),
        ({"host": "localhost:8765", "origin": "http://localhost:3000"}, "", None),
        ({"host": "[::1]:8765", "origin": "http://[::1]:8765"}, "", None),
        ({"host": "localhost"}, "", None),
        ({"host": "evil.example:8765"}, "", (421, "host")),
        ({"host": "127.0.0.1.nip.io:8765"}, "", (421, "host")),
        ({"host": "localhost.evil.example"}, "", (421, "host")),
        ({}, "", (421, "host")),
        ({"host": "127.0.0.1:8765", "origin": "http://evil.example"}, "", (403, "origin")),
        ({"host": "127.0.0.1:8765", "origin": "http://127.0.0.1.evil.example"}, "", (403, "origin")),
        ({"host": "127.0.0.1:8765", "origin": "null"}, "", (403, "origin")),
        ({"host": "127.0.0.1:8765", "origin": "file://"}, "", (403, "origin")),
        ({"host": "127.0.0.1:8765"}, TOKEN, (401, "token")),
        ({"host": "127.0.0.1:8765", "authorization": "Bearer s3cret-toke"}, TOKEN, (401, "token")),
        ({"host": "127.0.0.1:8765", "authorization": f"Bearer {TOKEN}x"}, TOKEN, (401, "token")),
        ({"host": "127.0.0.1:8765", "authorization": TOKEN}, TOKEN, (401, "token")),
        ({"host": "127.0.0.1:8765", "authorization": f"Bearer {TOKEN}"}, TOKEN, None),
        (
            {"host": "evil.example", "authorization": f"Bearer {TOKEN}"},
            TOKEN,
            (421, "host"),
        ),  # a token is no pass
    ],
)
def test_the_guard_lets_only_loopback_requests_with_the_token_through(headers, token, verdict):
    assert refusal(headers, token) == verdict


def test_a_query_over_the_limit_or_empty_is_refused_with_its_length():
    assert check_query("  How deep?  ") == "How deep?"
    assert check_query("x" * MAX_QUERY_CHARS) == "x" * MAX_QUERY_CHARS
    with pytest.raises(TooLong, match="is 4,001 characters; at most 4,000"):
        check_query("x" * 4001)
    with pytest.raises(TooLong, match="the question is empty"):
        check_query(" \n", what="question")


def test_texts_fit_the_budget_the_first_ones_whole():
    cut = fit_texts(["aaaa", "bbbb", "cccc"], 6)
    assert cut.texts == ["aaaa", "bb", ""] and cut.is_cut == [False, True, True]
    assert fit_texts(["a", "b"], 10).is_cut == [False, False]


@pytest.mark.parametrize(
    ("start", "end", "caps", "shown", "next_line"),
    [
        (None, None, {}, (1, 5), None),
        (2, 3, {}, (2, 3), None),
        (4, 99, {}, (4, 5), None),  # past the end: up to the last line
        (1, None, {"max_lines": 2}, (1, 2), 3),
        (1, None, {"max_chars": 13}, (1, 2), 3),  # "line 1\nline 2" is 13 characters
        (5, 5, {"max_chars": 3}, (5, 5), None),  # one line longer than the cap: cut, not dropped
    ],
)
def test_lines_are_taken_within_the_caps_and_say_where_the_rest_starts(start, end, caps, shown, next_line):
    lines = [f"line {n}" for n in range(1, 6)]
    got = take_lines(lines, start, end, **caps)
    assert (got.first, got.last) == shown and got.next_line == next_line
    assert got.text.split("\n")[0].startswith(lines[shown[0] - 1][: caps.get("max_chars", 99)])


@pytest.mark.parametrize(("start", "end"), [(0, 2), (6, None), (3, 2)])
def test_a_range_outside_the_document_is_refused(start, end):
    with pytest.raises(ValueError, match="not in the document"):
        take_lines(["a", "b", "c", "d", "e"], start, end)


def test_doctor_warns_while_http_serves_without_a_token(tmp_path, run_kb):
    assert mcp_finding(None) is None
    assert mcp_finding({"pid": 1, "port": 8765, "token": True}).is_ok
    with marked(tmp_path / "runs", port=8765, has_token=False):
        assert serving(tmp_path / "runs") == {"pid": os.getpid(), "port": 8765, "token": False}
        out = run_kb("--home", str(tmp_path), "doctor")
    assert "warn  mcp http" in out.stdout and "KB_MCP_TOKEN" in out.stdout, out.stdout
    assert serving(tmp_path / "runs") is None  # the marker goes with the server
    assert "mcp http" not in run_kb("--home", str(tmp_path), "doctor").stdout


def test_kb_mcp_usage_and_a_port_in_use_are_said(tmp_path, run_kb):
    import socket

    assert "--http" in run_kb("mcp", "--help").stdout
    usage = run_kb("--home", str(tmp_path), "mcp", "--port", "8765")
    assert usage.returncode == 2 and "--port goes with --http" in usage.stderr
    with socket.socket() as taken, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", ResourceWarning)
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = run_kb("--home", str(tmp_path), "mcp", "--http", "--port", str(port))
        gc.collect()  # a socket left open on the way out would be reported here
    assert busy.returncode == 1 and f"port {port} on 127.0.0.1 is in use" in busy.stderr
    assert not [w for w in said if "unclosed" in str(w.message)]
