"""Fetch one web page the owner chose, through an SSRF guard.

Three layers, each refusing with a stable reason code and a sentence:
1. ``check_url``: scheme, userinfo, backslashes, port, and IP-literal hosts in every numeric spelling.
2. DNS (``GuardedResolver``): every A/AAAA answer must be public, or the host is refused.
3. Connect time: ``TCPConnector(socket_factory=...)`` sees the exact address about to be dialled, whatever
   led there (a literal, a DNS answer that changed since layer 2, a redirect, a happy-eyeballs fallback).
Layer 3 is the enforcement; 1 and 2 refuse earlier with clearer words. Redirects are followed by hand,
each hop through all three.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import ipaddress
import re
import socket
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import aiohttp
import structlog
from aiohappyeyeballs import AddrInfoType
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from knowledge.convert.sniff import sniff
from knowledge.errors import ConversionError, FetchRefused

log = structlog.get_logger()

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
ConnectHook = Callable[[AddrInfoType], socket.socket]

DEFAULT_PORTS: frozenset[int] = frozenset({80, 443})
MiB = 1024 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_N = ipaddress.ip_network

# Explicit deny list: ipaddress' flags changed across CPython releases and call several of these global
# on 3.11 (multicast, fec0::/10, 192.88.99/24, embedded forms such as ::ffff:100.64.0.1).
_DENY = [(_N(net), label) for net, label in [
    ("0.0.0.0/8", "'this network'"), ("10.0.0.0/8", "private"), ("100.64.0.0/10", "carrier-grade NAT"),
    ("127.0.0.0/8", "loopback"), ("169.254.0.0/16", "link-local"), ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol"), ("192.0.2.0/24", "documentation"), ("192.88.99.0/24", "6to4 relay"),
    ("192.168.0.0/16", "private"), ("198.18.0.0/15", "benchmarking"), ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"), ("224.0.0.0/4", "multicast"), ("240.0.0.0/4", "reserved or broadcast"),
    ("::/128", "unspecified"), ("::1/128", "loopback"), ("::/96", "IPv4-compatible"),
    ("64:ff9b:1::/48", "local-use NAT64"), ("100::/64", "discard-only"), ("2001:db8::/32", "documentation"),
    ("fc00::/7", "unique-local (private)"), ("fe80::/10", "link-local"), ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
]]  # fmt: skip
_NAT64, _COMPAT = _N("64:ff9b::/96"), _N("::/96")
_INET_PART = re.compile(r"0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*")
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
_NAME = re.compile(r"[a-z0-9_.-]+")  # yarl lower-cases and IDNA-encodes names first
_AUTHORITY = re.compile(r"^[a-z][a-z0-9+.-]*://([^/?#]*)", re.IGNORECASE)
# Declared Content-Type → kind. Generic types get in only when the bytes prove to be a PDF.
_DECLARED = {"text/html": "html", "application/xhtml+xml": "html", "text/plain": "text",
             "text/markdown": "markdown", "text/x-markdown": "markdown", "application/pdf": "pdf",
             "application/x-pdf": "pdf"}  # fmt: skip
_GENERIC = frozenset({"application/octet-stream", "binary/octet-stream"})
_KINDS = "kb imports HTML, text, Markdown and PDF"


@dataclass(frozen=True)
class Fetched:
    """A downloaded page: the original bytes and what they are."""

    url: str
    final_url: str
    status: int
    content_type: str
    charset: str | None
    data: bytes
    sha256: str
    kind: str


def numeric_host(host: str) -> IPAddress | None:
    """The address a numeric host means to glibc (inet_aton: 1-4 parts, octal, hex, after NFKC), or None."""
    text = unicodedata.normalize("NFKC", host).strip().lower().removeprefix("[").removesuffix("]")
    text = re.split(r"\s", text, maxsplit=1)[0]  # inet_aton stops at whitespace
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]  # a root dot names the same address
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_PART.fullmatch(p) for p in parts):
        return None
    values = [int(p, 16) if p.startswith("0x") else int(p, 8) if p.startswith("0") else int(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    number = 0
    for v in head:
        number = number << 8 | v
    return ipaddress.IPv4Address(number << (8 * (4 - len(head))) | last)


def _embedded_v4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses carried inside an IPv6 one: mapped, compatible, NAT64, 6to4, Teredo."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = [a for a in (ip.ipv4_mapped, ip.sixtofour, ip.teredo[1] if ip.teredo else None) if a]
    if ip in _NAT64 or (ip in _COMPAT and int(ip) > 1):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def _category(ip: IPAddress) -> tuple[str, ipaddress.IPv4Address | None] | None:
    """Why an address is not public (label, and the embedded IPv4 concerned), or None when it is."""
    for net, label in _DENY:
        if ip.version == net.version and ip in net:
            return label, None
    for inner in _embedded_v4(ip):
        if (found := _category(inner)) is not None:
            return found[0], inner
    if isinstance(ip, ipaddress.IPv6Address) and (ip.ipv4_mapped or ip in _NAT64):
        return None  # outer flags describe the translation (::/8 is 'reserved'); DNS64 networks need these
    if ip.is_multicast or ip.is_private or ip.is_reserved or ip.is_link_local or not ip.is_global:
        return "non-public", None
    return None


def check_address(ip: IPAddress, *, subject: str | None = None) -> None:
    """Raise FetchRefused('private-address') unless ``ip`` and any IPv4 inside it are public."""
    if (found := _category(ip)) is None:
        return
    label, inner = found
    lead = f"{subject} resolves to {ip}" if subject else f"the address {ip}"
    lead += f", which embeds {inner}," if inner else ","
    article = "an" if label.startswith(("a", "e", "i", "o", "I", "unsp")) else "a"
    raise FetchRefused(
        "private-address", f"{lead} {article} {label} address; kb only fetches public web pages"
    )


def _plain(ip: IPAddress) -> IPAddress:
    """The address actually dialled: ::ffff:a.b.c.d is a.b.c.d, and a zone id does not matter."""
    if isinstance(ip, ipaddress.IPv6Address):
        return ip.ipv4_mapped or ipaddress.IPv6Address(int(ip))
    return ip


@dataclass(frozen=True)
class _Policy:
    """Who may be dialled: ports, the test-only allowlist, and (ip|name, port) pairs never to touch."""

    allowed_ports: frozenset[int] = DEFAULT_PORTS
    allow_hosts: frozenset[tuple[IPAddress, int]] = frozenset()
    blocked: frozenset[tuple[IPAddress | str, int]] = frozenset()

    @classmethod
    def build(
        cls, ports: Iterable[int], allow: Iterable[tuple[str, int]], blocked: Iterable[tuple[str, int]]
    ) -> _Policy:
        """Normalise addresses; 'localhost' in ``blocked`` stands for both loopback addresses."""
        pairs: set[tuple[IPAddress | str, int]] = set()
        for host, port in blocked:
            name = host.strip("[]").lower().rstrip(".")
            ip = numeric_host(name)
            pairs.add((name, port) if ip is None else (_plain(ip), port))
            if name == "localhost":
                pairs |= {(ipaddress.ip_address("127.0.0.1"), port), (ipaddress.ip_address("::1"), port)}
        allowed = frozenset((_plain(ipaddress.ip_address(h.strip("[]"))), p) for h, p in allow)
        return cls(frozenset(ports), allowed, frozenset(pairs))

    def check_endpoint(self, ip: IPAddress, port: int, *, subject: str | None = None) -> None:
        """Refuse a blocked pair, then (unless allowlisted for tests) a non-public address or port."""
        plain = _plain(ip)
        if any((a, port) in self.blocked for a in (plain, *_embedded_v4(plain))):
            raise FetchRefused(
                "blocked-address", f"{subject or plain} is {plain}:{port}, which kb never fetches"
            )
        if (plain, port) in self.allow_hosts:
            return
        check_address(ip, subject=subject)
        _check_port(port, subject or str(plain), self.allowed_ports)


def _check_port(port: int, subject: str, allowed: frozenset[int]) -> None:
    """Refuse a port outside ``allowed``."""
    if port not in allowed:
        ports = ", ".join(str(p) for p in sorted(allowed))
        raise FetchRefused("port", f"{subject} uses port {port}; kb only fetches from ports {ports}")


def check_url(
    url: str,
    *,
    allowed_ports: frozenset[int] = DEFAULT_PORTS,
    allow_hosts: Iterable[tuple[str, int]] = (),
    blocked_addresses: Iterable[tuple[str, int]] = (),
) -> URL:
    """Parse ``url`` with yarl (the parser that fetches) and refuse anything but a public http(s) URL."""
    return _check_url(url, _Policy.build(allowed_ports, allow_hosts, blocked_addresses))


def _check_url(raw: str, policy: _Policy) -> URL:
    """check_url against a built policy."""
    shown = raw[:200]
    if "\\" in raw:
        raise FetchRefused("bad-url", f"{shown} contains a backslash, which parsers read differently")
    if not raw or len(raw) > 8192 or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise FetchRefused("bad-url", f"{shown!r} is not a well-formed URL (empty, too long or has spaces)")
    scheme = raw.split(":", 1)[0].lower() if ":" in raw else "relative"
    if scheme not in ("http", "https"):
        raise FetchRefused("scheme", f"{shown} is a {scheme} URL; kb only fetches http and https")
    try:
        url = URL(raw)
        host, port = url.raw_host, url.port
    except (ValueError, UnicodeError) as exc:
        raise FetchRefused("bad-url", f"{shown} is not a valid URL ({exc})") from exc
    authority = _AUTHORITY.match(raw)
    if authority is None or not host or port is None:
        raise FetchRefused("bad-url", f"{shown} has no host name")
    if "@" in authority.group(1) or url.raw_user is not None or url.raw_password is not None:
        raise FetchRefused("userinfo", f"{shown} carries a user name or password; kb refuses those")
    if (ip := numeric_host(host)) is not None:
        policy.check_endpoint(ip, port, subject=None if str(ip) == host else f"the host {host}")
    elif _NUMERIC_LABEL.fullmatch(host.rstrip(".").rsplit(".", 1)[-1]):
        # A host ending in a number is an IPv4 spelling to browsers and resolvers (WHATWG), never a name.
        raise FetchRefused("bad-url", f"{shown} has a numeric host {host!r} that is not a valid address")
    elif not _NAME.fullmatch(host):
        raise FetchRefused("bad-url", f"{shown} has a host {host!r} with characters no host name has")
    elif (host.rstrip("."), port) in policy.blocked:
        raise FetchRefused("blocked-address", f"{host} port {port} is an address kb never fetches from")
    elif host.rstrip(".").rsplit(".", 1)[-1] == "localhost":  # RFC 6761: always this machine
        raise FetchRefused("private-address", f"{host} is this machine; kb only fetches public web pages")
    else:  # a name may use an allowlisted test port: its addresses are then checked as exact pairs
        _check_port(port, shown, policy.allowed_ports | {p for _, p in policy.allow_hosts})
    return url


class GuardedResolver(AbstractResolver):
    """Resolve through ``inner`` and refuse the host unless every A/AAAA answer passes the policy."""

    def __init__(self, inner: AbstractResolver, policy: _Policy) -> None:
        self._inner, self._policy = inner, policy

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_UNSPEC) -> list[ResolveResult]:
        """All answers, each checked; FetchRefused('dns') when the name does not resolve."""
        try:
            answers = await self._inner.resolve(host, port, family=family)
        except OSError as exc:
            raise FetchRefused("dns", f"{host} could not be resolved ({exc.strerror or exc})") from exc
        if not answers:
            raise FetchRefused("dns", f"{host} has no address records")
        for answer in answers:
            try:
                ip = ipaddress.ip_address(answer["host"])
            except ValueError as exc:
                raise FetchRefused("dns", f"{host} resolved to {answer['host']!r}, not an address") from exc
            self._policy.check_endpoint(ip, answer["port"] or port, subject=host)
        return answers

    async def close(self) -> None:
        """The inner resolver belongs to whoever made it."""


def _open_socket(addr_info: AddrInfoType) -> socket.socket:
    """The real socket creation (aiohappyeyeballs' default); tests replace it."""
    family, type_, proto, _, _ = addr_info
    return socket.socket(family=family, type=type_, proto=proto)


@dataclass
class _Attempt:
    """One fetch's connect-time guard; keeps the refusals that aiohttp reduces to a bare OSError."""

    policy: _Policy
    connect_hook: ConnectHook
    host: str = ""
    refusals: list[FetchRefused] = field(default_factory=list)

    def socket_factory(self, addr_info: AddrInfoType) -> socket.socket:
        """Check the address about to be dialled; raise OSError to stop the connect."""
        address, port = addr_info[4][:2]
        try:
            try:
                ip = ipaddress.ip_address(address)
            except ValueError as exc:
                raise FetchRefused("bad-url", f"kb cannot check the address {address!r}") from exc
            self.policy.check_endpoint(ip, port, subject=f"{self.host} (at connect time)")
        except FetchRefused as refusal:
            self.refusals.append(refusal)
            raise OSError(errno.EACCES, str(refusal)) from None
        return self.connect_hook(addr_info)


def decide_kind(content_type: str, has_header: bool, data: bytes, name: str, url: str) -> str:
    """'html', 'text', 'markdown' or 'pdf' from the declared type confirmed by the bytes; else FetchRefused."""
    declared = _DECLARED.get(content_type)
    served = f"served as {content_type}" if has_header else "served without a type"
    try:
        sniffed = sniff(data, "the content", images=False)
    except ConversionError as exc:
        raise FetchRefused("type", f"{url} was {served} but {exc}; {_KINDS}") from exc
    if sniffed == "pdf":
        return "pdf"  # a PDF is a PDF whatever the server called it (text/html, octet-stream)
    if declared == "pdf":
        raise FetchRefused("type", f"{url} was {served} but the content is not a PDF")
    if declared is None:
        raise FetchRefused("type", f"{url} was {served} and is not a PDF; {_KINDS}")
    if declared == "text":
        return sniff(data, name)  # text/plain may carry HTML, or Markdown named .md
    return declared


@contextmanager
def _logged(url: str) -> Iterator[None]:
    """Log every refusal under one stable event name."""
    try:
        yield
    except FetchRefused as refusal:
        log.warning("import.refused", url=url, reason=refusal.reason, detail=str(refusal))
        raise


class Fetcher:
    """Download a page the owner chose, refusing anything the guard does not allow."""

    def __init__(
        self,
        *,
        resolver: AbstractResolver | None = None,
        connect_hook: ConnectHook = _open_socket,
        max_bytes: int = 20 * MiB,
        max_redirects: int = 5,
        connect_s: float = 10.0,
        read_s: float = 20.0,
        total_s: float = 60.0,
        allowed_ports: Iterable[int] = DEFAULT_PORTS,
        blocked_addresses: Iterable[tuple[str, int]] = (),
        allow_hosts: Iterable[tuple[str, int]] = (),
        user_agent: str = "kb/0.1 (self-hosted knowledge base; one page at its owner's request)",
    ) -> None:
        """``allow_hosts``: exact (ip, port) pairs of local test servers; production never sets it."""
        self._inner, self._connect_hook = resolver, connect_hook
        self._policy = _Policy.build(allowed_ports, allow_hosts, blocked_addresses)
        self.max_bytes, self.max_redirects = max_bytes, max_redirects
        self.connect_s, self.read_s, self.total_s = connect_s, read_s, total_s
        self._headers = {"User-Agent": user_agent}
        self._limit = f"{max_bytes / MiB:g} MiB" if max_bytes >= MiB else f"{max_bytes} bytes"

    async def check_only(self, url: str) -> list[str]:
        """The guard's verdict for ``url`` without connecting: the checked addresses, or FetchRefused."""
        with _logged(url):
            try:
                async with asyncio.timeout(self.connect_s):
                    return [str(ip) for ip in await self._preflight(_check_url(url, self._policy))]
            except TimeoutError as exc:
                raise FetchRefused("timeout", f"resolving {url} took over {self.connect_s:g} s") from exc

    async def fetch(self, url: str) -> Fetched:
        """Follow at most ``max_redirects`` checked hops and return the page, or raise FetchRefused."""
        with _logged(url):
            attempt = _Attempt(self._policy, self._connect_hook)
            deadline = asyncio.timeout(self.total_s)
            try:
                async with self._session(attempt) as session, deadline:
                    return await self._follow(session, attempt, url)
            except TimeoutError as exc:
                if not deadline.expired():
                    raise
                raise FetchRefused(
                    "timeout", f"{url} took over the total limit of {self.total_s:g} s"
                ) from exc

    def _session(self, attempt: _Attempt) -> aiohttp.ClientSession:
        """A session of our own: its connector is the guard, and environment proxies would bypass it."""
        connector = aiohttp.TCPConnector(
            resolver=self._inner or aiohttp.ThreadedResolver(),  # answers are checked at connect time
            use_dns_cache=False,
            socket_factory=attempt.socket_factory,
        )
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_s, sock_read=self.read_s)
        return aiohttp.ClientSession(
            connector=connector, trust_env=False, auto_decompress=True, timeout=timeout, headers=self._headers
        )

    async def _preflight(self, url: URL) -> list[IPAddress]:
        """Addresses for a checked URL: the literal itself, or every DNS answer, each checked."""
        assert url.raw_host is not None and url.port is not None
        if (literal := numeric_host(url.raw_host)) is not None:
            return [literal]
        guard = GuardedResolver(self._inner or aiohttp.ThreadedResolver(), self._policy)
        answers = await guard.resolve(url.raw_host, url.port, family=socket.AF_UNSPEC)
        return list(dict.fromkeys(ipaddress.ip_address(a["host"]) for a in answers))

    async def _follow(self, session: aiohttp.ClientSession, attempt: _Attempt, url: str) -> Fetched:
        """Request each hop by hand so every Location is checked like the first URL."""
        current = url
        for _ in range(self.max_redirects + 1):
            checked = _check_url(current, self._policy)
            await self._preflight(checked)
            attempt.host = checked.raw_host or ""
            async with await self._request(session, attempt, checked) as resp:
                if resp.status not in _REDIRECTS or "Location" not in resp.headers:
                    return await self._read(resp, url)
                try:
                    current = str(resp.url.join(URL(resp.headers["Location"])))
                except (ValueError, UnicodeError) as exc:
                    raise FetchRefused("bad-url", f"{checked} redirects to an invalid URL") from exc
        raise FetchRefused("redirects", f"{url} redirects more than {self.max_redirects} times")

    async def _request(
        self, session: aiohttp.ClientSession, attempt: _Attempt, url: URL
    ) -> aiohttp.ClientResponse:
        """One GET without redirects, with aiohttp's errors turned into reasons."""
        try:
            resp = await session.get(url, allow_redirects=False)
        except aiohttp.ConnectionTimeoutError as exc:
            raise FetchRefused("timeout", f"connecting to {url.host} took over {self.connect_s:g} s") from exc
        except aiohttp.SocketTimeoutError as exc:
            raise FetchRefused("timeout", f"{url} sent nothing for {self.read_s:g} s (read limit)") from exc
        except aiohttp.ClientConnectorError as exc:
            if attempt.refusals:  # the socket factory's words; aiohttp kept only a bare OSError
                raise attempt.refusals[0] from exc
            reason = "dns" if isinstance(exc, aiohttp.ClientConnectorDNSError) else "unreachable"
            raise FetchRefused(reason, f"{url.host} could not be reached ({exc})") from exc
        except aiohttp.ClientError as exc:
            raise FetchRefused("network", f"{url} failed: {exc}") from exc
        if attempt.refusals:  # another address answered, but this fetch already tried a forbidden one
            resp.release()
            raise attempt.refusals[0]
        return resp

    async def _read(self, resp: aiohttp.ClientResponse, requested: str) -> Fetched:
        """Stream the decoded body up to max_bytes and decide what it is."""
        final, content_type, has_header = str(resp.url), resp.content_type, "Content-Type" in resp.headers
        if not 200 <= resp.status < 300:
            raise FetchRefused("status", f"{final} answered {resp.status} {resp.reason or ''}".rstrip())
        if has_header and content_type not in _DECLARED and content_type not in _GENERIC:
            raise FetchRefused("type", f"{final} is {content_type}; {_KINDS}")  # refused before the body
        chunks: list[bytes] = []
        size = 0
        try:
            # Content-Length is the compressed size, if sent at all: count decoded bytes as they come.
            async for chunk in resp.content.iter_chunked(256 * 1024):
                size += len(chunk)
                if size > self.max_bytes:
                    raise FetchRefused(
                        "too-large", f"{final} is over {self._limit} decoded; kb stopped reading"
                    )
                chunks.append(chunk)
        except aiohttp.SocketTimeoutError as exc:
            raise FetchRefused("timeout", f"{final} sent nothing for {self.read_s:g} s (read limit)") from exc
        except aiohttp.ClientError as exc:
            raise FetchRefused("network", f"{final} broke off while downloading: {exc}") from exc
        data = b"".join(chunks)
        kind = decide_kind(content_type, has_header, data, resp.url.name or "index", final)
        return Fetched(
            url=requested, final_url=final, status=resp.status, content_type=content_type, charset=resp.charset,
            data=data, sha256=hashlib.sha256(data).hexdigest(), kind=kind,
        )  # fmt: skip
