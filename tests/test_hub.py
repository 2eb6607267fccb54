"""kb's own fetch of hub model files, against a hub stand-in on 127.0.0.1 that answers as a hostile mirror would."""

from __future__ import annotations

import pytest

from knowledge.hub import HubError, download
from tests.fake_hub import Hub
from tests.fake_llm import ThreadedServer


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    """Start a Hub and point HF_ENDPOINT at it; the test's folder is the working folder (where a
    path taken from the ETag would land)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    servers = []

    def start(hub: Hub) -> Hub:
        server = ThreadedServer(hub, hub.start)
        server.__enter__()
        servers.append(server)
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        return hub

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def leftovers(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_the_file_lands_where_kb_says_whatever_the_etag(mirror, tmp_path):
    mirror(Hub({"config.json": b'{"n_mels": 128}'}))
    own = tmp_path / "models" / "acme--tiny"
    assert download("acme/tiny", "config.json", own, timeout_s=5, max_bytes=1000) == own / "config.json"
    assert (own / "config.json").read_bytes() == b'{"n_mels": 128}'
    assert leftovers(tmp_path) == ["config.json"]  # no x/sitecustomize.py, no blobs/, no .part


def test_too_large_is_refused_while_streaming_and_what_was_there_stays(mirror, tmp_path):
    hub = mirror(Hub({"weights.npz": b"PK" + bytes(3 << 20)}, slow=0.001))  # streamed: no Content-Length
    own = tmp_path / "own"
    own.mkdir()
    (own / "weights.npz").write_bytes(b"the previous weights")
    with pytest.raises(HubError, match="larger than 1,048,576 bytes") as caught:
        download("acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 20)
    assert caught.value.kind == "too-large"
    assert leftovers(own) == ["weights.npz"] and (own / "weights.npz").read_bytes() == b"the previous weights"
    # announced too large: refused before the body is read
    hub.slow = 0.0
    with pytest.raises(HubError) as caught:
        download("acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 20)
    assert caught.value.kind == "too-large" and leftovers(own) == ["weights.npz"]


def test_a_file_its_check_refuses_is_not_kept(mirror, tmp_path):
    mirror(Hub({"config.json": b"{not json"}))

    def check(path):
        import json

        json.loads(path.read_bytes())

    with pytest.raises(HubError, match="config.json of acme/tiny is not usable") as caught:
        download("acme/tiny", "config.json", tmp_path / "own", timeout_s=5, max_bytes=1000, check=check)
    assert caught.value.kind == "bad-file" and leftovers(tmp_path / "own") == []


@pytest.mark.parametrize(
    ("hub", "kind", "says"),
    [
        (Hub({}, status=404), "missing", "answered 404"),
        (Hub({}, status=401), "missing", "answered 401"),
        (Hub({}, status=503), "unreachable", "answered 503"),
        (Hub({}, redirect={"config.json": "file:///etc/passwd"}), "unreachable", "answered 302"),
        (
            Hub({}, redirect={"config.json": "ftp://127.0.0.1:9/x"}),
            "unreachable",
            "redirected to ftp: refused",
        ),
    ],
)
def test_what_the_mirror_answers_instead_is_a_named_failure(mirror, tmp_path, hub, kind, says):
    mirror(hub)
    with pytest.raises(HubError, match=says) as caught:
        download("acme/tiny", "config.json", tmp_path / "own", timeout_s=5, max_bytes=1000)
    assert caught.value.kind == kind and leftovers(tmp_path / "own") == []


def test_a_mirror_that_trickles_is_stopped_at_the_deadline(mirror, tmp_path):
    mirror(Hub({"weights.npz": bytes(64 << 10) * 40}, slow=0.1))  # 40 pieces, 4 s in all
    with pytest.raises(HubError, match="took longer than 1 s") as caught:
        download("acme/tiny", "weights.npz", tmp_path / "own", timeout_s=5, max_bytes=1 << 30, deadline_s=1.0)
    assert caught.value.kind == "unreachable" and leftovers(tmp_path / "own") == []


def test_offline_asks_nothing(mirror, tmp_path, monkeypatch):
    hub = mirror(Hub({"config.json": b"{}"}))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as caught:
        download("acme/tiny", "config.json", tmp_path / "own", timeout_s=5, max_bytes=1000)
    assert caught.value.kind == "offline" and hub.seen == []
