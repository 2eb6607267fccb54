"""Files of a Hugging Face hub model, fetched by kb itself into a folder of its own.

One request per file to ``HF_ENDPOINT`` (default https://huggingface.co), with ``HF_TOKEN`` when
set. The body is streamed into ``folder/.name.part``, refused past ``max_bytes`` (and at once when
it announces more), checked against the size and sha256 the hub gives (``X-Linked-Size``,
``X-Linked-Etag``) and by the caller, and only then renamed into place: what was there before stays
until then. The target is always ``folder / name`` with both chosen by kb: nothing in the answer (an
``ETag``, a redirect, a ``Content-Disposition``) names a path, and no hub cache layout is written.

A download ends: one deadline bounds all of it (read in small pieces, the socket waiting no longer
than the time left), and a ``stop`` event (kb shutting down) ends it between two pieces. What came
stays in the ``.part`` and the next download of the file resumes it with a Range request (from
the start when the server ignores it); a ``.part`` nobody has written to for a day, and that no
download holds (each holds its own under an exclusive lock), is swept when a download starts. A
second download of a file another one is fetching waits for it and takes its result.

The token is sent to the endpoint only: on a redirect it is sent again only to the same origin over
https. Redirects are followed to http(s) only, and never from https down to http.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import http.client
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import structlog

from knowledge.errors import KbError

log = structlog.get_logger()

DEFAULT_ENDPOINT = "https://huggingface.co"
PIECE = 64 << 10  # one read: the deadline and the stop event are looked at between two
DEFAULT_DEADLINE_S = 300.0  # a file whose caller names no deadline (a tokenizer is 2-20 MB)
STALE_PART_S = 24 * 3600.0  # a .part nobody wrote to for this long is swept
WAIT_POLL_S = 0.2  # how often a download waiting for another one's .part looks again
DISCARDED = frozenset({"missing", "too-large", "bad-file"})  # failures whose .part is not worth resuming


class HubError(KbError):
    """A file could not be fetched; ``kind`` is one of offline, unreachable, missing, too-large,
    bad-file, disk-full, stopped."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def own_name(model_id: str) -> str:
    """The folder name of a model in kb's own folders: ``owner--name``."""
    return model_id.replace("/", "--")


def is_hub_id(spec: str) -> bool:
    """Does spec look like ``owner/name`` on the Hugging Face hub (and not like a path)?"""
    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}", spec)) and not Path(spec).exists()


def is_offline() -> bool:
    """``HF_HUB_OFFLINE`` set to a true value."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def file_url(model_id: str, name: str) -> str:
    """Where the hub (or the mirror ``HF_ENDPOINT`` names) serves a model's file."""
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    return f"{endpoint}/{model_id}/resolve/main/{name}"


def part_path(folder: Path, name: str) -> Path:
    """Where the download of ``folder/name`` is written until it is complete (and resumed from)."""
    return folder / f".{name}.part"


def keeps_token(origin: str, target: str) -> bool:
    """May a redirect from the endpoint ``origin`` to ``target`` carry the token? Only to the same
    host and port, both over https."""
    a, b = urlsplit(origin), urlsplit(target)
    return a.scheme == b.scheme == "https" and (a.hostname, a.port or 443) == (b.hostname, b.port or 443)


# -- redirects ------------------------------------------------------------------------------


