"""The MCP server: kb's tools declared on the SDK's MCPServer, with their annotations and output schemas,
and one middleware that refuses arguments a tool does not take and logs every call (``mcp.call``)."""

import json
import time
from collections.abc import Mapping
from typing import Annotated, Any

import structlog
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import AcceptedElicitation
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from knowledge import __version__
from knowledge.errors import KbError, Refused
from mcpserver import consent
from mcpserver.bounds import TooLong
from mcpserver.results import (
    Answered,
    DocumentLines,
    Imported,
    Searched,
    Status,
    WebFound,
    host_of,
    lines_text,
    search_text,
    web_text,
)
from mcpserver.service import Kb

log = structlog.get_logger()

INSTRUCTIONS = (
    "kb is the owner's personal knowledge base. `search` finds cited passages (with a verdict on whether they "
    "answer the query), `get` reads a document's lines, `ask` answers from the documents with the local model. "
    "`web_search` lists web candidates and imports nothing; `import_web_source` imports one only when the owner "
    "chooses it."
)
READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
SourceId = Annotated[
    str, Field(pattern=r"^web-[1-5]$", description="web-1 … web-5 from the latest web_search")
]
Query = Annotated[str, Field(description="any text, at most 4,000 characters")]
SOURCE = (
    "the name of one of the owner's folder sources: only its documents are searched (default: every document; "
    "an unknown name is refused with the names there are)"
)
TAG = (
    "a tag of the owner's notes ('#' or not, any case; 'home' holds 'home/rent'): only the notes carrying it are "
    "searched (default: every document; a tag no document carries is refused with the tags used most)"
)


def _result(shape: BaseModel, text: str) -> CallToolResult:
    """Structured content plus its short text rendering."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=shape.model_dump(mode="json")
    )


def _failing(exc: Exception) -> ToolError:
    """kb's own refusals and errors as tool errors (the client's model reads them and can correct itself)."""
    return ToolError(str(exc))


def build_server(kb: Kb) -> MCPServer:
    """The MCP server over this warm knowledge base."""
    server = MCPServer("kb", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(annotations=READ, title="Search the knowledge base")
    async def search(
        query: Query,
        limit: Annotated[int, Field(ge=1, le=20)] = 5,
        source: Annotated[str | None, Field(max_length=100, description=SOURCE)] = None,
        tag: Annotated[str | None, Field(max_length=101, description=TAG)] = None,
    ) -> Annotated[CallToolResult, Searched]:
        """Passages of the owner's documents for a query, best first, each with its document id, lines, path
        or URL, text and tags, and whether kb judged them sufficient to answer it (the same ranking as kb
        search). `source` keeps the search to the documents of one folder source (as kb search --in NAME),
        `tag` to the notes carrying a tag (as kb search --tag TAG); both: that source's notes with that tag."""
        try:
            found = await kb.search(query, limit, source, tag)
        except (TooLong, KbError) as exc:
            raise _failing(exc) from exc
        return _result(found, search_text(found))

    @server.tool(annotations=READ, title="Read lines of a document")
    def get(
        document_id: Annotated[str, Field(max_length=200)],
        start_line: Annotated[int | None, Field(ge=1)] = None,
        end_line: Annotated[int | None, Field(ge=1)] = None,
    ) -> Annotated[CallToolResult, DocumentLines]:
        """Lines start_line..end_line of one document (all of it by default), capped at 400 lines and
        20,000 characters; the result says where a capped range continues."""
        try:
            got = kb.get(document_id, start_line, end_line)
        except KbError as exc:
            raise _failing(exc) from exc
        return _result(got, lines_text(got))

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=True),
        title="Ask the knowledge base",
    )
    async def ask(
        question: Query,
        conversation: Annotated[str | None, Field(pattern=r"^[\w.-]{1,64}$")] = None,
    ) -> Annotated[CallToolResult, Answered]:
        """kb's answer from the owner's documents by the local model, with its citations; when the documents
        do not answer, web candidates (nothing imported); when the model is down, the degraded answer and why.
        `conversation` names a conversation whose earlier turns a follow-up is understood from."""
        try:
            answered = await kb.ask(question, conversation)
        except (TooLong, KbError) as exc:
            raise _failing(exc) from exc
        rendered = "\n".join(p for p in (answered.text, answered.note) if p)
        cites = "\n".join(
            f"[{c.number}] {c.title} — {c.url or (f'{c.source}:{c.path}' if c.source else c.path)}:"
            f"{c.start_line}-{c.end_line}"
            for c in answered.citations
        )
        return _result(answered, "\n\n".join(p for p in (rendered, cites) if p))

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=True),
        title="Find web sources (imports nothing)",
    )
    async def web_search(query: Query) -> Annotated[CallToolResult, WebFound]:
        """Search the web for a query: up to five filtered candidates web-1 … web-5 with title, host and
        snippet. Nothing is imported; import_web_source asks the owner."""
        try:
            found = await kb.web_search(query)
        except (TooLong, KbError) as exc:
            raise _failing(exc) from exc
        return _result(found, web_text(found))

    async def owner_choice(source_id: str, ctx: Context) -> Any:
        """Ask the owner through the client's form; what to say when there is no way to ask."""
        try:
            candidate = kb.candidate(source_id)
        except Refused as exc:
            return consent.NotOffered(exc.reason, str(exc))
        capabilities = ctx.client_capabilities
        if capabilities is not None and capabilities.elicitation is not None:
            return Elicit(consent.question(candidate, kb.words), consent.Choice)
        return consent.ViaTelegram() if kb.can_reach_owner() else consent.NoChannel()

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                    open_world_hint=True),
        title="Import a web source the owner chooses",
    )  # fmt: skip
    async def import_web_source(
        source_id: SourceId,
        choice: Annotated[ElicitationResult[consent.Choice], Resolve(owner_choice)],
        ctx: Context,
    ) -> Annotated[CallToolResult, Imported]:
        """Import web-N of the latest web_search into the knowledge base, only if the owner chooses it: kb
        asks the owner through the client (title, host and URL shown), or else sends it to the owner's
        Telegram chat, where their tap imports it ("waiting"). Refused when the owner cannot be asked."""
        outcome = choice.data if isinstance(choice, AcceptedElicitation) else choice
        why = consent.refusal(outcome, kb.words)
        if isinstance(outcome, consent.NotOffered):  # the caller's mistake: an error it can correct
            raise ToolError(why)
        if isinstance(outcome, consent.ViaTelegram):
            client = _client_name(ctx.request_context) or "An MCP client"
            try:
                sent = await kb.offer_to_owner(source_id, client=client, waiting=consent.waiting(kb.words))
            except KbError as exc:
                raise _failing(exc) from exc
            return _result(sent, sent.message)
        if why is not None:
            candidate = kb.candidate(source_id)
            refused = Imported(
                status="refused", source_id=source_id, title=candidate.title, host=host_of(candidate.url),
                url=candidate.url, document_id=None, message=why,
            )  # fmt: skip
            return _result(refused, why)
        try:
            done = await kb.import_candidate(source_id)
        except KbError as exc:
            raise _failing(exc) from exc
        return _result(done, f"{done.status}: {done.title} ({done.url}): {done.message}")

    @server.tool(annotations=READ, title="Knowledge base status")
    async def status() -> Annotated[CallToolResult, Status]:
        """Documents, chunks, passages waiting for vectors, the last ingests, whether the model server answers."""
        got = await kb.status()
        text = (
            f"{got.documents} documents, {got.chunks} chunks, {got.vectors_waiting} waiting for vectors; "
            f"model server {got.model_server} {'answers' if got.model_server_reachable else 'is not reachable'}"
        )
        return _result(got, text)

    server.middleware.append(CallGuard(server))
    return server


