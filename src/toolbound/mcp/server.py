"""Any toolbound tool set as a guarded MCP server, on the official ``mcp`` SDK (R18).

``tools/list`` shows each caller exactly the tools it may call: the input and
output schemas the runtime enforces and annotations derived from the tool's effect
class (:func:`annotations_for`), never copied from anywhere else. ``tools/call`` is
one :meth:`~toolbound.Runtime.arun` through the whole pipeline, and its outcome is
mapped back (:func:`call_result`)::

    observed                        content: the model projection (untrusted data)
                                    structuredContent: the value, valid against outputSchema
      as content blocks             the envelope as text, then image, audio and resource
                                    blocks as blocks, bounded and marked untrusted
                                    (a tool that returns toolbound's Content, no schema)
    rejected, failed, unknown,      isError: true, no structuredContent; the error envelope
      cancelled                     (kind, code, recoverable, message, hint) as the text
                                    content and in _meta["io.toolbound/envelope"]
    awaiting confirmation           elicitation where the client offers it, else a
                                    pending isError result naming invocation and digest
    unknown or hidden tool          JSON-RPC error -32602, "Unknown tool: NAME" — the same
                                    for a tool that does not exist and one this caller
                                    may not see (list-time and call-time agree)

While a tool runs, what it reports through its ToolContext reaches the client: progress
as ``notifications/progress`` (when the request carried a progress token), log messages
as ``notifications/message`` from the level the client set (:mod:`toolbound.mcp.reporting`).

Confirmation over MCP (R7). When the policy asks a person, the call is parked in the
runtime. A client that supports form elicitation is asked there and then — through
``InputRequiredResult`` on a 2026-07-28 connection (the answer comes back on the
retried call, whose arguments must have the parked call's digest, under a
``requestState`` sealed to that invocation, digest and subject), or through an
``elicitation/create`` request on an older one. Otherwise the caller gets a pending
result and a person approves in the console (``Runtime.approve``), after which the
same call replays the committed result from the ledger. Either way one
confirmation approves one digest once: :class:`ConfirmOnce` keeps a second identical
call from parking a second copy, and lets a repeat of a call already confirmed and
recorded in the ledger go on without a second person, since it cannot execute again.

Who calls comes from the transport, never from the arguments: a fixed subject for
stdio and in-process use, the ``Authorization: Bearer`` token for HTTP
(:class:`HttpEndpoint`), which also refuses a request body that is not strict JSON
(duplicate keys, NaN, bad UTF-8) before the SDK parses it (R3).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import importlib.metadata
import json
import os
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Protocol, cast, runtime_checkable

from toolbound._confirmation import ConfirmationRequest
from toolbound._errors import ConfirmationMismatch, Problem, Rejection
from toolbound._model import Proposal, Subject
from toolbound._state import State
from toolbound.access_log import AccessLog, note_caller, note_rpc
from toolbound.gates.normalize import canonical_json
from toolbound.gates.parse import ParseLimits, parse_arguments
from toolbound.journal import StoredCall
from toolbound.mcp.content import content_blocks, pass_through, summary, text_annotations
from toolbound.mcp.events import SessionEventStores
from toolbound.mcp.inbox import HandedOver, answered_elsewhere, applying, still_unanswered
from toolbound.mcp.relay import (
    CALLER,
    PROGRESS,
    caller_of,
    connection_of,
    progress_token,
)
from toolbound.mcp.reporting import LogLevels, relaying
from toolbound.mcp.rounds import CAPABILITIES_META_KEY, ROUNDS, Round, StateSeal
from toolbound.mcp.serving_resources import Subscribable, subscription_handlers
from toolbound.mcp.tasks import Answers, TaskBoard, TaskFailed, declares_tasks, requires_tasks
from toolbound.mcp.telemetry import ServerSpans, call_trace_id, telemetry_for
from toolbound.mcp.tokens import off_loop_if_fetching
from toolbound.mcp.wire import DirectCalls
from toolbound.pipeline.confirm import ConfirmOnce
from toolbound.pipeline.runtime import CallContext, Runtime
from toolbound.registry import Registry, ToolSet
from toolbound.results.encode import dumps, model_result

try:
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
    from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence

    from mcp.server.context import ServerRequestContext
    from starlette.routing import BaseRoute
    from starlette.types import Message, Receive, Scope, Send

    from toolbound._model import EffectClass, JSONObject, ToolSpec
    from toolbound._outcome import Observed, Outcome
    from toolbound.mcp.config import ProtectedResource
    from toolbound.mcp.relay import ProgressSink
    from toolbound.registry import RegisteredTool

    ContentRule = Callable[[str], "tuple[str, int] | None"]
    """For a served tool's name: the upstream it comes from (``""`` for a local tool)
    and the most bytes one non-text block of its results may carry; ``None`` for a
    tool whose results are JSON values only."""


__all__ = [
    "ENVELOPE_META_KEY",
    "SUBJECT_SCOPE_KEY",
    "Catalog",
    "ConfirmOnce",
    "Federated",
    "GuardedServer",
    "HttpEndpoint",
    "StaticCatalog",
    "annotations_for",
    "call_result",
    "error_result",
    "holds_capabilities",
    "holds_capability",
    "pending_result",
    "tool_definition",
]


SUBJECT_SCOPE_KEY: Final = "toolbound.subject"
"""Where :class:`HttpEndpoint` puts the authenticated :class:`~toolbound.Subject` in
the ASGI scope; the server reads the caller from there."""

ENVELOPE_META_KEY: Final = "io.toolbound/envelope"
"""Where an ``isError`` result carries toolbound's envelope as an object (``_meta``)."""

_CONFIRM_KEY: Final = "confirm"
_CONFIRM_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve this call",
            "description": "Run it once, exactly as shown.",
        },
        "reason": {
            "type": "string",
            "title": "Reason (if you deny it)",
            "description": "Told to the model as your words.",
            "maxLength": 1000,
        },
    },
    "required": ["approve"],
}
# The JSON-RPC envelope adds three levels above a call's arguments.
_BODY_LIMITS: Final = ParseLimits(max_bytes=4 * 1024 * 1024, max_depth=67)


# -- pure mapping functions ------------------------------------------------------------


def annotations_for(effect: EffectClass) -> types.ToolAnnotations:
    """MCP annotations that say what toolbound enforces for ``effect``.

    ``idempotentHint`` is true for every class: through toolbound a repeated
    identical call replays the recorded result instead of acting twice (R8).
    """
    read_only = effect in {"pure", "read"}
    return types.ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=effect in {"irreversible_write", "open_world"},
        idempotent_hint=True,
        open_world_hint=effect == "open_world",
    )


