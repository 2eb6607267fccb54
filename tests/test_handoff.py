"""Handing files to the daemon: every delivery gets a name of its own, claimed atomically, and a file
is taken back only if the bytes at its name are still the ones delivered."""

import json
import threading

from knowledge.ingest.handoff import deliver, withdraw
from knowledge.ingest.raw import sha256_hex
from knowledge.ingest.sidecar import sidecar_path


def test_a_burst_of_saves_with_one_name_keeps_every_one(tmp_path):
    inbox, staging = tmp_path / "inbox", tmp_path / "staging"
    bodies = [f"note {n}\n".encode() * (1000 + n) for n in range(12)]
    paths: list = []
    start = threading.Barrier(len(bodies))

    def save(body: bytes) -> None:
        start.wait()
        paths.append(deliver(inbox, "note.md", body, {"n": len(body)}, staging=staging))

    threads = [threading.Thread(target=save, args=(body,)) for body in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(set(paths)) == len(bodies)
    assert sorted(p.read_bytes() for p in paths) == sorted(bodies)  # each whole, none mixed with another
    for p in paths:
        assert json.loads(sidecar_path(p).read_text())["n"] == len(p.read_bytes())  # each with its own
    assert [p.name for p in inbox.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_undo_of_a_file_whose_name_went_to_a_newer_one_leaves_the_newer_one(tmp_path):
    inbox, staging, processed = tmp_path / "inbox", tmp_path / "staging", tmp_path / "processed"
    processed.mkdir()
    first = deliver(inbox, "notes.txt", b"the first notes\n", {"v": 1}, staging=staging)
    first.rename(processed / first.name)  # the daemon keeps the original while it indexes it
    sidecar_path(first).rename(processed / sidecar_path(first).name)
    second = deliver(inbox, "notes.txt", b"the newer notes\n", {"v": 2}, staging=staging)
    assert second == first  # the name is free again, and given to the newer file

    assert withdraw(first, sha256_hex(b"the first notes\n"), staging=staging) is False
    assert second.read_bytes() == b"the newer notes\n" and json.loads(sidecar_path(second).read_text()) == {
        "v": 2
    }

    assert withdraw(second, sha256_hex(b"the newer notes\n"), staging=staging) is True
    assert list(inbox.iterdir()) == []
    assert (
        withdraw(second, sha256_hex(b"the newer notes\n"), staging=staging) is False
    )  # gone: nothing to take
