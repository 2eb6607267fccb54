"""kb's own fetch of hub model files, against a hub stand-in on 127.0.0.1 that answers as a hostile mirror would."""

from __future__ import annotations

import fcntl
import os
import threading
import time

import pytest

from knowledge.model import hub as kb_hub
from knowledge.model.hub import HubError, download
from tests.audio_fixtures import voice_note
from tests.bot_env import OWNER, drop_note, running_bot, wait_indexed
from tests.fake_hub import Hub, self_signed
from tests.fake_llm import ThreadedServer, answer


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
    # what came is kept to be resumed, never in the place of the file
    assert caught.value.kind == "unreachable" and leftovers(tmp_path / "own") == [".weights.npz.part"]


def test_offline_asks_nothing(mirror, tmp_path, monkeypatch):
    hub = mirror(Hub({"config.json": b"{}"}))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as caught:
        download("acme/tiny", "config.json", tmp_path / "own", timeout_s=5, max_bytes=1000)
    assert caught.value.kind == "offline" and hub.seen == []


# -- a download that ends: stopped, resumed, swept, shared -------------------------------------

WEIGHTS = bytes(range(256)) * 8192  # 2 MiB, not all zeros: a resumed file is compared byte for byte


def in_thread(call):
    """Start ``call`` in a thread; (the thread, a dict that gets its "value" or "error")."""
    box: dict = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def test_a_stopped_download_ends_at_once_and_the_next_one_resumes_where_it_stopped(mirror, tmp_path):
    hub = mirror(Hub({"weights.npz": WEIGHTS}, slow=0.05, linked=True))  # 32 pieces, 1.6 s in all
    own = tmp_path / "own"
    own.mkdir()
    (own / "weights.npz").write_bytes(b"the previous weights")
    stop, coming, seen = threading.Event(), threading.Event(), []

    def progress(got: int, size: int | None) -> None:
        seen.append(got)
        if len(seen) == 3:  # kb is told to shut down while the file is coming
            coming.set()
            stop.wait(5)

    thread, box = in_thread(
        lambda: download(
            "acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 30, stop=stop, progress=progress
        )
    )
    assert coming.wait(5)
    stop.set()
    thread.join(5)  # a safety net: the stop is obeyed at the next piece
    assert not thread.is_alive() and len(seen) == 3  # not one more piece was read
    assert isinstance(box.get("error"), HubError) and box["error"].kind == "stopped", box
    assert "stopped" in str(box["error"])
    part = kb_hub.part_path(own, "weights.npz")
    assert leftovers(own) == [part.name, "weights.npz"]
    assert (own / "weights.npz").read_bytes() == b"the previous weights"
    kept = part.stat().st_size
    assert 0 < kept == seen[-1] < len(WEIGHTS)
    hub.slow = 0.0
    assert download("acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 30) == own / "weights.npz"
    assert hub.received[-1]["Range"] == f"bytes={kept}-"  # only the rest was asked for
    assert (own / "weights.npz").read_bytes() == WEIGHTS and leftovers(own) == ["weights.npz"]


def test_a_part_the_hub_checksum_refuses_is_dropped_and_the_file_fetched_afresh(mirror, tmp_path):
    hub = mirror(Hub({"weights.npz": WEIGHTS}, linked=True))
    own = tmp_path / "own"
    own.mkdir()
    kb_hub.part_path(own, "weights.npz").write_bytes(b"x" * 1000)  # of another version of the file
    with pytest.raises(HubError, match="checksum") as caught:
        download("acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 30)
    assert caught.value.kind == "bad-file" and leftovers(own) == []
    assert hub.received[-1]["Range"] == "bytes=1000-"
    download("acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 30)
    assert "Range" not in hub.received[-1] and (own / "weights.npz").read_bytes() == WEIGHTS


@pytest.mark.parametrize(
    ("ranges", "part"),
    [(False, WEIGHTS[:1000]), (True, WEIGHTS + b"more than the file")],
    ids=["mirror ignores Range", "part longer than the file (416)"],
)
def test_a_part_that_cannot_be_resumed_gives_the_whole_file_once(mirror, tmp_path, ranges, part):
    mirror(Hub({"weights.npz": WEIGHTS}, ranges=ranges))
    own = tmp_path / "own"
    own.mkdir()
    kb_hub.part_path(own, "weights.npz").write_bytes(part)
    download("acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 30)
    assert (own / "weights.npz").read_bytes() == WEIGHTS and leftovers(own) == ["weights.npz"]


def test_stale_parts_are_swept_when_a_download_starts_and_live_ones_are_left(mirror, tmp_path):
    mirror(Hub({"config.json": b"{}"}))
    own = tmp_path / "own"
    own.mkdir()
    stale = own / ".weights.npz.k2j4h1.part"  # a download killed two days ago (an older kb's name)
    busy = own / ".weights.safetensors.part"  # as old, but a download is writing it now (holds its lock)
    fresh = own / ".tokenizer.json.part"  # killed an hour ago: its next download resumes it
    mine = own / "notes.txt"  # not a .part: never touched
    two_days_ago = time.time() - 2 * 86400
    for path in (stale, busy, fresh, mine):
        path.write_bytes(b"x" * 100)
    for path in (stale, busy, mine):
        os.utime(path, (two_days_ago, two_days_ago))
    with busy.open("rb") as writer:
        fcntl.flock(writer, fcntl.LOCK_EX | fcntl.LOCK_NB)
        download("acme/tiny", "config.json", own, timeout_s=5, max_bytes=1000)
    assert leftovers(own) == sorted([fresh.name, busy.name, "config.json", "notes.txt"])


def test_two_downloads_of_one_file_fetch_it_once(mirror, tmp_path):
    release = threading.Event()
    hub = mirror(Hub({"weights.npz": WEIGHTS}, hold={"weights.npz": release}))
    own = tmp_path / "own"

    looked = threading.Semaphore(0)

    def clock() -> float:  # each read: the download's start, then each look while waiting for the .part
        looked.release()
        return time.monotonic()

    def fetch(clock=time.monotonic):
        return download("acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 30, clock=clock)

    first, first_box = in_thread(fetch)
    for _ in range(250):
        if hub.downloads():
            break
        time.sleep(0.02)
    second, second_box = in_thread(lambda: fetch(clock))  # a second voice note while the model is coming
    assert looked.acquire(timeout=5) and looked.acquire(timeout=5)  # it waits for the first one's .part
    release.set()
    first.join(10)
    second.join(10)
    assert first_box.get("value") == second_box.get("value") == own / "weights.npz", (first_box, second_box)
    assert hub.downloads() == ["weights.npz"] and (own / "weights.npz").read_bytes() == WEIGHTS
    assert leftovers(own) == ["weights.npz"]


async def test_the_first_voice_note_fetches_the_model_while_the_chat_keeps_answering(
    mirror, tmp_path, varn_site, whisper_en
):
    """The model takes minutes to come: a question typed meanwhile is answered meanwhile, and the
    voice note is answered when the model is there."""
    release = threading.Event()
    files = {name: (whisper_en / name).read_bytes() for name in ("config.json", "weights.safetensors")}
    hub = mirror(Hub(files, hold={"weights.safetensors": release}))
    try:
        model = {"KB_WHISPER_MODEL": "kb-tests/tiny-whisper"}  # on the hub, not yet in kb's folder
        async with running_bot(tmp_path / "kb", varn_site, **model) as (env, _):
            drop_note(env, "quillan.md", "# Lake Quillan\n\nLake Quillan is 317 metres deep.\n")
            await wait_indexed(env, 1)
            env.llm.script = [answer("Typed: it is 317 metres deep [1]."), answer("Spoken: 317 metres [1].")]
            env.telegram.push_voice(OWNER, OWNER, voice_note(2.0), duration=2)
            await env.bot_said(lambda c: "speech model is downloaded" in c.params["text"])
            await env.telegram.wait_until(lambda: "weights.safetensors" in hub.downloads(), timeout_s=15)
            await env.say("How deep is Lake Quillan?")
            await env.bot_said(lambda c: "Typed: it is 317 metres deep" in c.params["text"])
            assert not release.is_set()  # answered while the model was still coming
            release.set()
            await env.bot_said(
                lambda c: "I heard: “How deep is Lake Quillan?”" in c.params["text"], timeout_s=90
            )
            await env.bot_said(lambda c: "Spoken: 317 metres" in c.params["text"], timeout_s=30)
    finally:
        release.set()


# -- the token stays with the hub ---------------------------------------------------------------


@pytest.mark.parametrize("elsewhere", ["another port", "another host"])
def test_the_token_is_not_sent_where_the_hub_redirects(mirror, tmp_path, monkeypatch, elsewhere):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    other = mirror(Hub({"config.json": b"{}"}))
    hub = mirror(Hub({"moved.json": b"{}"}))  # HF_ENDPOINT
    hub.redirect["config.json"] = (
        other.url("config.json") if elsewhere == "another port" else hub.url("moved.json", host="localhost")
    )
    download("acme/tiny", "config.json", tmp_path / "own", timeout_s=5, max_bytes=1000)
    assert hub.authorizations() + other.authorizations() == ["Bearer hf_secret", None]


def test_over_https_the_token_follows_the_same_origin_only_and_never_down_to_http(
    mirror, tmp_path, monkeypatch
):
    tls, trusted = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(trusted))
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    plain = mirror(Hub({"config.json": b"{}"}))
    other = mirror(Hub({"config.json": b"{}"}, tls=tls))
    hub = mirror(Hub({"moved.json": b"{}"}, tls=tls))  # HF_ENDPOINT
    hub.redirect.update(
        {"config.json": hub.url("moved.json"), "tokenizer.json": other.url("config.json"),
         "vocab.json": plain.url("config.json")}
    )  # fmt: skip
    own = tmp_path / "own"
    download("acme/tiny", "config.json", own, timeout_s=5, max_bytes=1000)
    assert hub.authorizations() == ["Bearer hf_secret", "Bearer hf_secret"]  # the same origin: kept
    download("acme/tiny", "tokenizer.json", own, timeout_s=5, max_bytes=1000)
    assert other.authorizations() == [None]
    with pytest.raises(HubError, match="from https to http") as caught:
        download("acme/tiny", "vocab.json", own, timeout_s=5, max_bytes=1000)
    assert caught.value.kind == "unreachable" and plain.seen == []
    assert leftovers(own) == ["config.json", "tokenizer.json"]


@pytest.mark.parametrize(
    ("origin", "target", "keeps"),
    [
        ("https://huggingface.co/a/b/resolve/main/c", "https://huggingface.co/x/b/resolve/main/c", True),
        ("https://huggingface.co/a", "https://HuggingFace.co:443/b", True),
        ("https://huggingface.co/a", "https://cdn-lfs.hf.co/b", False),
        ("https://huggingface.co/a", "https://huggingface.co:8443/b", False),
        ("https://huggingface.co/a", "http://huggingface.co/b", False),
        ("http://127.0.0.1:8000/a", "http://127.0.0.1:8000/b", False),  # never over plain http
    ],
)
def test_the_token_is_kept_on_a_redirect_only_to_the_same_https_origin(origin, target, keeps):
    assert kb_hub.keeps_token(origin, target) is keeps


# -- one deadline for the whole download --------------------------------------------------------


def test_a_mirror_that_trickles_bytes_fails_at_the_deadline_not_never(mirror, tmp_path):
    """A byte every 2.5 s (by a clock the test moves), each well inside the 5 s wait for one read: the
    deadline of the whole download ends it, on time, and the previous file stays in place."""
    mirror(Hub({"weights.npz": b"PK" + bytes(998)}, slow=0.01, piece=1))
    own = tmp_path / "own"
    own.mkdir()
    (own / "weights.npz").write_bytes(b"the previous weights")
    now, pieces = [0.0], []

    def progress(got: int, size: int | None) -> None:
        pieces.append(got)
        now[0] += 2.5

    thread, box = in_thread(
        lambda: download("acme/tiny", "weights.npz", own, timeout_s=5, max_bytes=1 << 20, deadline_s=10,
                         progress=progress, clock=lambda: now[0])
    )  # fmt: skip
    thread.join(8)  # a safety net
    assert not thread.is_alive(), "still downloading from a mirror that trickles"
    assert len(pieces) == 4 and now[0] == 10  # stopped at the first read past the deadline
    failure = box.get("error")
    assert isinstance(failure, HubError) and failure.kind == "unreachable", box
    assert "weights.npz of acme/tiny took longer than 10 s" in str(failure)
    assert (own / "weights.npz").read_bytes() == b"the previous weights"