class _Redirects(urllib.request.HTTPRedirectHandler):
    """http(s) only, never https to http; the token again only for the same https origin; and the
    size and sha256 the hub gives on a redirect (to its file store) remembered."""

    def __init__(self, origin: str, token: str | None, what: str) -> None:
        self.origin, self.token, self.what, self.linked = origin, token, what, {}

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201 (urllib's signature)
        scheme = newurl.split(":", 1)[0].lower()
        if scheme not in ("http", "https"):
            raise HubError("unreachable", f"the hub redirected to {scheme}: refused")
        if urlsplit(req.full_url).scheme == "https" and scheme == "http":
            host = urlsplit(newurl).hostname  # not the URL: a file store's carries a signature
            log.warning("hub.redirect_refused", file=self.what, host=host, reason="https-to-http")
            raise HubError(
                "unreachable",
                f"the hub redirected {self.what} from https to http ({host}): refused, kb does not fetch "
                "over plain http what it asked for over https; check HF_ENDPOINT and the mirror",
            )
        for key in ("X-Linked-Etag", "X-Linked-Size"):
            if headers.get(key) and key not in self.linked:
                self.linked[key] = headers[key]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and self.token and keeps_token(self.origin, newurl):
            new.add_unredirected_header("Authorization", f"Bearer {self.token}")
        return new


# -- the download ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Limits:
    what: str  # "config.json of acme/tiny", for messages
    timeout_s: float
    deadline_s: float
    max_bytes: int
    until: float  # the deadline on ``clock``
    clock: Callable[[], float]
    stop: threading.Event | None

    def left_s(self) -> float:
        return self.until - self.clock()

    def enforce(self, got: int) -> None:
        """Raise when kb is stopping or the deadline has passed."""
        if self.stop is not None and self.stop.is_set():
            log.info("hub.download_aborted", file=self.what, reason="stopped", bytes=got)
            raise HubError(
                "stopped",
                f"the download of {self.what} was stopped: kb is shutting down; it resumes next time",
            )
        if self.left_s() <= 0:
            raise self.late(got)

    def late(self, got: int) -> HubError:
        log.warning("hub.download_aborted", file=self.what, reason="deadline", bytes=got)
        return HubError(
            "unreachable",
            f"{self.what} took longer than {self.deadline_s:g} s to download and was stopped: the hub "
            "(or the HF_ENDPOINT mirror) sends too slowly; try again later, it resumes where it stopped",
        )


def download(
    model_id: str,
    name: str,
    folder: Path,
    *,
    timeout_s: float,
    max_bytes: int,
    deadline_s: float = DEFAULT_DEADLINE_S,
    check: Callable[[Path], None] | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Path:
    """Fetch file ``name`` of ``model_id`` into ``folder/name``; raises HubError.

    ``timeout_s`` bounds each wait on the network, ``deadline_s`` the whole download; ``stop`` (a
    threading.Event) ends it at the next piece (or when a silent server's wait ends); ``check`` is
    called with the finished file before it is put in place and raises to refuse it; ``progress``
    hears (bytes so far, size or None) after every piece.
    """
    if os.sep in name or name in ("", ".", ".."):
        raise ValueError(f"not a file name: {name!r}")
    if is_offline():
        raise HubError("offline", "HF_HUB_OFFLINE is set")
    what = f"{name} of {model_id}"
    limits = _Limits(what, timeout_s, deadline_s, max_bytes, clock() + deadline_s, clock, stop)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        sweep_parts(folder, now_s=time.time())
        with _claimed(part_path(folder, name), limits) as (out, shared):
            if shared is not None and _inode(folder / name) == shared:  # the one waited for put it in place
                log.info("hub.download_shared", file=what)
                part_path(folder, name).unlink()  # the empty one this download claimed meanwhile
                return folder / name
            return _download_into(out, file_url(model_id, name), folder / name, limits, check, progress)
    except urllib.error.HTTPError as exc:
        exc.close()  # the error is the response too: its connection closed here, not when collected
        kind = "missing" if exc.code in (401, 403, 404) else "unreachable"
        raise HubError(kind, f"the hub answered {exc.code} for {what}") from exc
    except urllib.error.URLError as exc:
        raise HubError("unreachable", f"cannot reach the hub for {model_id}: {exc.reason}") from exc
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise HubError("disk-full", f"no space left for {what}") from exc
        raise HubError("unreachable", f"cannot reach the hub for {model_id}: {exc}") from exc
    except (http.client.HTTPException, ValueError) as exc:  # a malformed or cut answer, or endpoint
        raise HubError("unreachable", f"cannot fetch {what}: {exc}") from exc


def _download_into(
    out: BinaryIO,
    url: str,
    target: Path,
    limits: _Limits,
    check: Callable[[Path], None] | None,
    progress: Callable[[int, int | None], None] | None,
) -> Path:
    """Fill the claimed ``.part`` (resuming it), verify it and rename it to ``target``; on failure the
    ``.part`` stays for the next download unless it is worth nothing."""
    part = Path(out.name)
    try:
        try:
            expected = _fetch(url, out, limits, progress)
        except urllib.error.HTTPError as exc:
            if exc.code != 416:  # Range Not Satisfiable: the .part is no prefix of this file
                raise
            exc.close()
            _empty(out)
            expected = _fetch(url, out, limits, progress)
        out.flush()
        _verify(part, expected, limits.what)
        if check is not None:
            _checked(check, part, limits.what)
        os.replace(part, target)
        return target
    except BaseException as exc:
        if out.tell() == 0 or _is_worthless(exc):
            part.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class _Expected:
    size: int | None
    sha256: str | None


def _fetch(
    url: str, out: BinaryIO, limits: _Limits, progress: Callable[[int, int | None], None] | None
) -> _Expected:
    """Ask for the rest of the file (after what ``out`` holds) and append it; what it should be."""
    offset = out.seek(0, os.SEEK_END)
    limits.enforce(offset)
    token = os.environ.get("HF_TOKEN")
    request = urllib.request.Request(url, headers={"User-Agent": "kb"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    if token:  # unredirected: urllib does not copy it onto a redirect (_Redirects decides)
        request.add_unredirected_header("Authorization", f"Bearer {token}")
    redirects = _Redirects(url, token, limits.what)
    opener = urllib.request.build_opener(redirects)
    try:
        response = opener.open(request, timeout=max(0.01, min(limits.timeout_s, limits.left_s())))
    except (TimeoutError, urllib.error.URLError) as exc:
        if limits.left_s() <= 0 and _is_timeout(exc):
            raise limits.late(offset) from exc
        raise
    with response:
        offset = _resume_at(response, out, offset, limits.what)
        expected = _expected(response, redirects.linked, offset)
        if expected.size is not None and expected.size > limits.max_bytes:
            raise _too_large(limits)
        _stream(response, out, offset, expected.size, limits, progress)
    return expected


def _resume_at(response: http.client.HTTPResponse, out: BinaryIO, offset: int, what: str) -> int:
    """Where the answer's body goes in the file: after the .part (206), or from the start (200)."""
    if response.status == 206:
        found = re.fullmatch(r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get("Content-Range", ""))
        if found is None or int(found.group(1)) != offset:
            _empty(out)  # a part kb did not ask for: the next download starts afresh
            raise HubError(
                "unreachable", f"the hub answered another range of {what} than kb asked for; try again"
            )
        log.info("hub.download_resumed", file=what, bytes=offset)
        return offset
    if offset:
        log.info("hub.range_ignored", file=what, bytes=offset)
        _empty(out)
    return 0


def _expected(response: http.client.HTTPResponse, linked: dict[str, str], offset: int) -> _Expected:
    """The file's size (from the answer or the hub's X-Linked-Size) and sha256 (X-Linked-Etag), when given."""
    headers = response.headers
    size = _length(headers.get("X-Linked-Size") or linked.get("X-Linked-Size"))
    if size is None and response.status == 206:
        size = _length(headers.get("Content-Range", "").rpartition("/")[2])
    elif size is None and (length := _length(headers.get("Content-Length"))) is not None:
        size = offset + length
    etag = (headers.get("X-Linked-Etag") or linked.get("X-Linked-Etag") or "").removeprefix("W/").strip('"')
    return _Expected(size, etag.lower() if re.fullmatch(r"[0-9a-fA-F]{64}", etag) else None)


def _stream(
    response: http.client.HTTPResponse,
    out: BinaryIO,
    got: int,
    size: int | None,
    limits: _Limits,
    progress: Callable[[int, int | None], None] | None,
) -> None:
    """Append the body piece by piece, the socket waiting no longer than the deadline leaves."""
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    while True:
        limits.enforce(got)
        if sock is not None:
            sock.settimeout(max(0.01, min(limits.timeout_s, limits.left_s())))
        try:
            piece = response.read1(PIECE)
        except TimeoutError as exc:
            if limits.left_s() <= 0:
                raise limits.late(got) from exc
            raise
        if not piece:
            return
        got += len(piece)
        if got > limits.max_bytes:
            raise _too_large(limits)
        out.write(piece)
        if progress is not None:
            progress(got, size)


def _verify(part: Path, expected: _Expected, what: str) -> None:
    """The file is as long as the hub said, and has its sha256 when the hub gave one."""
    got = part.stat().st_size
    if expected.size is not None and got < expected.size:
        raise HubError(
            "unreachable",
            f"the hub ended {what} after {got:,} of {expected.size:,} bytes; try again, it resumes there",
        )
    if expected.size is not None and got > expected.size:
        raise HubError(
            "bad-file", f"{what} is longer than the {expected.size:,} bytes the hub gives: refused"
        )
    if expected.sha256 is not None and _sha256(part) != expected.sha256:
        log.warning("hub.checksum_mismatch", file=what, sha256=expected.sha256)
        raise HubError(
            "bad-file", f"{what} does not match the checksum the hub gives for it: deleted, try again"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


# -- the .part files: claimed, swept --------------------------------------------------------


@contextlib.contextmanager
def _claimed(part: Path, limits: _Limits) -> Iterator[tuple[BinaryIO, int | None]]:
    """The ``.part`` open for appending under an exclusive lock (released on exit), and None, or the
    inode of the ``.part`` another download held while this one waited for it."""
    shared = None
    while True:
        out = part.open("ab")
        try:
            fcntl.flock(out, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            shared = os.fstat(out.fileno()).st_ino
            out.close()
            limits.enforce(0)
            time.sleep(WAIT_POLL_S)
            continue
        if _inode(part) == os.fstat(out.fileno()).st_ino:
            break
        out.close()  # put in place or swept while this one waited for it: claim the path again
    with out:
        yield out, shared


def sweep_parts(folder: Path, *, now_s: float, older_than_s: float = STALE_PART_S) -> list[str]:
    """Delete the ``.part`` files in ``folder`` nobody has written to for ``older_than_s`` and no
    download holds (killed downloads, files no longer asked for); their names."""
    swept = []
    for path in folder.glob(".*.part"):
        with contextlib.suppress(OSError), path.open("rb") as fh:
            age_s = now_s - os.fstat(fh.fileno()).st_mtime
            if age_s < older_than_s:
                continue
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a download is writing it
            if _inode(path) == os.fstat(fh.fileno()).st_ino:
                path.unlink()
                swept.append(path.name)
                log.info("hub.part_swept", file=path.name, age_h=round(age_s / 3600, 1))
    return swept


def _empty(out: BinaryIO) -> None:
    out.seek(0)
    out.truncate(0)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


# -- small parts ----------------------------------------------------------------------------


def _is_worthless(exc: BaseException) -> bool:
    """Does this failure make what came useless to resume (the file is gone, refused or not this one)?"""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in (401, 403, 404)
    return isinstance(exc, HubError) and exc.kind in DISCARDED


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError)


def _checked(check: Callable[[Path], None], path: Path, what: str) -> None:
    try:
        check(path)
    except HubError:
        raise
    except Exception as exc:  # whatever the file's own parser raises
        raise HubError("bad-file", f"{what} is not usable: {exc}") from exc


def _length(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _too_large(limits: _Limits) -> HubError:
    return HubError("too-large", f"{limits.what} is larger than {limits.max_bytes:,} bytes: refused")
