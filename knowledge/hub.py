"""Files of a Hugging Face hub model, fetched by kb itself into a folder of its own.

One request per file to ``HF_ENDPOINT`` (default https://huggingface.co), with ``HF_TOKEN`` when
set. The body is streamed into a temporary file beside the target, refused past ``max_bytes`` (and
at once when it announces more), checked by the caller, and only then renamed into place: a failed
or refused download leaves nothing behind, and what was there before stays. The target is always
``folder / name`` with both chosen by kb: nothing in the answer (an ``ETag``, a redirect, a
``Content-Disposition``) names a path, and no hub cache layout is written. Redirects are followed
to http(s) only.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

DEFAULT_ENDPOINT = "https://huggingface.co"
CHUNK = 1 << 20


class HubError(Exception):
    """A file could not be fetched; ``kind`` is one of offline, unreachable, missing, too-large,
    bad-file, disk-full."""

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


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201 (urllib's signature)
        if not newurl.lower().startswith(("http://", "https://")):
            raise HubError("unreachable", f"the hub redirected to {newurl.split(':', 1)[0]}: refused")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def download(
    model_id: str,
    name: str,
    folder: Path,
    *,
    timeout_s: float,
    max_bytes: int,
    deadline_s: float | None = None,
    check: Callable[[Path], None] | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Path:
    """Fetch file ``name`` of ``model_id`` into ``folder/name``; raises HubError.

    ``timeout_s`` bounds each wait on the network, ``deadline_s`` (when given) the whole download;
    ``check`` is called with the finished temporary file and raises to refuse it; ``progress`` hears
    (bytes so far, announced size or None) after every chunk.
    """
    if os.sep in name or name in ("", ".", ".."):
        raise ValueError(f"not a file name: {name!r}")
    if is_offline():
        raise HubError("offline", "HF_HUB_OFFLINE is set")
    request = urllib.request.Request(file_url(model_id, name), headers={"User-Agent": "kb"})
    if os.environ.get("HF_TOKEN"):
        request.add_header("Authorization", f"Bearer {os.environ['HF_TOKEN']}")
    opener = urllib.request.build_opener(_HttpOnlyRedirects)
    started = clock()
    temporary: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with opener.open(request, timeout=timeout_s) as response:
            announced = _length(response.headers.get("Content-Length"))
            if announced is not None and announced > max_bytes:
                raise _too_large(model_id, name, max_bytes)
            fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
            with os.fdopen(fd, "wb") as out:
                got = 0
                while chunk := response.read(CHUNK):
                    got += len(chunk)
                    if got > max_bytes:
                        raise _too_large(model_id, name, max_bytes)
                    if deadline_s is not None and clock() - started > deadline_s:
                        raise HubError(
                            "unreachable",
                            f"{name} of {model_id} took longer than {deadline_s:.0f} s: stopped",
                        )
                    out.write(chunk)
                    if progress is not None:
                        progress(got, announced)
        if check is not None:
            _checked(check, Path(temporary), model_id, name)
        target = folder / name
        os.replace(temporary, target)
        temporary = None
        return target
    except urllib.error.HTTPError as exc:
        kind = "missing" if exc.code in (401, 403, 404) else "unreachable"
        raise HubError(kind, f"the hub answered {exc.code} for {name} of {model_id}") from exc
    except urllib.error.URLError as exc:
        raise HubError("unreachable", f"cannot reach the hub for {model_id}: {exc.reason}") from exc
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise HubError("disk-full", f"no space left for {name} of {model_id}") from exc
        raise HubError("unreachable", f"cannot reach the hub for {model_id}: {exc}") from exc
    except ValueError as exc:  # a malformed answer (http.client) or endpoint
        raise HubError("unreachable", f"cannot fetch {name} of {model_id}: {exc}") from exc
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


def _checked(check: Callable[[Path], None], path: Path, model_id: str, name: str) -> None:
    try:
        check(path)
    except HubError:
        raise
    except Exception as exc:  # whatever the file's own parser raises
        raise HubError("bad-file", f"{name} of {model_id} is not usable: {exc}") from exc


def _length(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _too_large(model_id: str, name: str, max_bytes: int) -> HubError:
    return HubError("too-large", f"{name} of {model_id} is larger than {max_bytes:,} bytes: refused")
