import json
import threading
from datetime import UTC, datetime, timedelta

from knowledge.websearch.store import CandidateStore

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RESULTS = [("Title A", "https://a.example/x", "snippet a"), ("Title B", "https://b.example/y", "snippet b")]


def store_at(path, now):
    return CandidateStore(path, clock=lambda: now)


def test_save_and_read_back_per_chat(tmp_path):
    path = tmp_path / "runs" / "web-search.json"
    record = store_at(path, NOW).save("chat-1", "question?", ["q1"], RESULTS)
    assert [c.id for c in record.candidates] == ["web-1", "web-2"] and len(record.search_id) == 8
    latest = store_at(path, NOW).latest("chat-1")
    assert latest == record and latest.candidate("web-2").url == "https://b.example/y"
    assert latest.candidate("web-3") is None and store_at(path, NOW).latest("chat-2") is None
    on_disk = json.loads(path.read_text())
    assert on_disk["chat-1"]["candidates"][0] == {"id": "web-1", "title": "Title A", "url": "https://a.example/x",
                                                  "snippet": "snippet a"}  # fmt: skip


def test_a_new_search_replaces_the_chats_previous_one(tmp_path):
    path = tmp_path / "web-search.json"
    first = store_at(path, NOW).save("c", "old", ["old"], RESULTS)
    second = store_at(path, NOW).save("c", "new", ["new"], RESULTS[:1])
    latest = store_at(path, NOW).latest("c")
    assert latest.search_id == second.search_id != first.search_id and len(latest.candidates) == 1


def test_records_expire(tmp_path):
    path = tmp_path / "web-search.json"
    store_at(path, NOW).save("c", "q", ["q"], RESULTS)
    assert store_at(path, NOW + timedelta(hours=23)).latest("c") is not None
    assert store_at(path, NOW + timedelta(hours=25)).latest("c") is None
    store_at(path, NOW + timedelta(hours=25)).save("other", "q", ["q"], RESULTS)
    assert set(json.loads(path.read_text())) == {"other"}  # expired records are dropped on write


def test_forget_and_a_damaged_file(tmp_path):
    path = tmp_path / "web-search.json"
    store_at(path, NOW).save("c", "q", ["q"], RESULTS)
    assert store_at(path, NOW).forget("c") and not store_at(path, NOW).forget("c")
    path.write_text("{not json")
    assert store_at(path, NOW).latest("c") is None
    store_at(path, NOW).save("c", "q", ["q"], RESULTS)
    assert store_at(path, NOW).latest("c") is not None


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "web-search.json"

    def write(n: int) -> None:
        store_at(path, NOW).save(f"chat-{n}", "q", ["q"], RESULTS)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(json.loads(path.read_text())) == {f"chat-{n}" for n in range(20)}
