"""The stand-in's HTTP side: aiohttp routes, request decoding, dispatch, getUpdates and serving."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fake_telegram.errors import CONFLICT_OTHER_POLL, CONFLICT_WEBHOOK, ApiError, bad_request
from tests.fake_telegram.methods import HANDLERS
from tests.fake_telegram.records import Call
from tests.local_server import serve_app

TOKEN_RE = re.compile(r"^\d+:[\w-]+$")
# Fields whose values are JSON inside a form (PTB json.dumps everything that is not a str).
JSON_FIELDS = frozenset(
    {
        "reply_markup",
        "allowed_updates",
        "link_preview_options",
        "commands",
        "reply_parameters",
        "entities",
        "caption_entities",
        "scope",
        "media",
        "results",
    }
)
INT_FIELDS = frozenset(
    {
        "chat_id",
        "message_id",
        "offset",
        "limit",
        "message_thread_id",
        "cache_time",
        "from_chat_id",
        "reply_to_message_id",
        "user_id",
        "draft_id",
    }
)
FLOAT_FIELDS = frozenset({"timeout"})
BOOL_FIELDS = frozenset(
    {
        "disable_notification",
        "protect_content",
        "show_alert",
        "drop_pending_updates",
        "disable_web_page_preview",
        "allow_sending_without_reply",
        "allow_paid_broadcast",
    }
)
# Update types delivered when allowed_updates was never set or set to [].
DEFAULT_EXCLUDED_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})


@dataclass
class Failure:
    """The failure ``fail_next`` armed for the next calls of a method."""

    status: int
    description: str
    parameters: dict | None
    drop: bool
    remaining: int


class _ClientGone(Exception):
    """The client closed its call: a held getUpdates (PTB does on stop) or one cancelled mid-send."""


CLIENT_GONE = 499  # nginx's "client closed request": the status recorded for such a call


class Poller:
    """A getUpdates request being held."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()
        self.terminated = False


