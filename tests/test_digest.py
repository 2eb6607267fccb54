"""The digest without the model: grouped by how things came, the questions left open, one thing
from long ago; its schedule and its period."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from knowledge.report.digest import Schedule, kind_of, last_due, make_digest, parse_schedule, parse_since
from knowledge.store.index import Index
from knowledge.words.catalog import Words
from knowledge.words.digest import digest_plain
from tests.conftest import ingest_texts

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def backdate(settings, title: str, days: float) -> None:
    with Index(settings.index_path) as index:
        at = (NOW - timedelta(days=days)).isoformat(timespec="seconds")
        index.conn.execute("UPDATE documents SET indexed_at = ? WHERE title = ?", (at, title))


def test_a_week_grouped_with_its_summaries_open_questions_and_one_thing_from_long_ago(settings):
    ingest_texts(settings, {
        "ferry-timetable.md": "# Ferry timetable\n\nThe ferry to Varn leaves at nine from pier two.\n",
        "note-pier.md": "# Pier note\n\nMeet at pier two before the ferry to Varn.\n",
        "voice-note-20261201-080000.md": "# Voice note, 2026-12-01 08:00 UTC\n\nBuy rope for the boat.\n",
        "old-ferry.md": "# The old Varn ferry\n\nThe ferry to Varn was first run in 1921 from pier two.\n",
        "old-unrelated.md": "# Sourdough\n\nFeed the starter with flour and water.\n",
    })  # fmt: skip
    for title, days in [("Ferry timetable", 1), ("Pier note", 2), ("Voice note, 2026-12-01 08:00 UTC", 2),
                        ("The old Varn ferry", 90), ("Sourdough", 120)]:  # fmt: skip
        backdate(settings, title, days)
    with Index(settings.index_path) as index:
        timetable = next(d for d in index.documents() if d.title == "Ferry timetable")
        index.put_summary(timetable, "model", "en", "When the ferry to Varn leaves.", NOW.isoformat())
        digest = make_digest(index, ["How deep is the harbour?", "How deep is the harbour?"],
                             since=NOW - timedelta(days=7), until=NOW)  # fmt: skip
    assert {g: [i.title for i in items] for g, items in digest.groups.items()} == {
        "files": ["Ferry timetable"], "notes": ["Pier note"], "voice": ["Voice note, 2026-12-01 08:00 UTC"],
    }  # fmt: skip
    assert digest.groups["files"][0].summary == "When the ferry to Varn leaves."
    assert digest.unanswered == ["How deep is the harbour?"]
    assert digest.resurfaced is not None and digest.resurfaced.title == "The old Varn ferry"
    text = digest_plain(digest, Words("en"))
    assert text.startswith("Digest: Nov 26, 2026 – Dec 3, 2026\n\nFiles\n  • Ferry timetable  (doc-")
    assert "    When the ferry to Varn leaves." in text and "Questions left unanswered\n  • How deep" in text
    assert "From long ago, about “" in text and "Sourdough" not in text
    chinese = digest_plain(digest, Words("zh-Hant"))
    assert "Files" not in chinese and "Ferry timetable" in chinese


def test_an_empty_period_says_so():
    from knowledge.report.digest import Digest

    assert (
        digest_plain(Digest(NOW - timedelta(days=7), NOW), Words("en"))
        == "Nothing was kept or asked since Nov 26, 2026."
    )


@pytest.mark.parametrize(
    ("text", "now", "due"),
    [
        ("daily@08:00", datetime(2026, 12, 3, 9, 0), datetime(2026, 12, 3, 8, 0)),
        ("daily@08:00", datetime(2026, 12, 3, 7, 0), datetime(2026, 12, 2, 8, 0)),
        ("weekly@mon-08:00", datetime(2026, 12, 3, 9, 0), datetime(2026, 11, 30, 8, 0)),  # a Thursday
        ("weekly@thu-10:00", datetime(2026, 12, 3, 9, 0), datetime(2026, 11, 26, 10, 0)),
    ],
)
def test_the_digest_that_fell_due_last(text, now, due):
    schedule = parse_schedule(text)
    assert last_due(schedule, now) == due


def test_schedules_and_periods_are_read_strictly():
    assert parse_schedule("off") is None
    assert parse_schedule("weekly@sun-21:30") == Schedule(21, 30, 6)
    assert parse_since("7d") == timedelta(days=7) and parse_since("2w") == timedelta(days=14)
    assert parse_since("36h") == timedelta(hours=36)
    for bad in ("7", "0d", "yesterday", "-3d"):
        with pytest.raises(ValueError):
            parse_since(bad)


def test_kb_digest_is_off_by_default_and_refuses_a_bad_schedule(tmp_path):
    from knowledge.errors import ConfigError
    from tests.conftest import make_settings

    assert make_settings(tmp_path).digest == "off"
    assert make_settings(tmp_path, KB_DIGEST="Weekly@Mon-08:00").digest == "weekly@mon-08:00"
    with pytest.raises(ConfigError, match="KB_DIGEST"):
        make_settings(tmp_path, KB_DIGEST="daily@25:00")


def test_how_a_document_came(settings):
    ingest_texts(settings, {"forward-a-post.md": "# A post\n\ntext\n", "report.pdf.md": "# Report\n\ntext\n"})
    with Index(settings.index_path, readonly=True) as index:
        kinds = {d.title: kind_of(d) for d in index.documents()}
    assert kinds == {"A post": "notes", "Report": "files"}


def test_kb_digest_in_a_terminal_shows_everything_newest_first_and_only_its_own_questions(settings, run_kb):
    from knowledge.conversation.store import Conversations

    for n in range(1, 69):  # 68 logs kept one after the other, most of them within the same second
        ingest_texts(
            settings, {f"log-{n}.md": f"# Harbour log {n}\n\nThe harbour master counted {n} boats.\n"}
        )
    store = Conversations(settings.conversations_path)
    for key, question in (("cli:pond", "When does the zebrafish sleep?"), ("tg:42", "When is my biopsy?")):
        turn = store.current(key)
        store.add_turn(turn.id, message=question, standalone=question, answer="", cited=[])
    counted = "How many boats did the harbour master count?"
    for cited in ([], ["chunk-1"]):  # asked, left open, asked again later and answered: not open
        store.add_turn(
            store.current("cli:pond").id, message=counted, standalone=counted, answer="", cited=cited
        )
    store.add_turn(store.current("cli:pond").id, message="Thanks!", standalone="Thanks!", answer="", cited=[])
    shown = run_kb("--home", str(settings.home), "digest", "--since", "1d")
    assert shown.returncode == 0, shown.stderr
    logs = [
        line.split("  (doc-")[0].strip("• ") for line in shown.stdout.splitlines() if "Harbour log" in line
    ]
    assert logs == [f"Harbour log {n}" for n in range(68, 0, -1)] and "more" not in shown.stdout
    assert "When does the zebrafish sleep?" in shown.stdout and "biopsy" not in shown.stdout
    data = json.loads(run_kb("--home", str(settings.home), "digest", "--since", "1d", "--json").stdout)
    assert [i["title"] for i in data["groups"]["files"]][:2] == ["Harbour log 68", "Harbour log 67"]
    assert len(data["groups"]["files"]) == 68 and data["unanswered"] == ["When does the zebrafish sleep?"]
