"""The SSRF-guarded fetcher against real local servers.

No packet leaves the machine: names are answered by an injected resolver, and the injected connect
hook refuses to create a socket for any non-loopback address. Local servers are reachable only through
the test-only ``allow_hosts`` pair; a recording listener that is NOT allowlisted proves that nothing
the guard refused reached a socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import socket
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from structlog.testing import capture_logs
from yarl import URL

from knowledge.errors import FetchRefused
from knowledge.websearch.fetch import Fetcher, MiB, check_address, check_url, decide_kind, numeric_host

PUBLIC = "93.184.215.14"  # answered by the fake resolver only; the connect hook would refuse to dial it
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
ELF = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 200
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
PAGE = b"<!doctype html><html><head><title>Hi</title></head><body><p>Hello</p></body></html>"


# ---------------------------------------------------------------- test doubles


class MapResolver(AbstractResolver):
    """Answers names from a table (a list, or a list per successive call); unknown names fail like NXDOMAIN."""

    def __init__(self, table: dict[str, list[str] | list[list[str]]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        self.calls.append(host)
        answer = self.table.get(host.rstrip("."))
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if answer and isinstance(answer[0], list):  # one answer per call, the last one repeating
            answer = answer[min(self.calls.count(host), len(answer)) - 1]
        return [
            {
                "hostname": host,
                "host": ip,
                "port": port,
                "family": socket.AF_INET6 if ":" in ip else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for ip in answer
        ]

    async def close(self) -> None:
        pass


@dataclass
class Dialled:
    """The 'real' socket creation for tests: records every address and never leaves loopback."""

    calls: list[tuple] = field(default_factory=list)

    def __call__(self, addr_info: tuple) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        self.calls.append(sockaddr)
        if not ipaddress.ip_address(sockaddr[0]).is_loopback:
            raise OSError(f"test hook: refusing to dial {sockaddr[0]}, which is off this machine")
        return socket.socket(family, type_, proto)


@dataclass
class Listener:
    """A plain TCP listener on 127.0.0.1 and ::1 (same port) that records every connection."""

    port: int = 0
    hits: list[tuple[str, bytes]] = field(default_factory=list)


def _zeros_gzip(size: int) -> bytes:
    """``size`` zero bytes, gzip-compressed (a decompression bomb)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    return b"".join(packer.compress(block) for _ in range(size // MiB)) + packer.flush()


BOMB = _zeros_gzip(100 * MiB)


@dataclass
class Site:
    """The allowlisted local web server and the requests it saw."""

    port: int
    requests: list[str] = field(default_factory=list)

    def url(self, path: str, **query: str) -> str:
        return str(URL(f"http://127.0.0.1:{self.port}{path}").with_query(query or None))


def _app(site: Site) -> web.Application:
    async def record(request: web.Request, handler: Callable) -> web.StreamResponse:
        site.requests.append(request.path if request.path == "/to" else request.path_qs)
        return await handler(request)

    async def body(request: web.Request) -> web.Response:
        kinds = {"page": (PAGE, "text/html; charset=utf-8"), "pdf-as-html": (PDF, "text/html"),
                 "elf-as-pdf": (ELF, "application/pdf"), "png": (PNG, "image/png"),
                 "json": (b'{"a": 1}', "application/json"), "js": (b"alert(1)", "application/javascript"),
                 "zip": (b"PK\x03\x04" + bytes(40), "application/octet-stream"),
                 "octet-pdf": (PDF, "application/octet-stream"), "notes.md": (b"# Notes\n\ntext", "text/plain"),
                 "md": (b"# Title\n\nbody", "text/markdown"), "html-as-pdf": (PAGE, "application/pdf"),
                 "plain": (b"just words", "text/plain; charset=iso-8859-1")}  # fmt: skip
        data, ctype = kinds[request.match_info["name"]]
        return web.Response(body=data, headers={"Content-Type": ctype})

    async def chain(request: web.Request) -> web.Response:
        left = int(request.match_info["n"])
        if left == 0:
            return web.Response(body=PAGE, content_type="text/html")
        return web.Response(status=301, headers={"Location": f"/chain/{left - 1}"})

    async def to(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": request.query["location"]})

    async def big(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})  # chunked: no Content-Length
        await resp.prepare(request)
        left = int(request.query["n"])
        with contextlib.suppress(ConnectionError):  # the guard hung up
            while left > 0:
                await resp.write(b"a" * min(left, MiB))
                left -= MiB
            await resp.write_eof()
        return resp

    async def bomb(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):  # the guard hung up
            for i in range(0, len(BOMB), 64 * 1024):
                await resp.write(BOMB[i : i + 64 * 1024])
            await resp.write_eof()
        return resp

    async def slow(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):  # the guard hung up
            for _ in range(200):  # a slow loris: one byte at a time, each well inside the read limit
                await resp.write(b"x")
                await asyncio.sleep(float(request.query.get("every", "0.25")))
        return resp

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no such page")

    app = web.Application(middlewares=[web.middleware(record)])
    app.router.add_get("/chain/{n}", chain)
    app.router.add_get("/to", to)
    app.router.add_get("/big", big)
    app.router.add_get("/bomb", bomb)
    app.router.add_get("/slow", slow)
    app.router.add_get("/missing", missing)
    app.router.add_get("/{name}", body)
    return app


# ---------------------------------------------------------------- fixtures


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    """The recording listener every refused URL would reach if the guard failed."""
    rec = Listener()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rec.hits.append((writer.get_extra_info("peername")[0], b""))  # recorded on accept, before any byte
        with contextlib.suppress(TimeoutError, ConnectionError):
            rec.hits[-1] = (rec.hits[-1][0], await asyncio.wait_for(reader.read(1024), 0.5))
        writer.close()

    v4 = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    rec.port = v4.sockets[0].getsockname()[1]
    v6 = await asyncio.start_server(on_connect, "::1", rec.port)
    yield rec
    for server in (v4, v6):
        server.close()
        await server.wait_closed()


async def start_site() -> tuple[web.AppRunner, Site]:
    """Start the test web app on 127.0.0.1 (an ephemeral port)."""
    site = Site(port=0)
    runner = web.AppRunner(_app(site), access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    site.port = runner.addresses[0][1]
    return runner, site


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    """The allowlisted local web server."""
    runner, s = await start_site()
    yield s
    await runner.cleanup()


NAMES: dict[str, list[str] | list[list[str]]] = {
    "docs.example": [PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:3c74"],
    "public-looking.example": ["10.0.0.5"],
    "mixed.example": [PUBLIC, "10.0.0.5"],
    "loopback.example": ["127.0.0.1"],
    "v6loop.example": ["::1"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "meta.example": ["169.254.169.254"],
    "cgnat.example": ["::ffff:100.64.0.1"],
    "localhost": ["127.0.0.1", "::1"],
    "rebind.example": [[PUBLIC], ["127.0.0.1"]],  # public when checked, loopback when connecting
}


@dataclass
class Rig:
    """A fetcher wired to the fake resolver and the loopback-only connect hook."""

    fetcher: Fetcher
    resolver: MapResolver
    dialled: Dialled


def make_rig(**kw: object) -> Rig:
    resolver, dialled = MapResolver(dict(NAMES)), Dialled()
    fetcher = Fetcher(resolver=resolver, connect_hook=dialled, **kw)  # type: ignore[arg-type]
    return Rig(fetcher, resolver, dialled)


# ---------------------------------------------------------------- pure checks


INET_ATON_SPELLINGS = [
    "127.0.0.1", "127.1", "127.0.1", "0x7f.1", "0x7F.0x0.0x0.0x1", "017700000001", "2130706433", "0177.0.0.1",
    "127.000.000.001", "0", "0x0", "00", "10.1", "0xa000001", "3232235777", "0300.0250.1.1", "1.16777215",
    "1.2.65535", "0xffffffff", "4294967296", "1.16777216", "256.1", "08", "0x", "1.2.3.4.5", "1..1", "",
    "example.com", "0x7g.1", "-1", "0x00000007f.1", "00000000000000000000177.1",
]  # fmt: skip


@pytest.mark.parametrize("text", INET_ATON_SPELLINGS)
def test_numeric_host_matches_glibc_inet_aton(text: str) -> None:
    try:
        expected = ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        expected = None
    assert numeric_host(text) == expected


@pytest.mark.parametrize(
    ("text", "address"),
    [("１２７.０.０.１", "127.0.0.1"), ("①②⑦.1", "127.0.0.1"), ("127.0.0.1.", "127.0.0.1"), ("[::1]", "::1"),
     ("::ffff:7f00:1", "::ffff:7f00:1"), ("FE80::1", "fe80::1"), ("127.0.0.1\tjunk", "127.0.0.1")],
)  # fmt: skip
def test_numeric_host_beyond_ascii(text: str, address: str) -> None:
    assert numeric_host(text) == ipaddress.ip_address(address)


DENIED = [
    ("127.0.0.1", "loopback"), ("10.0.0.5", "private"), ("172.31.255.1", "private"), ("192.168.0.1", "private"),
    ("169.254.169.254", "link-local"), ("100.64.0.1", "carrier-grade NAT"), ("100.100.100.200", "carrier-grade NAT"),
    ("0.1.2.3", "this network"), ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "broadcast"), ("192.0.0.8", "IETF"),
    ("192.0.2.1", "documentation"), ("198.18.0.1", "benchmarking"), ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"), ("192.88.99.1", "6to4 relay"), ("::1", "loopback"), ("::", "unspecified"),
    ("::127.0.0.1", "IPv4-compatible"), ("::ffff:127.0.0.1", "embeds 127.0.0.1"),
    ("::ffff:100.64.0.1", "embeds 100.64.0.1"), ("::ffff:10.0.0.5", "embeds 10.0.0.5"),
    ("64:ff9b::7f00:1", "embeds 127.0.0.1"), ("64:ff9b:1::a00:5", "local-use NAT64"),
    ("2002:7f00:1::", "embeds 127.0.0.1"), ("2002:a9fe:a9fe::1", "embeds 169.254.169.254"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "embeds 127.0.0.1"), ("fe80::1", "link-local"),
    ("fc00::1", "unique-local"), ("fd12:3456::1", "unique-local"), ("fec0::1", "site-local"),
    ("ff02::1", "multicast"), ("100::1", "discard-only"), ("2001:db8::1", "documentation"),
]  # fmt: skip


@pytest.mark.parametrize(("address", "words"), DENIED)
def test_check_address_refuses(address: str, words: str) -> None:
    with pytest.raises(FetchRefused) as info:
        check_address(ipaddress.ip_address(address), subject="intranet.example")
    assert info.value.reason == "private-address"
    assert words in str(info.value) and "intranet.example resolves to" in str(info.value)


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", PUBLIC, "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808",
                "2002:808:808::1"],
)  # fmt: skip
def test_check_address_allows_public(address: str) -> None:
    check_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("url", "host"),
    [("https://example.com/a?b=1#c", "example.com"), ("http://bücher.de/", "xn--bcher-kva.de"),
     ("HTTP://Example.COM:443/", "example.com"), ("https://8.8.8.8/", "8.8.8.8"), ("http://example.com./", "example.com.")],
)  # fmt: skip
def test_check_url_allows(url: str, host: str) -> None:
    assert check_url(url).raw_host == host


@pytest.mark.parametrize(
    ("url", "reason"),
    [("http://example.com:8080/", "port"), ("https://example.com:22/", "port"), ("http://example.com:0/", "port"),
     ("http://user@example.com/", "userinfo"), ("http://:pw@example.com/", "userinfo"), ("http://@example.com/", "userinfo"),
     ("http://example.com\\@127.0.0.1/", "bad-url"), ("http:///x", "bad-url"), ("http://:80/", "bad-url"),
     ("http:example.com", "bad-url"), ("http://exa mple.com/", "bad-url"), ("http://ex\tample.com/", "bad-url"),
     ("http://1.2.3.4.5/", "bad-url"), ("http://%31%32%37.0.0.1/", "bad-url"),
     ("http://%6c%6fcalhost/", "bad-url"), ("http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/", "private-address"),
     ("http://app.localhost/", "private-address"), ("http://example.123/", "bad-url"), ("//example.com/", "scheme"),
     ("ftp://example.com/", "scheme"), ("file:///etc/passwd", "scheme"), ("javascript:alert(1)", "scheme"),
     ("gopher://127.0.0.1:70/_GET", "scheme"), ("data:text/html,hi", "scheme"), ("ws://example.com/", "scheme"),
     ("http://[::1]/", "private-address"), ("http://0x7f.1/", "private-address")],
)  # fmt: skip
def test_check_url_refuses(url: str, reason: str) -> None:
    with pytest.raises(FetchRefused) as info:
        check_url(url)
    assert info.value.reason == reason


@pytest.mark.parametrize(
    ("ctype", "data", "name", "kind"),
    [("text/html", PAGE, "index", "html"), ("text/html", PDF, "x", "pdf"), ("application/pdf", PDF, "x", "pdf"),
     ("application/octet-stream", PDF, "x", "pdf"), ("text/plain", b"# T\n", "notes.md", "markdown"),
     ("text/plain", b"words", "notes", "text"), ("text/plain", PAGE, "x", "html"), ("text/markdown", b"x", "x", "markdown"),
     ("application/xhtml+xml", PAGE, "x", "html")],
)  # fmt: skip
def test_decide_kind(ctype: str, data: bytes, name: str, kind: str) -> None:
    assert decide_kind(ctype, True, data, name, "u") == kind


@pytest.mark.parametrize(
    ("ctype", "data", "words"),
    [("application/pdf", ELF, "application/pdf but the content is an executable (ELF)"),
     ("text/html", PNG, "text/html but the content is a PNG image"), ("application/pdf", PAGE, "not a PDF"),
     ("application/octet-stream", b"words", "served as application/octet-stream and is not a PDF"),
     ("application/octet-stream", b"PK\x03\x04", "ZIP archive")],
)  # fmt: skip
def test_decide_kind_refuses(ctype: str, data: bytes, words: str) -> None:
    with pytest.raises(FetchRefused) as info:
        decide_kind(ctype, True, data, "x", "u")
    assert info.value.reason == "type" and words in str(info.value)


# ---------------------------------------------------------------- the refused table, end to end

# {L}: the recording listener (not allowlisted); {A}: the allowlisted site. Rows marked 'to' are a
# redirect from the allowlisted site to that Location.
REFUSED = [
    ("http://127.0.0.1:{L}/", "private-address"),
    ("http://2130706433:{L}/", "private-address"),
    ("http://017700000001:{L}/", "private-address"),
    ("http://0x7f000001:{L}/", "private-address"),
    ("http://0177.0.0.1:{L}/", "private-address"),
    ("http://0x7f.1:{L}/", "private-address"),
    ("http://127.1:{L}/", "private-address"),
    ("http://127.0.1:{L}/", "private-address"),
    ("http://127.000.000.001:{L}/", "private-address"),
    ("http://0x7F.0x00.0x00.0x01:{L}/", "private-address"),
    ("http://１２７.０.０.１:{L}/", "private-address"),
    ("http://①②⑦.0.0.1:{L}/", "private-address"),
    ("http://127.0.0.1.:{L}/", "private-address"),
    ("http://0.0.0.0:{L}/", "private-address"),
    ("http://0:{L}/", "private-address"),
    ("http://[::1]:{L}/", "private-address"),
    ("http://[::]:{L}/", "private-address"),
    ("http://[::ffff:127.0.0.1]:{L}/", "private-address"),
    ("http://[::ffff:7f00:1]:{L}/", "private-address"),
    ("http://[::127.0.0.1]:{L}/", "private-address"),
    ("http://[64:ff9b::7f00:1]:{L}/", "private-address"),
    ("http://[2002:7f00:1::]:{L}/", "private-address"),
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{L}/", "private-address"),
    ("http://[::ffff:10.0.0.1]/", "private-address"),
    ("http://10.0.0.1/", "private-address"),
    ("http://0xa.1/", "private-address"),
    ("http://167772161/", "private-address"),
    ("http://172.16.0.1/", "private-address"),
    ("http://192.168.1.1/", "private-address"),
    ("http://3232235777/", "private-address"),
    ("http://169.254.169.254/latest/meta-data/", "private-address"),
    ("http://100.64.0.1/", "private-address"),
    ("http://[::ffff:100.64.0.1]/", "private-address"),
    ("http://100.100.100.200/", "private-address"),
    ("http://[64:ff9b::a00:5]/", "private-address"),
    ("http://[fe80::1]/", "private-address"),
    ("http://[fe80::1%25lo]:{L}/", "private-address"),
    ("http://[fc00::1]/", "private-address"),
    ("http://[fd00:ec2::254]/", "private-address"),
    ("http://[fec0::1]/", "private-address"),
    ("http://[ff02::1]/", "private-address"),
    ("http://224.0.0.1/", "private-address"),
    ("http://255.255.255.255/", "private-address"),
    ("http://198.18.0.1/", "private-address"),
    ("http://user@example.com/", "userinfo"),
    ("http://user:pw@127.0.0.1:{L}/", "userinfo"),
    ("http://example.com\\@127.0.0.1:{L}/", "bad-url"),
    ("ftp://127.0.0.1:{L}/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("gopher://127.0.0.1:{L}/_GET%20/", "scheme"),
    ("data:text/html,<b>hi</b>", "scheme"),
    ("http://example.com:8080/", "port"),
    ("http:///path", "bad-url"),
    ("http://public-looking.example/", "private-address"),
    ("http://loopback.example:{L}/", "private-address"),
    ("http://v6loop.example:{L}/", "private-address"),
    ("http://mapped.example:{L}/", "private-address"),
    ("http://meta.example/", "private-address"),
    ("http://cgnat.example/", "private-address"),
    ("http://localhost:{L}/", "private-address"),
    ("http://mixed.example/", "private-address"),
    ("http://rebind.example:{L}/", "private-address"),
    ("http://nxdomain.example/", "dns"),
    ("to http://127.0.0.1:{L}/", "private-address"),
    ("to http://10.0.0.5/", "private-address"),
    ("to http://0x7f.1:{L}/", "private-address"),
    ("to http://[::ffff:127.0.0.1]:{L}/", "private-address"),
    ("to http://loopback.example:{L}/", "private-address"),
    ("to http://public-looking.example/", "private-address"),
    ("to http://rebind.example:{L}/", "private-address"),
    ("to http://127.0.0.1:{A}@127.0.0.1:{L}/", "userinfo"),
    ("to file:///etc/passwd", "scheme"),
    ("to gopher://127.0.0.1:{L}/", "scheme"),
    ("to javascript:alert(1)", "scheme"),
]


@pytest.mark.parametrize(("row", "reason"), REFUSED, ids=[r for r, _ in REFUSED])
async def test_refused_urls_never_reach_a_socket(
    row: str, reason: str, listener: Listener, site: Site
) -> None:
    # The listener's port is allowed, so only the address checks stand between these URLs and it.
    rig = make_rig(allowed_ports={80, 443, listener.port}, allow_hosts={("127.0.0.1", site.port)})
    text = row.replace("{L}", str(listener.port)).replace("{A}", str(site.port))
    is_redirect = text.startswith("to ")
    url = site.url("/to", location=text[3:]) if is_redirect else text
    with capture_logs() as logs, pytest.raises(FetchRefused) as info:
        await rig.fetcher.fetch(url)
    await asyncio.sleep(0.01)  # let the listener accept anything that slipped through
    assert info.value.reason == reason, str(info.value)
    assert listener.hits == []
    assert all(ipaddress.ip_address(a[0]) == ipaddress.ip_address("127.0.0.1") for a in rig.dialled.calls)
    assert site.requests == (["/to"] if is_redirect else [])
    assert [(e["event"], e["reason"], e["url"]) for e in logs] == [("import.refused", reason, url)]
    if "rebind" in text:  # checked public, then the connect-time answer was refused by the socket factory
        assert rig.resolver.calls == ["rebind.example", "rebind.example"]
        assert "at connect time" in str(info.value)


def test_the_refused_table_is_big_enough() -> None:
    assert len(REFUSED) >= 40


async def test_default_policy_refuses_the_local_server(site: Site, listener: Listener) -> None:
    rig = make_rig()
    for url in (
        site.url("/page"),
        f"http://localhost:{site.port}/page",
        f"http://[::ffff:127.0.0.1]:{site.port}/",
    ):
        with pytest.raises(FetchRefused) as info:
            await rig.fetcher.fetch(url)
        assert info.value.reason in {"private-address", "port"}
    assert site.requests == [] and rig.dialled.calls == []


# ---------------------------------------------------------------- allowed fetches and redirects


async def test_fetches_an_allowed_page(site: Site) -> None:
    got = await make_rig(allow_hosts={("127.0.0.1", site.port)}).fetcher.fetch(site.url("/page"))
    assert (got.status, got.kind, got.content_type, got.charset) == (200, "html", "text/html", "utf-8")
    assert got.final_url == got.url == site.url("/page")
    assert got.data == PAGE and got.sha256 == hashlib.sha256(PAGE).hexdigest()


async def test_five_redirects_are_followed(site: Site) -> None:
    got = await make_rig(allow_hosts={("127.0.0.1", site.port)}).fetcher.fetch(site.url("/chain/5"))
    assert got.final_url == site.url("/chain/0") and got.kind == "html"
    assert site.requests == [f"/chain/{n}" for n in range(5, -1, -1)]


async def test_six_redirects_are_refused(site: Site) -> None:
    with pytest.raises(FetchRefused) as info:
        await make_rig(allow_hosts={("127.0.0.1", site.port)}).fetcher.fetch(site.url("/chain/6"))
    assert info.value.reason == "redirects"
    assert site.requests == [f"/chain/{n}" for n in range(6, 0, -1)]  # the 7th URL is never requested


@pytest.mark.parametrize(
    ("path", "kind", "ctype"),
    [("/pdf-as-html", "pdf", "text/html"), ("/octet-pdf", "pdf", "application/octet-stream"),
     ("/notes.md", "markdown", "text/plain"), ("/md", "markdown", "text/markdown"), ("/plain", "text", "text/plain")],
)  # fmt: skip
async def test_types_confirmed_by_sniffing(site: Site, path: str, kind: str, ctype: str) -> None:
    got = await make_rig(allow_hosts={("127.0.0.1", site.port)}).fetcher.fetch(site.url(path))
    assert (got.kind, got.content_type) == (kind, ctype)


@pytest.mark.parametrize(
    ("path", "reason", "words"),
    [("/elf-as-pdf", "type", "served as application/pdf but the content is an executable (ELF)"),
     ("/png", "type", "is image/png; kb imports HTML, text, Markdown and PDF"),
     ("/json", "type", "is application/json"), ("/js", "type", "is application/javascript"),
     ("/zip", "type", "ZIP archive"), ("/html-as-pdf", "type", "not a PDF"), ("/missing", "status", "404")],
)  # fmt: skip
async def test_types_refused_with_what_was_seen(site: Site, path: str, reason: str, words: str) -> None:
    with pytest.raises(FetchRefused) as info:
        await make_rig(allow_hosts={("127.0.0.1", site.port)}).fetcher.fetch(site.url(path))
    assert info.value.reason == reason and words in str(info.value)


# ---------------------------------------------------------------- size and time limits


@pytest.mark.parametrize(("size", "ok"), [(1000, True), (1001, False)])
async def test_size_limit_counts_streamed_bytes(site: Site, size: int, ok: bool) -> None:
    fetcher = make_rig(allow_hosts={("127.0.0.1", site.port)}, max_bytes=1000).fetcher
    if ok:
        assert len((await fetcher.fetch(site.url("/big", n=str(size)))).data) == size
    else:
        with pytest.raises(FetchRefused) as info:
            await fetcher.fetch(site.url("/big", n=str(size)))
        assert info.value.reason == "too-large"


async def test_twenty_mib_and_one_byte_without_content_length_is_refused(site: Site) -> None:
    fetcher = make_rig(allow_hosts={("127.0.0.1", site.port)}).fetcher  # the default 20 MiB
    with pytest.raises(FetchRefused) as info:
        await fetcher.fetch(site.url("/big", n=str(20 * MiB + 1)))
    assert info.value.reason == "too-large" and "20 MiB" in str(info.value)


async def test_gzip_bomb_is_cut_at_the_limit_with_bounded_memory(site: Site) -> None:
    fetcher = make_rig(allow_hosts={("127.0.0.1", site.port)}).fetcher  # 100 MiB of zeros in ~100 KiB
    tracemalloc.start()
    try:
        with pytest.raises(FetchRefused) as info:
            await fetcher.fetch(site.url("/bomb"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.reason == "too-large"
    assert peak < 40 * MiB  # the 20 MiB kept plus buffers, far below the 100 MiB the bomb expands to


@pytest.mark.parametrize(
    ("every", "read_s", "total_s", "words"),
    [("0.25", 1.0, 1.5, "total limit of 1.5 s"),  # a slow loris: a byte each 0.25 s, well inside the read limit
     ("30", 0.3, 5.0, "sent nothing for 0.3 s (read limit)")],  # headers, then silence
)  # fmt: skip
async def test_slow_bodies_hit_a_timeout(
    site: Site, every: str, read_s: float, total_s: float, words: str
) -> None:
    fetcher = make_rig(allow_hosts={("127.0.0.1", site.port)}, read_s=read_s, total_s=total_s).fetcher
    with pytest.raises(FetchRefused) as info:  # the body would go on for 50 s (or 100 min)
        await fetcher.fetch(site.url("/slow", every=every))
    assert info.value.reason == "timeout" and words in str(info.value)  # the limit that stopped it


async def test_a_full_accept_queue_hits_the_connect_timeout() -> None:
    # A listener that never accepts, its queue filled: the kernel drops further SYNs, so connect hangs.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = [socket.socket() for _ in range(3)]
    for filler in fillers:
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
    try:
        fetcher = make_rig(allow_hosts={("127.0.0.1", port)}, connect_s=0.3).fetcher
        with pytest.raises(FetchRefused) as info:  # the connect would hang for good
            await fetcher.fetch(f"http://127.0.0.1:{port}/")
        assert info.value.reason == "timeout" and "connecting to 127.0.0.1 took over 0.3 s" in str(info.value)
    finally:
        for sock in (server, *fillers):
            sock.close()


# ---------------------------------------------------------------- proxies, the model server, check_only


async def test_environment_proxies_are_ignored(
    site: Site, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = f"http://127.0.0.1:{listener.port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    got = await make_rig(allow_hosts={("127.0.0.1", site.port)}).fetcher.fetch(site.url("/page"))
    assert got.data == PAGE and site.requests == ["/page"]
    assert listener.hits == []


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:{A}/page", "http://localhost:{A}/page", "http://[::ffff:127.0.0.1]:{A}/page",
            "http://model.example:{A}/page", "http://model-rebind.example:{A}/page"],
)  # fmt: skip
async def test_the_model_server_is_never_fetched(site: Site, url: str) -> None:
    rig = make_rig(allow_hosts={("127.0.0.1", site.port)}, blocked_addresses=[("localhost", site.port)])
    rig.resolver.table |= {"model.example": ["127.0.0.1"], "model-rebind.example": [[PUBLIC], ["127.0.0.1"]]}
    with pytest.raises(FetchRefused) as info:
        await rig.fetcher.fetch(url.replace("{A}", str(site.port)))
    assert info.value.reason in {
        "blocked-address",
        "port",
    }  # 'port': PUBLIC on the site's port is not allowed
    assert site.requests == [] and rig.dialled.calls == []


async def test_the_model_server_is_refused_at_connect_time_too(site: Site) -> None:
    rig = make_rig(
        allowed_ports={80, 443, site.port}, allow_hosts={("127.0.0.1", site.port)},
        blocked_addresses=[("127.0.0.1", site.port)],
    )  # fmt: skip
    rig.resolver.table["model-rebind.example"] = [[PUBLIC], ["127.0.0.1"]]
    with pytest.raises(FetchRefused) as info:
        await rig.fetcher.fetch(f"http://model-rebind.example:{site.port}/page")
    assert info.value.reason == "blocked-address" and "at connect time" in str(info.value)
    assert site.requests == [] and rig.dialled.calls == []


async def test_a_redirect_to_the_model_server_is_refused(site: Site) -> None:
    runner, other = await start_site()
    try:
        rig = make_rig(
            allow_hosts={("127.0.0.1", site.port), ("127.0.0.1", other.port)},
            blocked_addresses=[("127.0.0.1", other.port)],
        )  # fmt: skip
        with pytest.raises(FetchRefused) as info:
            await rig.fetcher.fetch(site.url("/to", location=other.url("/page")))
        assert info.value.reason == "blocked-address" and other.requests == []
    finally:
        await runner.cleanup()


async def test_check_only_resolves_without_connecting(listener: Listener) -> None:
    rig = make_rig()
    assert await rig.fetcher.check_only("https://docs.example/guide") == [PUBLIC, NAMES["docs.example"][1]]
    assert await rig.fetcher.check_only("https://8.8.8.8/") == ["8.8.8.8"]
    refused = [
        ("http://public-looking.example/", "private-address"),
        ("http://mixed.example/", "private-address"),
        ("http://nxdomain.example/", "dns"),
        (f"http://127.0.0.1:{listener.port}/", "private-address"),
    ]
    for url, reason in refused:
        with capture_logs() as logs, pytest.raises(FetchRefused) as info:
            await rig.fetcher.check_only(url)
        assert info.value.reason == reason
        assert logs[0]["event"] == "import.refused" and logs[0]["reason"] == reason
    assert rig.resolver.calls == [
        "docs.example",
        "public-looking.example",
        "mixed.example",
        "nxdomain.example",
    ]
    assert rig.dialled.calls == [] and listener.hits == []