class Server:
    """FakeTelegram over HTTP: the app, its handlers and the failures a test arms."""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", r"/bot{token:[^/]*}/{method:[^/]*}", self._handle_api)
        app.router.add_route("GET", r"/file/bot{token:[^/]*}/{path:.+}", self._handle_file)
        app.on_startup.append(self._on_startup)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    async def _on_shutdown(self, app: web.Application) -> None:
        poller = self._poller
        if poller is not None:
            poller.terminated = True
            poller.wake.set()

    def _wake_pollers(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._wake_now()
        else:
            loop.call_soon_threadsafe(self._wake_now)

    def _wake_now(self) -> None:
        if self._poller is not None:
            self._poller.wake.set()

    async def _read_params(self, request: web.Request) -> tuple[dict, dict]:
        """(raw, files): the request's fields as received, and uploaded files by field."""
        raw: dict[str, Any] = dict(request.query)
        files: dict[str, tuple[str, bytes]] = {}
        if request.method in ("GET", "HEAD"):
            return raw, files
        ctype = request.headers.get("Content-Type", "")
        if ctype.startswith("application/json"):
            body = await request.read()
            if body.strip():
                try:
                    obj = json.loads(body)
                except ValueError:
                    raise bad_request("can't parse JSON request body") from None
                if not isinstance(obj, dict):
                    raise bad_request("JSON request body must be an object")
                raw.update(obj)
        elif ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    files[key] = (value.filename, value.file.read())
                    raw[key] = f"<file {value.filename}>"
                else:
                    raw[key] = value
        else:
            await request.read()
        return raw, files

    @staticmethod
    def _decode(raw: dict) -> dict:
        params: dict[str, Any] = {}
        for key, value in raw.items():
            if key in JSON_FIELDS and isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    what = "reply keyboard markup" if key == "reply_markup" else key
                    raise bad_request(f"can't parse {what} JSON object") from None
            elif key in INT_FIELDS and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    value = int(value)
            elif key in FLOAT_FIELDS and isinstance(value, str):
                try:
                    value = float(value)
                    value = int(value) if value.is_integer() else value
                except ValueError:
                    raise bad_request(f"wrong parameter {key} in request") from None
            elif key in BOOL_FIELDS and isinstance(value, str):
                value = value.lower() in ("true", "1")
            params[key] = value
        return params

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        method = request.match_info["method"]
        with self._lock:
            call = Call(
                index=len(self._calls),
                method=method,
                params={},
                raw={},
                http_method=request.method,
                content_type=request.headers.get("Content-Type"),
                time=time.monotonic(),
            )
            self._calls.append(call)
        try:
            try:
                try:
                    raw, files = await self._read_params(request)
                except ConnectionResetError:  # the client hung up while sending (a cancelled call)
                    raise _ClientGone from None
                call.raw = raw
                call.params = self._decode(raw)
                if files:
                    call.params["_files"] = {k: v[0] for k, v in files.items()}
                    call.params["_uploads"] = files  # (file name, bytes) by field, for sendDocument
                if not TOKEN_RE.match(token):
                    raise ApiError(404, "Not Found")
                if token != self.token:
                    raise ApiError(401, "Unauthorized")
                handler = HANDLERS.get(method.lower())
                if handler is None and method.lower() != "getupdates":
                    raise ApiError(404, "Not Found")
                failure = self._take_failure(method)
                if failure is not None:
                    if failure.drop:
                        call.status, call.response = 0, {"dropped": True}
                        if request.transport is not None:
                            request.transport.close()
                        return web.Response(status=200)
                    raise ApiError(failure.status, failure.description, failure.parameters)
                if handler is None:  # getUpdates, the one method that waits
                    result = await self._get_updates(call.params, request)
                else:
                    with self._lock:
                        result = handler(self, call.params)
                    if (gate := self._held.get(method.lower())) is not None:
                        await gate.wait()  # done, and answered only when the test says so
                body: dict[str, Any] = {"ok": True, "result": result}
                status = 200
            except ApiError as exc:
                body, status = exc.body(), exc.status
            except _ClientGone:
                call.status, call.response = CLIENT_GONE, {"client_gone": True}
                return web.Response(status=CLIENT_GONE)
        except Exception as exc:  # a bug in the stand-in: answer like Telegram's 500 and keep it
            self.errors.append(exc)
            error = ApiError(500, "Internal Server Error")
            body, status = error.body(), error.status
        call.response, call.status = body, status
        return web.json_response(body, status=status)

    def hold(self, method: str) -> asyncio.Event:
        """From now on, calls of ``method`` take effect at once but are answered only once the event
        returned is set: a request in flight when its sender moves on."""
        gate = self._held[method.lower()] = asyncio.Event()
        return gate

    def fail_next(
        self,
        method: str,
        *,
        retry_after: int | None = None,
        status: int | None = None,
        description: str | None = None,
        drop: bool = False,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail (before any other check).

        ``retry_after=N`` → 429 "Too Many Requests: retry after N" with parameters.retry_after;
        ``status``/``description`` → that error (e.g. 403 "Forbidden: bot was blocked by the
        user", 502 "Bad Gateway"); ``drop=True`` → the connection is closed without an answer.
        """
        if retry_after is not None:
            failure = Failure(
                status or 429,
                description or f"Too Many Requests: retry after {retry_after}",
                {"retry_after": retry_after},
                drop,
                times,
            )
        else:
            code = status or (0 if drop else 500)
            failure = Failure(code, description or _default_description(code), None, drop, times)
        with self._lock:
            self._failures.setdefault(method.lower(), []).append(failure)

    def _take_failure(self, method: str) -> Failure | None:
        with self._lock:
            queue = self._failures.get(method.lower())
            if not queue:
                return None
            failure = queue[0]
            failure.remaining -= 1
            if failure.remaining <= 0:
                queue.pop(0)
            return failure

    async def _handle_file(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        path = request.match_info["path"]
        with self._lock:
            stored = self._files_by_path.get(path)
            self.downloads.append(path)
        if token != self.token:
            error = ApiError(401, "Unauthorized")
        elif stored is None:
            error = ApiError(404, "Not Found")
        else:
            return web.Response(body=stored.data, content_type="application/octet-stream")
        return web.json_response(error.body(), status=error.status)

    # ---- getUpdates, the one method that waits ------------------------------------------------

    async def _get_updates(self, params: dict, request: web.Request) -> list[dict]:
        if self.webhook_url:
            raise ApiError(409, CONFLICT_WEBHOOK)
        previous, me = self._poller, Poller()
        if previous is not None:  # Telegram ends the older request
            previous.terminated = True
            previous.wake.set()
        self._poller = me
        try:
            offset = int(params.get("offset") or 0)
            limit = int(params.get("limit") or 100)
            limit = min(max(limit, 1), 100)
            timeout = max(float(params.get("timeout") or 0), 0.0)
            allowed = params.get("allowed_updates")
            with self._lock:
                if allowed is not None:
                    if not isinstance(allowed, list):
                        raise bad_request("can't parse allowed updates")
                    self.allowed_updates = [str(a) for a in allowed]
                self._confirm(offset)
            deadline = self.poll_clock() + timeout
            while True:
                with self._lock:
                    batch = self._select(limit)
                remaining = deadline - self.poll_clock()
                if batch or remaining <= 0:
                    return batch
                me.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(me.wake.wait(), min(remaining, 0.05))
                if me.terminated:
                    # A client that gave up on this poll (PTB cancels it on stop) and then polled
                    # again has closed the connection: let the close arrive before answering.
                    await asyncio.sleep(0.02)
                    if _gone(request):
                        raise _ClientGone
                    raise ApiError(409, CONFLICT_OTHER_POLL)
                if _gone(request):
                    raise _ClientGone
        finally:
            if self._poller is me:
                self._poller = None

    def _confirm(self, offset: int) -> None:
        if offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        elif offset < 0:
            self._updates = self._updates[offset:]

    def _select(self, limit: int) -> list[dict]:
        allowed = self.allowed_updates
        keep = []
        for update in self._updates:
            kind = next((k for k in update if k != "update_id"), None)
            if allowed:
                ok = kind in allowed
            else:
                ok = kind not in DEFAULT_EXCLUDED_UPDATES
            if ok:
                keep.append(update)
        self._updates = keep  # updates of types not asked for are not delivered at all
        return [json.loads(json.dumps(u)) for u in keep[:limit]]


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _default_description(status: int) -> str:
    return {
        0: "connection dropped",
        400: "Bad Request",
        403: "Forbidden: bot was blocked by the user",
        409: "Conflict",
        500: "Internal Server Error",
        502: "Bad Gateway",
    }.get(status, "Error")


async def serve(fake: Server) -> web.AppRunner:
    """Serve ``fake`` on a free port of 127.0.0.1 in the running loop; sets its base URLs."""
    runner, port = await serve_app(fake.app(), shutdown_timeout=2.0)
    fake.base_url = f"http://127.0.0.1:{port}/bot"
    fake.base_file_url = f"http://127.0.0.1:{port}/file/bot"
    return runner