class CallGuard:
    """Refuses a tool call with arguments the tool does not take (a protocol error: invalid params) and logs
    each call as ``mcp.call``: the tool, how long it took, the result's size, the client's name."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.parameters: dict[str, frozenset[str]] = {}

    async def taken(self) -> Mapping[str, frozenset[str]]:
        """The argument names each tool takes, from the schemas it publishes (read once)."""
        if not self.parameters:
            tools = await self.server.list_tools()
            self.parameters = {t.name: frozenset(t.input_schema.get("properties", {})) for t in tools}
        return self.parameters

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        params = ctx.params or {}
        name = params.get("name")
        arguments = params.get("arguments") or {}
        taken = await self.taken()
        if not isinstance(name, str) or name not in taken:
            log.info("mcp.refused", tool=str(name)[:80], reason="unknown-tool")
            raise MCPError(
                INVALID_PARAMS, f"unknown tool {str(name)[:80]!r}: the tools are {', '.join(sorted(taken))}"
            )
        if isinstance(arguments, Mapping):
            extra = sorted(set(arguments) - taken[name])
            if extra:
                log.info("mcp.refused", tool=name, reason="extra-arguments", arguments=extra[:5])
                raise MCPError(
                    INVALID_PARAMS, f"{name} does not take {', '.join(map(repr, extra[:5]))}: refused"
                )
        started = time.perf_counter()
        result = await call_next(ctx)
        wire = (
            result.model_dump(mode="json", by_alias=True) if isinstance(result, BaseModel) else result or {}
        )
        log.info(
            "mcp.call", tool=name, ms=round((time.perf_counter() - started) * 1000, 1),
            result_chars=len(json.dumps(wire, ensure_ascii=False)), is_error=bool(wire.get("isError")),
            client=_client_name(ctx),
        )  # fmt: skip
        return result


def _client_name(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The client's name as it introduced itself, when it did."""
    params = ctx.session.client_params
    info = getattr(params, "client_info", None)
    return getattr(info, "name", None)