def tool_definition(spec: ToolSpec, *, legacy: bool = False) -> types.Tool:
    """The ``tools/list`` entry for ``spec``.

    ``legacy`` (a 2025-era connection): an output schema whose root is not an
    object cannot be declared there, so it is left out.
    """
    output = _declared_output(spec, legacy=legacy)
    meta: dict[str, Any] = {
        "io.toolbound/version": spec.version,
        "io.toolbound/effect": spec.effect,
    }
    tasks = None if spec.task_support == "forbidden" else spec.task_support
    if tasks is not None:
        # Not execution.taskSupport: on a 2025-11-25 connection that promises the
        # tasks of that revision, which are not served (the extension is).
        meta["io.toolbound/taskSupport"] = tasks
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=dict(spec.input_schema),
        output_schema=None if output is None else dict(output),
        annotations=annotations_for(spec.effect),
        _meta=meta,
    )


def call_result(outcome: Outcome, *, structured: bool) -> types.CallToolResult:
    """The ``tools/call`` result for an outcome that is not awaiting confirmation.

    ``structured``: the tool declares an output schema, so a success carries the
    value the runtime checked against it as ``structuredContent`` (whole, even when
    the text was cut to the result budget). Anything else is an error result
    (:func:`error_result`). A rejection for an unknown tool is not a result but a
    protocol error (see :meth:`GuardedServer.call_tool`).
    """
    message = outcome.message
    if outcome.kind != "observed":
        return error_result(message.payload)
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=message.text)]
    if not structured:
        return types.CallToolResult(content=content)
    value = outcome.result.value if message.truncated else message.payload.get("data")
    return types.CallToolResult(content=content, structured_content=value)


def pending_result(request: ConfirmationRequest, *, proposal_id: str) -> types.CallToolResult:
    """The result for a call parked until a person confirms it (no elicitation)."""
    payload: JSONObject = {
        "type": "tool_pending",
        "call_id": proposal_id,
        "tool": request.tool,
        "status": "awaiting_confirmation",
        "invocation_id": request.invocation_id,
        "digest": request.digest,
        "expires_at": request.expires_at.isoformat(),
        "error": {
            "kind": "confirmation",
            "code": "awaiting_confirmation",
            "message": (
                f"a person must approve invocation {request.invocation_id} "
                f"(digest {request.digest}) before it runs"
            ),
            "recoverable": True,
            "hint": (
                "do not change the arguments; once it is approved, make the same call "
                "again to get its result"
            ),
        },
    }
    return error_result(payload)


def stored_result(call: StoredCall, tools: ToolSet, *, legacy: bool) -> types.CallToolResult:
    """The ``tools/call`` result a call ended with, as the journal recorded it sent.

    What another replica answered (:func:`~toolbound.mcp.inbox.answered_elsewhere`):
    the text the model was given, and a declared output's value as structured content.
    """
    response = call.body.get("response")
    message = response.get("message") if isinstance(response, dict) else None
    message = message if isinstance(message, dict) else {}
    text = str(message.get("content", ""))
    if call.status != "observed" or message.get("is_error"):
        try:
            envelope = json.loads(text)
        except ValueError:
            envelope = None
        if isinstance(envelope, dict):
            return error_result(envelope)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=True
        )
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    name, _, version = call.tool.rpartition("@")
    tool = tools.lookup(name, version or None) if name else tools.lookup(call.tool)
    if tool is None or _declared_output(tool.spec, legacy=legacy) is None:
        return types.CallToolResult(content=content)
    human = call.body.get("human")
    value = human.get("value") if isinstance(human, dict) else None
    return types.CallToolResult(content=content, structured_content=value)


def error_result(envelope: JSONObject) -> types.CallToolResult:
    """An ``isError`` result carrying toolbound's ``envelope`` (an error, or a pending call).

    ``structuredContent`` is left out: where a tool declares an ``outputSchema``, that
    field must conform to it, and clients check it even on errors (the TypeScript
    SDK throws ``-32602`` when it does not). The envelope is the text the model reads,
    and the same object under ``_meta["io.toolbound/envelope"]`` for programs.
    """
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=dumps(envelope).decode())],
        is_error=True,
        _meta={ENVELOPE_META_KEY: dict(envelope)},
    )


def _declared_output(spec: ToolSpec, *, legacy: bool) -> Mapping[str, object] | None:
    output = spec.output_schema
    if output is None or (legacy and output.get("type") != "object"):
        return None
    return output


# -- which tools a caller sees -----------------------------------------------------------


class Catalog(Protocol):
    """The tools a server offers, and which of them one subject may see and call."""

    async def refresh(self, *, listing: bool) -> None:
        """Bring the tool set up to date: always before a listing, when stale before a call."""
        ...

    def visible(self, subject: Subject) -> ToolSet:
        """The tools ``subject`` may see — and so call: the two never differ (R18)."""
        ...


@runtime_checkable
class RelayedSubscriptions(Protocol):
    """Resource subscriptions relayed to where the resources live (the gateway's upstreams)."""

    @property
    def subscribable(self) -> bool:
        """Whether ``resources/subscribe`` is served (and ``resources.subscribe`` advertised)."""
        ...

    async def subscribe(self, subject: Subject, uri: str, connection: object) -> None:
        """``resources/subscribe`` for ``connection``, if ``subject`` may read ``uri``."""
        ...

    async def unsubscribe(self, subject: Subject, uri: str, connection: object) -> None:
        """``resources/unsubscribe`` for ``connection``."""
        ...


