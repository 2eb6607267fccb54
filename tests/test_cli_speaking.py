"""kb summarize and kb digest from the command line."""

import json

from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings
from tests.fake_llm import FakeLLM, Step, ThreadedFakeLLM, free_port
from tests.test_summary import LONG


def test_kb_summarize_reads_a_long_document_in_parts_and_says_so(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"harbour.md": LONG})
    with Index(make_settings(home).index_path, readonly=True) as index:
        [doc] = index.documents()
    fake = FakeLLM(responder=lambda body: Step(
        answer="The log counts boats [1] and tides [2]." if "Summarise the whole document" in body["messages"][-1]["content"]
        else "Boats were counted [1]."
    ))  # fmt: skip
    with ThreadedFakeLLM(fake) as served:
        env = {"KB_LLM_URL": served.base_url, "KB_CONTEXT_TOKENS": "1500", "KB_MAX_OUTPUT_TOKENS": "256"}
        done = run_kb("--home", str(home), "summarize", doc.id, env=env)
        as_json = run_kb("--home", str(home), "summarize", "--json", doc.id, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "The harbour log\n\nThe log counts boats [1] and tides [2].\n[1] raw/harbour-"
    )
    assert "Reading part 3 of " in done.stderr
    found = json.loads(as_json.stdout)
    assert found["kind"] == "model" and found["parts"] > 2 and found["calls"] == found["parts"] + 1
    assert [c["number"] for c in found["citations"]] == [1, 2]
    dead = run_kb(
        "--home", str(home), "summarize", doc.id, env={"KB_LLM_URL": f"http://127.0.0.1:{free_port()}/v1"}
    )
    assert dead.returncode == 1 and "On day 1 the harbour master counted 3 boats" in dead.stdout
    assert "(its opening lines: the model is not running)" in dead.stdout
    missing = run_kb("--home", str(home), "summarize", "doc-0000000000000000")
    assert missing.returncode == 1 and "no document" in missing.stderr


def test_kb_digest_shows_the_week_then_nothing_new_since(tmp_path, run_kb):
    home = tmp_path / "kb"
    ingest_texts(make_settings(home), {"ferry.md": "# Ferry timetable\n\nThe ferry leaves at nine.\n"})
    first = run_kb("--home", str(home), "digest")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("Digest: ") and "Files\n  • Ferry timetable  (doc-" in first.stdout
    again = run_kb("--home", str(home), "digest")
    assert again.stdout.startswith("Nothing was kept or asked since ")
    week = json.loads(run_kb("--home", str(home), "digest", "--since", "7d", "--json").stdout)
    assert [i["title"] for i in week["groups"]["files"]] == ["Ferry timetable"]
    bad = run_kb("--home", str(home), "digest", "--since", "yesterday")
    assert bad.returncode == 2 and "24h, 7d or 2w" in bad.stderr
    chinese = run_kb("--home", str(home), "digest", "--since", "7d", env={"KB_LANGUAGE": "zh-Hant"})
    assert "檔案" in chinese.stdout and "Files" not in chinese.stdout
