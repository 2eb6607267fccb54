"""What kb prints to a terminal carries no control character from a document, a title or a file name."""

import json

import pytest

from cli.terminal import neutralise

CONTROLS = ("\x1b", "\x07", "\x9b", "\x08", "\r", "\u202e")


@pytest.mark.parametrize(
    ("text", "shown"),
    [("plain\ttext\n", "plain\ttext\n"), ("\x1b]52;c;ZXZpbA==\x07", "\\u001b]52;c;ZXZpbA==\\u0007"),
     ("a\x9b31mb", "a\\u009b31mb"), ("abc\u202edef", "abc\\u202edef"), ("bs\x08\x7f", "bs\\u0008\\u007f")],
)  # fmt: skip
def test_neutralise(text, shown):
    assert neutralise(text) == shown


def test_ingest_search_status_and_logs_print_no_control_characters(tmp_path, run_kb):
    src = tmp_path / "src"
    src.mkdir()
    name = "evil\x1b]0;pwned\x07\u202e.md"
    prose = "The okapi lives in the rainforests of the Congo and eats leaves, grasses and fruit. " * 6
    # A few escape sequences inside an otherwise ordinary document (a text of mostly controls is refused as binary).
    (src / name).write_text(
        f"# Title \x1b[2J\x07bell\n\nThe \x1b[31mred\x1b[0m okapi \x9b6n hides.\n\n{prose}\n"
    )
    home = tmp_path / "kb"
    outputs = [run_kb("--home", str(home), "ingest", str(src))]
    outputs.append(run_kb("--home", str(home), "search", "okapi"))
    as_json = run_kb("--home", str(home), "search", "--json", "okapi")
    outputs += [as_json, run_kb("--home", str(home), "status"), run_kb("--home", str(home), "logs")]
    for done in outputs:
        assert done.returncode == 0, done.stderr
        for ch in CONTROLS:
            assert ch not in done.stdout and ch not in done.stderr, (done.args, ch)
    assert "okapi" in outputs[1].stdout and "\\u001b" in outputs[1].stdout
    result = json.loads(as_json.stdout)[0]  # still valid JSON, with the document's own characters
    assert "\x1b[31mred" in result["text"] and result["source_name"] == name