class Federated(Protocol):
    """Resources and prompts served beside the tools (a gateway's upstreams').

    Each method answers for ``subject`` only: what it may list, read and get.
    """

    async def list_resources(self, subject: Subject) -> list[types.Resource]:
        """``resources/list``."""
        ...

    async def list_resource_templates(self, subject: Subject) -> list[types.ResourceTemplate]:
        """``resources/templates/list``."""
        ...

    async def read_resource(self, subject: Subject, uri: str) -> types.ReadResourceResult:
        """``resources/read``."""
        ...

    async def list_prompts(self, subject: Subject) -> list[types.Prompt]:
        """``prompts/list``."""
        ...

    async def get_prompt(
        self, subject: Subject, name: str, arguments: dict[str, str]
    ) -> types.GetPromptResult:
        """``prompts/get``."""
        ...

    async def complete(
        self, subject: Subject, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        """``completion/complete``."""
        ...


class _GrantLike(Protocol):
    @property
    def subject(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def session(self) -> str | None: ...
    @property
    def capability(self) -> str: ...


def holds_capabilities(
    grants: Iterable[_GrantLike],
) -> Callable[[Subject, ToolSpec], bool]:
    """A visibility rule: a subject sees a tool when it holds a grant for each capability.

    Scopes and limits depend on a call's arguments, so they are left to
    authorization; a tool the subject holds no grant for could never be allowed.
    """
    holds = holds_capability(grants)

    def can_see(subject: Subject, spec: ToolSpec) -> bool:
        return all(holds(subject, c) for c in spec.capabilities)

    return can_see


def holds_capability(grants: Iterable[_GrantLike]) -> Callable[[Subject, str], bool]:
    """Whether a subject holds a grant for one capability (in its session, or any)."""
    held: dict[tuple[str, str], list[tuple[str | None, str]]] = {}
    for g in grants:
        held.setdefault((g.tenant, g.subject), []).append((g.session, g.capability))

    def holds(subject: Subject, capability: str) -> bool:
        mine = held.get((subject.tenant, subject.id), [])
        return any(c == capability and (s is None or s == subject.session) for s, c in mine)

    return holds


class StaticCatalog:
    """A fixed tool set (a :class:`~toolbound.Registry`'s), filtered per subject by ``can_see``."""

    def __init__(
        self,
        tools: Registry | ToolSet,
        can_see: Callable[[Subject, ToolSpec], bool] | None = None,
    ) -> None:
        self._tools = tools.toolset() if isinstance(tools, Registry) else tools
        self._can_see = can_see
        self._seen: dict[Subject, ToolSet] = {}

    async def refresh(self, *, listing: bool) -> None:
        """Nothing to refresh: the tool set is fixed."""

    def visible(self, subject: Subject) -> ToolSet:
        """The tools ``subject`` may see."""
        found = self._seen.get(subject)
        if found is None:
            rule = self._can_see
            found = ToolSet(t for t in self._tools if rule is None or rule(subject, t.spec))
            self._seen[subject] = found
        return found


# -- the server --------------------------------------------------------------------------


@runtime_checkable
class PromptRounds(Protocol):
    """A federation whose ``prompts/get`` may ask a 2026-07-28 caller for input."""

    async def get_prompt_round(
        self, subject: Subject, name: str, arguments: dict[str, str], round_: Round
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """``prompts/get`` with the caller's answers and the upstream's own state."""
        ...


@dataclass(frozen=True, slots=True)
class _Answer:
    """What a person said through elicitation."""

    verdict: str  # "approve" | "deny" | "cancel"
    reason: str | None = None
    """A denial's reason, in the person's words: the model is told it."""


class GuardedServer:
    """Serves a :class:`Catalog` over MCP, every call through ``runtime`` (R18).

    ``confirm`` is ``"elicitation"`` (ask through the client when it can) or
    ``"console"`` (always park for a person elsewhere). ``timeout`` and
    ``result_budget`` bound each call (:class:`~toolbound.CallContext`). The
    runtime's policy is wrapped in :class:`ConfirmOnce` if it is not already.
    ``content`` says which tools' results may hold image, audio and resource blocks
    to pass on as blocks (:mod:`toolbound.mcp.content`), and how large.
    ``federation`` adds resources, prompts and completion (a gateway's upstreams',
    :mod:`toolbound.mcp.federation`); without it the server offers tools only.
    ``version`` is the ``serverInfo.version`` clients see: toolbound's by default.

    Build the SDK server with :meth:`lowlevel`, serve stdio with :meth:`run_stdio`,
    or HTTP with :class:`HttpEndpoint`.
    """

    def __init__(
        self,
        *,
        runtime: Runtime,
        catalog: Catalog,
        name: str = "toolbound",
        version: str | None = None,
        confirm: str = "elicitation",
        timeout: float | None = None,
        result_budget: int | None = None,
        content: ContentRule | None = None,
        federation: Federated | None = None,
    ) -> None:
        if confirm not in {"elicitation", "console"}:
            msg = f"confirm must be 'elicitation' or 'console', not {confirm!r}"
            raise ValueError(msg)
        if not isinstance(runtime.policy, ConfirmOnce):
            runtime.policy = ConfirmOnce(runtime.policy, runtime)
        elif runtime.policy.runtime is None:
            runtime.policy.runtime = runtime
        self.runtime = runtime
        self.catalog = catalog
        self.name = name
        self.version = version if version is not None else _package_version()
        """``serverInfo.version``: toolbound's own version unless one is given."""
        self.confirm = confirm
        self.timeout = timeout
        self.result_budget = result_budget
        self.content = content
        self.federation = federation
        self.log_levels = LogLevels()
        self.handed = HandedOver()
        """Calls answered pending and decided elsewhere since (:mod:`toolbound.mcp.inbox`)."""
        self._state_key = os.urandom(32)
        self._rounds = _InputRounds()
        self.tasks = TaskBoard(
            runtime.clock, ttl=timedelta(hours=1), poll_interval=timedelta(milliseconds=500)
        )
        """The calls running as tasks of the tasks extension (:mod:`toolbound.mcp.tasks`)."""

    # -- the SDK server ----------------------------------------------------------------

    def lowlevel(self, subject: Subject | None = None) -> Server[Any]:
        """An SDK server whose every request runs as ``subject``.

        Without one, the subject is the one :class:`HttpEndpoint` authenticated for
        the HTTP request; a request with neither is refused.
        """

        def caller(ctx: ServerRequestContext[Any, Any]) -> Subject:
            if subject is not None:
                return subject
            scope = getattr(ctx.request, "scope", None)
            found = None if scope is None else scope.get(SUBJECT_SCOPE_KEY)
            if not isinstance(found, Subject):
                raise MCPError(
                    code=types.INVALID_REQUEST, message="the caller is not authenticated"
                )
            return found

        async def on_list_tools(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            del params  # one page: a caller's tool set is small
            tools = await self.list_tools(caller(ctx), legacy=_legacy(ctx))
            return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

        async def on_call_tool(
            ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult | types.InputRequiredResult:
            return await self.call_tool(caller(ctx), params, ctx)

        async def answer_call(
            ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult | types.InputRequiredResult | JSONObject:
            return await self.call_or_task(caller(ctx), params, ctx)

        async def on_set_logging_level(
            ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
        ) -> types.EmptyResult:
            # What tools log (ToolContext.log) reaches this client from this level up;
            # a gateway relays its upstreams' log messages at this level too.
            caller(ctx)
            self.log_levels.set(ctx, params.level)
            return types.EmptyResult()

        handlers = {} if self.federation is None else self._federated(caller)
        if isinstance(self.federation, Subscribable):
            handlers.update(subscription_handlers(self.federation, caller))
        elif isinstance(self.federation, RelayedSubscriptions) and self.federation.subscribable:
            handlers.update(_subscription_handlers(self.federation, caller))
        with warnings.catch_warnings():
            # Logging is deprecated from 2026-07-28 (SEP-2577), but clients on a
            # 2025-era connection still send logging/setLevel when they connect.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = Server(
                self.name,
                version=self.version,
                on_list_tools=on_list_tools,
                on_call_tool=on_call_tool,
                on_set_logging_level=on_set_logging_level,
                # Our schemas declare no Mcp-Param headers; without this the SDK would
                # run a whole tools/list for every HTTP call to look for them.
                get_tool_input_schema=lambda _name: None,
                **handlers,
            )
        # R14: our MCP server spans (the runtime's tracer) in place of the SDK's; inside
        # them, tools/call answered without the SDK's typed layer (mcp.wire).
        server.middleware[:] = [
            ServerSpans(telemetry_for(self.runtime)),
            DirectCalls(answer_call, lambda: server.server_info_stamp),
        ]
        self.tasks.register(server, caller)
        return server

    def _federated(
        self, caller: Callable[[ServerRequestContext[Any, Any]], Subject]
    ) -> dict[str, Any]:
        """The SDK handlers for resources, prompts and completion, each as the caller."""
        fed = self.federation
        assert fed is not None  # noqa: S101 - only called with one

        async def on_list_resources(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            del params  # one page
            return types.ListResourcesResult(resources=await fed.list_resources(caller(ctx)))

        async def on_list_resource_templates(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            del params
            found = await fed.list_resource_templates(caller(ctx))
            return types.ListResourceTemplatesResult(resource_templates=found)

        async def on_read_resource(
            ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            return await fed.read_resource(caller(ctx), str(params.uri))

        async def on_list_prompts(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListPromptsResult:
            del params
            return types.ListPromptsResult(prompts=await fed.list_prompts(caller(ctx)))

        async def on_get_prompt(
            ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
        ) -> types.GetPromptResult | types.InputRequiredResult:
            subject = caller(ctx)
            arguments = dict(params.arguments or {})
            if (
                not isinstance(fed, PromptRounds)
                or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            ):
                return await fed.get_prompt(subject, params.name, arguments)
            return await self._rounds.prompt(fed, ctx, params, subject)

        async def on_completion(
            ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
        ) -> types.CompleteResult:
            return await fed.complete(caller(ctx), params)

        return {
            "on_list_resources": on_list_resources,
            "on_list_resource_templates": on_list_resource_templates,
            "on_read_resource": on_read_resource,
            "on_list_prompts": on_list_prompts,
            "on_get_prompt": on_get_prompt,
            "on_completion": on_completion,
        }

    async def run_stdio(self, subject: Subject) -> None:
        """Serve one client on this process's stdin and stdout, as ``subject``."""
        server = self.lowlevel(subject)
        async with applying(self.runtime, self.handed), stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    # -- the two methods ---------------------------------------------------------------

    async def list_tools(self, subject: Subject, *, legacy: bool = False) -> list[types.Tool]:
        """What ``subject`` sees: every tool it may call, and no other."""
        await self.catalog.refresh(listing=True)
        return [
            tool_definition(spec, legacy=legacy) for spec in self.catalog.visible(subject).specs
        ]

    async def call_tool(
        self,
        subject: Subject,
        params: types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any] | None = None,
        *,
        proposal_id: str | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Run one ``tools/call`` through the pipeline as ``subject``."""
        await self.catalog.refresh(listing=False)
        tools = self.catalog.visible(subject)
        if proposal_id is None:
            proposal_id = (
                f"mcp-{ctx.request_id}" if ctx is not None and ctx.request_id else _new_id()
            )
        proposal = Proposal(
            name=params.name, arguments=_argument_bytes(params.arguments), proposal_id=proposal_id
        )
        meta: Mapping[str, object] = params.meta or {}
        context = CallContext(
            subject=subject,
            tools=tools,
            timeout=self.timeout,
            result_budget=self.result_budget,
            trace_id=call_trace_id(meta),
        )
        legacy = ctx is not None and _legacy(ctx)
        sink = _progress_sink(ctx, meta)
        round_ = self._rounds.call(params, subject, meta, ctx)
        relayed = PROGRESS.set(sink)
        calling = CALLER.set(None if ctx is None else caller_of(ctx, subject))
        rounding = ROUNDS.set(round_)
        try:
            async with relaying(ctx, sink, self.log_levels) as reports:
                outcome = await self.runtime.arun(proposal, context)
        finally:
            ROUNDS.reset(rounding)
            CALLER.reset(calling)
            PROGRESS.reset(relayed)
        reports.record(outcome.trace)
        parked = self._parked(outcome)
        if parked is None:
            asking = round_ is not None and (round_.asked or round_.missing)
            return (
                self._rounds.relayed(round_, outcome, subject, params.name)
                if round_ is not None and asking
                else self.result_of(outcome, tools, legacy=legacy)
            )
        fresh = outcome.kind == "awaiting_confirmation"  # parked now, not the one waiting
        known = None
        if fresh:
            retried = bool(params.request_state)
            known = await _asked_again(self, parked, context, proposal, legacy, retried=retried)
        if known is not None:
            return known
        answer = self._answer(params, parked, subject) if params.request_state else None
        if answer is None:
            asked = await self._ask(parked, subject, ctx)
            if isinstance(asked, types.InputRequiredResult):
                return asked
            answer = asked
        if answer is None:
            self.handed.sent(subject, parked)
            return pending_result(parked, proposal_id=proposal.proposal_id)
        decided = await self.decide(parked, answer, subject)
        if decided is None:
            # The parked call was settled elsewhere meanwhile (a console approved it):
            # the same call now replays its result or finds it in flight.
            decided = await self.runtime.arun(proposal, context)
            again = self._parked(decided)
            if again is not None:
                return pending_result(again, proposal_id=proposal.proposal_id)
        return self.result_of(decided, tools, legacy=legacy)

    # -- tasks (the tasks extension) ---------------------------------------------------------

    async def call_or_task(
        self,
        subject: Subject,
        params: types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
    ) -> types.CallToolResult | types.InputRequiredResult | JSONObject:
        """A ``tools/call``: run as a task (its ``CreateTaskResult``, in wire form) or now."""
        created = await _as_task(self, subject, params, ctx)
        if created is not None:
            return created
        return await self.call_tool(subject, params, ctx)

    # -- confirmation ----------------------------------------------------------------------

    def _parked(self, outcome: Outcome) -> ConfirmationRequest | None:
        """The parked call this outcome stands for: its own, or the identical one waiting."""
        if outcome.kind == "awaiting_confirmation":
            return outcome.request
        if outcome.kind == "rejected" and outcome.problem.code == "confirmation_pending":
            wanted = _digest_of(outcome)
            return next((p for p in self.runtime.pending() if p.digest == wanted), None)
        return None

    async def _ask(
        self,
        parked: ConfirmationRequest,
        subject: Subject,
        ctx: ServerRequestContext[Any, Any] | None,
    ) -> types.InputRequiredResult | _Answer | None:
        """Ask the person at the client, if this client and configuration allow it."""
        if self.confirm != "elicitation" or ctx is None or not _can_elicit(ctx):
            return None
        message = _elicitation_message(parked)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return types.InputRequiredResult(
                input_requests={
                    _CONFIRM_KEY: types.ElicitRequest(
                        params=types.ElicitRequestFormParams(
                            message=message, requested_schema=_CONFIRM_SCHEMA
                        )
                    )
                },
                request_state=self._seal(parked, subject),
            )
        if not ctx.session.can_send_request:
            return None
        try:
            result = await ctx.session.elicit_form(
                message, _CONFIRM_SCHEMA, related_request_id=ctx.request_id
            )
        except Exception:  # noqa: BLE001 - the client could not ask: a person decides elsewhere
            return None
        return _verdict(result)

    def _answer(
        self, params: types.CallToolRequestParams, parked: ConfirmationRequest, subject: Subject
    ) -> _Answer | None:
        """The person's answer on a retried call, if its state is for this very call."""
        state = params.request_state or ""
        if not hmac.compare_digest(state, self._seal(parked, subject)):
            return None  # another call's, another subject's or a forged state: ask again
        response = (params.input_responses or {}).get(_CONFIRM_KEY)
        if not isinstance(response, types.ElicitResult):
            return None
        return _verdict(response)

    async def decide(
        self, parked: ConfirmationRequest, answer: _Answer, subject: Subject
    ) -> Outcome | None:
        """Apply the person's answer to the parked call; ``None`` if it is no longer parked."""
        approver = f"{subject.id}@{subject.tenant} via MCP elicitation"
        try:
            if answer.verdict == "approve":
                return await self.runtime.aapprove(
                    parked.invocation_id, digest=parked.digest, approver=approver
                )
            if answer.verdict == "deny":
                deny = functools.partial(
                    self.runtime.deny,
                    parked.invocation_id,
                    digest=parked.digest,
                    approver=approver,
                    reason=answer.reason,
                )
                # With a journal the decision is a compare-and-set there: off the loop.
                return deny() if self.runtime.inbox is None else await self.runtime.off_loop(deny)
            return self.runtime.cancel_pending(parked.invocation_id)
        except ConfirmationMismatch:
            return None

    def _seal(self, parked: ConfirmationRequest, subject: Subject) -> str:
        """The requestState for ``parked``: bound to its invocation, digest and subject."""
        text = "\x1f".join(
            (parked.invocation_id, parked.digest, subject.tenant, subject.id, subject.session or "")
        )
        mac = hmac.new(self._state_key, text.encode(), hashlib.sha256).hexdigest()
        return f"{parked.invocation_id}.{mac}"

    def result_of(
        self, outcome: Outcome, tools: ToolSet, *, legacy: bool = False
    ) -> types.CallToolResult:
        """The ``tools/call`` result for ``outcome`` (a hidden tool's is a protocol error)."""
        if outcome.kind == "rejected" and outcome.problem.kind == "unknown_tool":
            # R18: a hidden tool is refused exactly like one that does not exist.
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {_name(outcome)}")
        structured = False
        if outcome.kind == "observed":
            tool = tools.lookup(outcome.invocation.tool_name)
            structured = tool is not None and _declared_output(tool.spec, legacy=legacy) is not None
            if tool is not None and not structured:
                passed = self._pass_through(outcome, tool)
                if passed is not None:
                    return passed
        return call_result(outcome, structured=structured)

    def _pass_through(self, outcome: Observed, tool: RegisteredTool) -> types.CallToolResult | None:
        """An upstream result with image, audio or resource blocks, passed on as blocks."""
        rule = None if self.content is None else self.content(tool.spec.name)
        blocks = None if rule is None else content_blocks(outcome.result.value)
        if rule is None or blocks is None:
            return None
        upstream, limit = rule
        source = f"upstream {upstream}" if upstream else f"tool {tool.spec.name}"
        passed = pass_through(blocks, limit=limit, source=source)
        data = passed.data
        shown = outcome.message.payload.get("data")
        if not outcome.message.truncated and isinstance(shown, list) and len(shown) == len(data):
            # Text blocks as the runtime showed them to the model (redacted), not raw.
            data = [shown[i] if isinstance(b, types.TextContent) else d
                    for i, (b, d) in enumerate(zip(blocks, data, strict=True))]  # fmt: skip
        budget = tool.spec.result_budget
        if self.result_budget is not None:
            budget = min(budget, self.result_budget)
        message = model_result(
            invocation_id=outcome.invocation_id,
            proposal_id=outcome.proposal_id,
            tool=outcome.tool,
            value=data,
            budget=budget,
            cuts=(*outcome.message.cuts, *passed.cuts),
        )
        # R14: what the client receives instead of the runtime's own message.
        outcome.trace.record(
            "tool_message",
            content=message.content,
            is_error=False,
            truncated=message.truncated,
            cuts=message.cuts,
            blocks=[summary(b) for b in passed.blocks],
            reason="content blocks passed through",
        )
        envelope = types.TextContent(
            type="text", text=message.text, annotations=text_annotations(blocks)
        )
        return types.CallToolResult(content=[envelope, *passed.blocks])


class _InputRounds:
    """Upstream input requests relayed to a 2026-07-28 caller (:mod:`~toolbound.mcp.rounds`)."""

    def __init__(self) -> None:
        self._states = StateSeal(os.urandom(32))

    async def prompt(
        self,
        fed: PromptRounds,
        ctx: ServerRequestContext[Any, Any],
        params: types.GetPromptRequestParams,
        subject: Subject,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """``prompts/get`` from a 2026-07-28 caller: its state sealed to name and arguments."""
        arguments = dict(params.arguments or {})
        bound = f"prompts/get {params.name}"
        digest = hashlib.sha256(canonical_json(cast("JSONObject", arguments))).hexdigest()
        round_ = _opened(
            self._states,
            params.request_state,
            subject=subject,
            bound=bound,
            meta=ctx.meta or {},
            responses=params.input_responses,
        )
        if round_.digest is not None and round_.digest != digest:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message="requestState was given for other prompt arguments",
            )
        result = await fed.get_prompt_round(subject, params.name, arguments, round_)
        if not isinstance(result, types.InputRequiredResult):
            return result
        sealed = self._states.seal(result.request_state, digest=digest, subject=subject, tool=bound)
        return result.model_copy(update={"request_state": sealed})

    def call(
        self,
        params: types.CallToolRequestParams,
        subject: Subject,
        meta: Mapping[str, object],
        ctx: ServerRequestContext[Any, Any] | None,
    ) -> Round | None:
        """The round of a 2026-07-28 call; -32602 for a requestState the gateway did not seal."""
        if ctx is None or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        return _opened(
            self._states,
            params.request_state,
            subject=subject,
            bound=params.name,
            meta=meta,
            responses=params.input_responses,
        )

    def relayed(
        self, round_: Round, outcome: Outcome, subject: Subject, tool: str
    ) -> types.InputRequiredResult:
        """The upstream's InputRequiredResult for the caller, its state sealed to this call.

        -32021 when it asks for what the caller's client does not offer.
        """
        if round_.missing:
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=f"{tool} needs client capabilities this request did not declare: "
                + ", ".join(sorted(round_.missing)),
                data={"requiredCapabilities": round_.missing},
            )
        asked = round_.asked or {}
        digest = _digest_of(outcome) or ""
        state = asked.get("requestState")
        sealed = self._states.seal(
            state if isinstance(state, str) else None,
            digest=digest,
            subject=subject,
            tool=tool,
            call=round_.continues or outcome.invocation_id,
        )
        return types.InputRequiredResult.model_validate({**asked, "requestState": sealed})


# -- HTTP -----------------------------------------------------------------------------------


class HttpEndpoint:
    """A guarded server over streamable HTTP: an ASGI app, and the context it runs in.

    ``authenticate`` maps a bearer token to the caller's subject, or ``None`` to
    refuse (401). The app also refuses a body that is not strict JSON (400, JSON-RPC
    ``-32700`` with the parse gate's code). The endpoint is itself the ASGI app: mount
    it anywhere in a Starlette or other ASGI application and enter :meth:`running`
    in its lifespan; or serve :meth:`starlette` on its own. ``allowed_hosts`` guards
    against DNS rebinding (``None`` allows any host: only behind a proxy that checks it).

    ``routes`` are served beside the MCP endpoint by :meth:`starlette` (a gateway's
    confirmation endpoints, :mod:`toolbound.mcp.confirmations`); an application that
    mounts the endpoint itself adds them to its own routes.

    ``local`` is local mode: a request without a bearer token runs as that subject
    instead of being refused (a request with one is authenticated as always). Serve it
    on a loopback address only — the CLI refuses any other. ``protected_resource``
    (RFC 9728) adds its metadata document to :attr:`routes` and names it in the
    ``WWW-Authenticate`` header of every 401 (``resource_metadata``).

    Its SSE streams are resumable (SEP-1699, :mod:`toolbound.mcp.events`): each starts
    with a priming event id and a ``retry``, and a client that reconnects with
    ``Last-Event-ID`` receives the messages it missed.
    """

    def __init__(
        self,
        server: GuardedServer,
        authenticate: Callable[[str], Subject | None],
        *,
        allowed_hosts: list[str] | None = None,
        json_response: bool = False,
        routes: Sequence[BaseRoute] = (),
        local: Subject | None = None,
        protected_resource: ProtectedResource | None = None,
    ) -> None:
        security = (
            None
            if allowed_hosts is None
            else TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=allowed_hosts,
                allowed_origins=[f"http://{h}" for h in allowed_hosts]
                + [f"https://{h}" for h in allowed_hosts],
            )
        )
        self.server = server
        self.routes: tuple[BaseRoute, ...] = tuple(routes) + _metadata_routes(protected_resource)
        self._authenticate = authenticate
        self._local = local
        challenge = 'Bearer realm="toolbound"'
        if protected_resource is not None:
            challenge += f', resource_metadata="{protected_resource.metadata_url}"'
        self._challenge = challenge.encode()
        self._json_response = json_response
        self._security = security
        self._manager: SessionEventStores | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the session manager; the app serves only inside this context.

        The SDK server is built here: a gateway started before offers what its
        upstreams offer (resource subscriptions).
        """
        # SEP-1699: SSE streams are resumable (priming event, retry, Last-Event-ID).
        manager = SessionEventStores(
            app=self.server.lowlevel(),
            json_response=self._json_response,
            security_settings=self._security,
        )
        self._manager = manager
        try:
            # Decisions made in the console on the calls held here land while it serves.
            async with manager.run(), applying(self.server.runtime, self.server.handed):
                yield
        finally:
            self._manager = None
            # A task still running when the server stops is cancelled by the runtime,
            # so its call is settled (CANCELLED), never left executing.
            await self.server.tasks.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app: authenticate, check the body strictly, then hand over to the SDK."""
        manager = self._manager
        if manager is None:
            msg = "the MCP endpoint serves only inside HttpEndpoint.running()"
            raise RuntimeError(msg)
        if scope["type"] != "http":
            await manager.handle_request(scope, receive, send)
            return
        subject = await self._subject(scope)
        if subject is None:
            await _respond(
                send,
                401,
                {"error": "unauthorized", "message": "a valid bearer token is required"},
                extra=[(b"www-authenticate", self._challenge)],
            )
            return
        scope = {**scope, SUBJECT_SCOPE_KEY: subject}
        note_caller(subject.id, subject.tenant)  # the access log names who called
        if scope.get("method") == "POST":
            body = await _read_body(receive)
            problem = _strict(body)
            if problem is not None:
                await _respond(send, 400, _parse_error(body, problem))
                return
            receive = _replay(body, receive)
        await manager.handle_request(scope, receive, send)

    def starlette(
        self,
        path: str = "/mcp",
        *,
        also: Sequence[Callable[[], contextlib.AbstractAsyncContextManager[object]]] = (),
    ) -> Any:  # noqa: ANN401 - a Starlette app
        """A Starlette app serving the endpoint at ``path``, and :attr:`routes` beside it.

        Its lifespan enters ``also`` (a gateway's ``running``, say), then :meth:`running`.
        """
        from starlette.applications import Starlette  # noqa: PLC0415 - only for serving
        from starlette.middleware import Middleware  # noqa: PLC0415
        from starlette.routing import Route  # noqa: PLC0415

        @contextlib.asynccontextmanager
        async def lifespan(_app: object) -> AsyncIterator[None]:
            async with contextlib.AsyncExitStack() as stack:
                for enter in also:
                    await stack.enter_async_context(enter())
                await stack.enter_async_context(self.running())
                yield

        return Starlette(
            routes=[Route(path, endpoint=self), *self.routes],
            middleware=[Middleware(AccessLog)],  # every request logged, refused or not
            lifespan=lifespan,
        )

    async def _subject(self, scope: Scope) -> Subject | None:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer" and token.strip():
                    return await off_loop_if_fetching(
                        self.server.runtime, self._authenticate, token.strip()
                    )
                return None  # credentials we cannot read are refused, even in local mode
        return self._local


async def _asked_again(
    server: GuardedServer,
    parked: ConfirmationRequest,
    context: CallContext,
    proposal: Proposal,
    legacy: bool,  # noqa: FBT001 - the caller's protocol, passed along
    *,
    retried: bool,
) -> types.CallToolResult | None:
    """The answer to a call ``server`` parked just now that stands for one parked before.

    Answered pending here and decided in the console since: that decision's
    outcome. Asked first of another replica on the same store: that call's
    pending result while it waits, its outcome once decided
    (:func:`~toolbound.mcp.inbox.answered_elsewhere`). ``None``: ``parked`` stands.
    ``retried``: the call carries a person's answer to an elicitation here.
    """
    runtime = server.runtime
    settled = server.handed.answer(context.subject, parked.digest)
    if settled is not None and await still_unanswered(runtime, parked, settled):
        runtime.cancel_pending(parked.invocation_id)
        inbox = runtime.inbox
        if inbox is not None:
            # Once: another replica asked next finds this call in the journal.
            await runtime.off_loop(inbox.recorder.flush)
        return server.result_of(settled, context.tools, legacy=legacy)
    if retried:
        return None
    other = await answered_elsewhere(runtime, parked, context)
    if isinstance(other, ConfirmationRequest):
        return pending_result(other, proposal_id=proposal.proposal_id)
    if isinstance(other, StoredCall):
        return stored_result(other, context.tools, legacy=legacy)
    return None if other is None else server.result_of(other, context.tools, legacy=legacy)


def _subscription_handlers(
    fed: RelayedSubscriptions, caller: Callable[[ServerRequestContext[Any, Any]], Subject]
) -> dict[str, Any]:
    """The SDK handlers for ``resources/subscribe`` and ``resources/unsubscribe``."""

    async def on_subscribe_resource(
        ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        await fed.subscribe(caller(ctx), str(params.uri), connection_of(ctx.session))
        return types.EmptyResult()

    async def on_unsubscribe_resource(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await fed.unsubscribe(caller(ctx), str(params.uri), connection_of(ctx.session))
        return types.EmptyResult()

    return {
        "on_subscribe_resource": on_subscribe_resource,
        "on_unsubscribe_resource": on_unsubscribe_resource,
    }


def _metadata_routes(resource: ProtectedResource | None) -> tuple[BaseRoute, ...]:
    """RFC 9728: the protected resource's metadata, open to anyone, at its well-known paths."""
    if resource is None:
        return ()
    from starlette.responses import JSONResponse  # noqa: PLC0415 - only for serving
    from starlette.routing import Route  # noqa: PLC0415

    document = resource.metadata()

    async def metadata(_request: object) -> JSONResponse:
        return JSONResponse(document, headers={"cache-control": "max-age=3600"})

    return tuple(Route(path, metadata, methods=["GET"]) for path in resource.metadata_paths)


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > _BODY_LIMITS.max_bytes:
            chunks.append(chunk)
            break
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _strict(body: bytes) -> Problem | None:
    """R3 at the transport: the whole JSON-RPC message must be strict JSON.

    A strict message's method, and the tool a ``tools/call`` names, go to the access
    log (never its arguments).
    """
    if not body:
        return None  # the SDK answers an empty body itself
    try:
        message = parse_arguments(body, _BODY_LIMITS)
    except Rejection as r:
        if r.problem.code == "not_an_object":
            return None  # a batch or a scalar: the SDK's own error is the right one
        return r.problem
    method = message.get("method")
    if isinstance(method, str):
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        note_rpc(method, name if method == "tools/call" and isinstance(name, str) else None)
    return None


def _parse_error(body: bytes, problem: Problem) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": _request_id(body),
        "error": {
            "code": types.PARSE_ERROR,
            "message": f"the request is not strict JSON: {problem.message}",
            "data": {"code": problem.code, "pointer": problem.pointer},
        },
    }


def _request_id(body: bytes) -> str | int | None:
    """The id of a refused request, when the request states it once; else ``None``.

    JSON-RPC 2.0 answers ``"id": null`` when the id cannot be told. A request object
    with a key twice (two ids, or two methods or params beside one id) reads two
    ways, and answering either id would pick one reading: it gets ``null``. A
    duplicate deeper down (in the arguments) leaves the request itself unambiguous.
    """
    objects: list[list[tuple[str, object]]] = []

    def keep(pairs: list[tuple[str, object]]) -> dict[str, object]:
        objects.append(pairs)  # innermost first: the request object comes last
        return dict(pairs)

    try:
        request = json.loads(body, object_pairs_hook=keep)
    except (ValueError, RecursionError):
        return None
    if not isinstance(request, dict) or not objects:
        return None
    keys = [key for key, _ in objects[-1]]
    if len(keys) != len(set(keys)):
        return None
    found = request.get("id")
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


async def _respond(
    send: Send,
    status: int,
    body: Mapping[str, object],
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    content = dumps(body)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
    ]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": content})


# -- small helpers ------------------------------------------------------------------------


# One encoder for every call: json.dumps with options builds a new one each time.
_ARGUMENTS: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _argument_bytes(arguments: Mapping[str, Any] | None) -> bytes:
    """The arguments as the parse gate will see them (NaN stays NaN, and is refused there)."""
    return _ARGUMENTS.encode({} if arguments is None else arguments).encode()


def _progress_sink(
    ctx: ServerRequestContext[Any, Any] | None, meta: Mapping[str, object]
) -> ProgressSink | None:
    """Where an upstream's progress goes: the client's token, if it gave one."""
    token = progress_token(dict(meta))
    if ctx is None or token is None:
        return None
    # The id as it came, str or int: the transport routes the notification by it.
    session, request_id = ctx.session, cast("str | None", ctx.request_id)

    async def report(progress: float, total: float | None, message: str | None) -> None:
        await session.send_progress_notification(
            token, progress, total, message, related_request_id=request_id
        )

    return report


async def _as_task(
    server: GuardedServer,
    subject: Subject,
    params: types.CallToolRequestParams,
    ctx: ServerRequestContext[Any, Any],
) -> JSONObject | types.CallToolResult | None:
    """A ``CreateTaskResult`` when this call runs as a task; ``None`` to answer it now.

    Only a tool declaring ``task_support`` runs as one, for a client declaring the
    extension, and only once every gate admits it without a person: a call the
    gates refuse or park is answered now, as any other.
    """
    await server.catalog.refresh(listing=False)
    tools = server.catalog.visible(subject)
    tool = tools.lookup(params.name)
    support = "forbidden" if tool is None else tool.spec.task_support
    if support == "forbidden":
        return None
    if not declares_tasks(ctx, params.meta or {}):
        if support == "required":
            what = f"{params.name} runs only as a task: it"
            raise requires_tasks(what)
        return None
    task_id = server.tasks.new_id()
    proposal = Proposal(
        name=params.name, arguments=_argument_bytes(params.arguments), proposal_id=task_id
    )
    context = CallContext(
        subject=subject, tools=tools, timeout=server.timeout, result_budget=server.result_budget
    )
    preview = await server.runtime.off_loop(server.runtime.preview, proposal, context)
    if preview.problem is None and preview.decision == "confirm" and _asks_in_task(server, ctx):
        return await _confirmed_task(server, subject, proposal, context)
    if preview.problem is not None or preview.decision != "allow":
        return None

    async def work(_answers: Answers) -> JSONObject:
        result = await server.call_tool(subject, params, None, proposal_id=task_id)
        return _task_result(result)

    return server.tasks.start(subject, task_id, work)


def _asks_in_task(server: GuardedServer, ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether a person at this client confirms a task's call through the task."""
    return server.confirm == "elicitation" and _can_elicit(ctx)


async def _confirmed_task(
    server: GuardedServer, subject: Subject, proposal: Proposal, context: CallContext
) -> JSONObject | types.CallToolResult:
    """A call a person must confirm, as a task asking for the confirmation (input_required).

    The call is parked now, through every gate; the task's ``tasks/update`` brings
    the person's answer, which approves (the call runs), denies or cancels it. A call
    that did not park (it was settled meanwhile) is answered now.
    """
    outcome = await server.runtime.arun(proposal, context)
    parked = outcome.request if outcome.kind == "awaiting_confirmation" else None
    if parked is None:
        return server.result_of(outcome, context.tools)
    asking = {
        _CONFIRM_KEY: types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=_elicitation_message(parked), requested_schema=_CONFIRM_SCHEMA
            )
        )
    }

    async def work(answers: Answers) -> JSONObject:
        try:
            got = await answers()
        except asyncio.CancelledError:
            server.runtime.cancel_pending(parked.invocation_id)
            raise
        verdict = _verdict(types.ElicitResult.model_validate(got[_CONFIRM_KEY]))
        decided = await server.decide(parked, verdict, subject)
        if decided is None:  # settled elsewhere meanwhile: its result, or it in flight
            decided = await server.runtime.arun(proposal, context)
        return _task_result(server.result_of(decided, context.tools))

    return server.tasks.start(subject, proposal.proposal_id, work, asking=asking)


def _task_result(result: types.CallToolResult | types.InputRequiredResult) -> JSONObject:
    """A task's inlined result; a result that broke the tool's output contract fails it."""
    if not isinstance(result, types.CallToolResult):
        raise TaskFailed(types.INTERNAL_ERROR, "the task's call asked for input")
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    envelope = (result.meta or {}).get(ENVELOPE_META_KEY) if result.is_error else None
    error = envelope.get("error") if isinstance(envelope, dict) else None
    if isinstance(error, dict) and error.get("kind") == "output":
        # The tool's result broke its own contract: the server's failure, not the tool's.
        raise TaskFailed(types.INTERNAL_ERROR, str(error.get("message", "")), envelope)
    dumped["resultType"] = "complete"
    return cast("JSONObject", dumped)


def _legacy(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS


def _can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    if caps is None or caps.elicitation is None:
        return False
    # An empty elicitation capability means form mode (2025-06-18).
    return caps.elicitation.form is not None or caps.elicitation.url is None


def _verdict(result: types.ElicitResult) -> _Answer:
    if result.action == "accept":
        content = result.content or {}
        if content.get("approve") is True:
            return _Answer("approve")
        reason = content.get("reason")
        return _Answer("deny", reason[:1000] if isinstance(reason, str) else None)
    return _Answer("deny" if result.action == "decline" else "cancel")


def _elicitation_message(parked: ConfirmationRequest) -> str:
    arguments = json.dumps(parked.arguments, ensure_ascii=False, indent=2, sort_keys=True)
    return (
        f"Approve a call of {parked.tool}?\n\n"
        f"Arguments:\n{arguments}\n\n"
        f"Reason: {parked.reason}\n"
        f"Digest: {parked.digest}\n"
        "It runs once, exactly as shown."
    )


def _opened(
    states: StateSeal,
    state: str | None,
    *,
    subject: Subject,
    bound: str,
    meta: Mapping[str, object],
    responses: Mapping[str, Any] | None,
) -> Round:
    """A 2026-07-28 request's round; -32602 for a requestState the gateway did not seal."""
    declared = meta.get(CAPABILITIES_META_KEY)
    round_ = Round(
        capabilities=dict(declared) if isinstance(declared, dict) else None,
        responses=None
        if responses is None
        else {
            key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
            for key, value in responses.items()
        },
    )
    if state is not None and StateSeal.is_sealed(state):
        opened = states.open(state, subject=subject, tool=bound)
        if opened is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message="requestState was not issued by this gateway for this caller and request",
            )
        round_.state, round_.digest, round_.continues = opened.state, opened.digest, opened.call
    return round_


def _digest_of(outcome: Outcome) -> str | None:
    """The digest the trace recorded for this call, at VALIDATED (R14)."""
    for event in outcome.trace.events:
        if event.state is State.VALIDATED:
            return cast("str | None", event.data.get("digest"))
    return None


def _name(outcome: Outcome) -> str:
    return outcome.tool.partition("@")[0]


def _new_id() -> str:
    return "mcp-" + os.urandom(8).hex()


def _package_version() -> str:
    """The installed toolbound version, for ``serverInfo``; ``"0"`` when not installed."""
    try:
        return importlib.metadata.version("toolbound")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree only
        return "0"
