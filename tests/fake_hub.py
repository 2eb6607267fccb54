"""A Hugging Face hub stand-in on 127.0.0.1 (``HF_ENDPOINT``): serves files of any model, records requests.

Every answer carries a hostile ``ETag`` (a path out of any cache folder): a client that builds a
path from it writes outside its folder, which the tests check for. It answers ``Range: bytes=N-``
as the hub does (206 and the rest of the file), and can speak https with a certificate of its own
(:func:`self_signed`, trusted by the client through ``SSL_CERT_FILE``).
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import ipaddress
import re
import ssl
import threading
from pathlib import Path

from aiohttp import web

from tests.fake_llm import ThreadedServer
from tests.local_server import serve_app

HOSTILE_ETAG = '"../../../x/sitecustomize.py"'


class Hub:
    """``files`` maps a file name (of any model) to its bytes; ``status`` other than 200 answers every
    request with it; ``redirect`` maps a file name to a Location; ``slow`` sends bodies ``piece``
    bytes at a time with that many seconds between pieces; ``ranges`` False ignores Range (a plain
    200, as some mirrors do); ``linked`` sends the hub's ``X-Linked-Etag`` (the sha256) and
    ``X-Linked-Size``; ``hold`` maps a file name to an event its body waits for; ``tls`` serves https."""

    def __init__(
        self,
        files: dict[str, bytes],
        status: int = 200,
        *,
        redirect: dict[str, str] | None = None,
        slow: float = 0.0,
        piece: int = 65536,
        ranges: bool = True,
        linked: bool = False,
        hold: dict[str, threading.Event] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.files, self.status, self.seen, self.port = files, status, [], 0
        self.redirect, self.slow, self.piece = redirect or {}, slow, piece
        self.ranges, self.linked, self.hold, self.tls = ranges, linked, hold or {}, tls
        self.received: list[dict[str, str]] = []  # the headers of each request, in order

    def downloads(self) -> list[str]:
        """The file names fetched (GET) so far."""
        return [p.rsplit("/", 1)[1] for p in self.seen if p.startswith("GET ")]

    def authorizations(self) -> list[str | None]:
        """The Authorization header of each request, in order (None: not sent)."""
        return [headers.get("Authorization") for headers in self.received]

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def url(self, name: str, *, host: str = "127.0.0.1") -> str:
        """Where this hub serves file ``name`` of a model, by ``host``."""
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/acme/tiny/resolve/main/{name}"

    async def start(self, _: object):
        async def resolve(request: web.Request) -> web.StreamResponse:
            self.seen.append(f"{request.method} {request.path}")
            self.received.append(dict(request.headers))
            name = request.match_info["file"]
            if name in self.redirect:
                return web.Response(status=302, headers={"Location": self.redirect[name]})
            body = self.files.get(name)
            if self.status != 200 or body is None:
                return web.Response(status=self.status if self.status != 200 else 404)
            headers = {"ETag": HOSTILE_ETAG}
            if self.linked:
                headers.update({"X-Linked-Etag": f'"{hashlib.sha256(body).hexdigest()}"',
                                "X-Linked-Size": str(len(body))})  # fmt: skip
            status, start = 200, ranged(request.headers.get("Range")) if self.ranges else None
            if start is not None and start >= len(body):
                return web.Response(status=416, headers={"Content-Range": f"bytes */{len(body)}"})
            if start is not None:
                status, headers["Content-Range"] = 206, f"bytes {start}-{len(body) - 1}/{len(body)}"
                body = body[start:]
            if not self.slow and name not in self.hold:
                return web.Response(status=status, body=body, headers=headers)
            response = web.StreamResponse(status=status, headers=headers)
            await response.prepare(request)
            while name in self.hold and not self.hold[name].is_set():
                await asyncio.sleep(0.02)
            for at in range(0, len(body), self.piece):
                await response.write(body[at : at + self.piece])
                await asyncio.sleep(self.slow)
            await response.write_eof()
            return response

        app = web.Application()
        app.router.add_route("*", "/{owner}/{name}/resolve/{rev}/{file}", resolve)
        if self.tls is None:
            runner, self.port = await serve_app(app)
            return runner
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.tls)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return runner


def ranged(header: str | None) -> int | None:
    """Where ``Range: bytes=N-`` asks the body to start (the only form a download sends)."""
    found = re.fullmatch(r"bytes=(\d+)-", header or "")
    return int(found.group(1)) if found else None


def self_signed(folder: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context with a certificate for 127.0.0.1 and localhost, and the file a client trusts
    it by (``SSL_CERT_FILE``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kb test hub")])
    now = datetime.datetime.now(datetime.UTC)
    alt = x509.SubjectAlternativeName(
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    )
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1)).add_extension(alt, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_file, key_file = folder / "hub-cert.pem", folder / "hub-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context, cert_file


def ThreadedHub(hub: Hub) -> ThreadedServer:  # noqa: N802 - reads like the class it makes
    """The hub stand-in in a thread of its own, for kb subprocesses."""
    return ThreadedServer(hub, hub.start)
