"""The MCP gateway: upstream MCP servers, every call through the whole pipeline (R18).

:class:`Gateway` connects to the upstreams its configuration names (stdio commands
and streamable HTTP URLs), imports their tools as tool specs (:class:`~toolbound.ToolSpec`) and
serves them downstream as ``<prefix>.<tool>`` (or under their own names, with
``prefix = ""``; two upstreams serving one name is refused at start) through a
:class:`~toolbound.mcp.server.GuardedServer`. Between a downstream caller and an
upstream there is: strict parsing, schema validation that fails closed (a tool whose
schema is missing or does not compile is not served), authorization of the caller's
own subject (bearer token → principal in the configuration), confirmation, the
idempotency ledger for writes, retries only as R10's matrix allows, output
validation (never of an ``isError`` result, whose text reaches the caller whole),
result encoding and the trace. Image, audio and resource blocks in an upstream's
results pass through as blocks, bounded and marked untrusted
(:mod:`toolbound.mcp.content`); its progress reaches the client and a client's
cancellation reaches it (:mod:`toolbound.mcp.relay`); its log messages reach the
client whose call it serves, and its sampling and elicitation requests too where
``allow_sampling`` / ``allow_elicitation`` say so (:mod:`toolbound.mcp.passage`) —
on a 2026-07-28 connection as ``InputRequiredResult`` rounds, for an upstream
configured ``relay_input_requests`` (:mod:`toolbound.mcp.rounds`).
Its resources, templates and prompts are served to callers holding its
``resources_capability`` or ``prompts_capability``, each resource read a read through
the runtime, and resource subscriptions are relayed to it
(:mod:`toolbound.mcp.federation`).

An upstream is untrusted (:mod:`toolbound.mcp.upstream`): its annotations are hints
no decision reads; each tool's effect class comes from the configuration and is
``irreversible_write`` when unset. A tool's version is the digest of its definition,
and a tool is served only while that digest is the approved one
(:mod:`toolbound.approvals`); a changed definition is quarantined — neither
listed nor callable — until a person approves it (:meth:`Gateway.approve_tool`,
``toolbound mcp-gateway --config FILE approve-tool NAME --digest D``).

Mounting it in a service: the gateway holds its :class:`~toolbound.Runtime`
(:attr:`Gateway.runtime`), so a console in the same process sees and decides the
calls it parks; approvers elsewhere decide them over HTTP through
:attr:`Gateway.confirmations` (``GET /confirmations``, ``POST
/confirmations/{invocation_id}``, served beside the MCP endpoint)::

    gateway = Gateway(load_gateway_config("toolbound.toml"))
    http = gateway.http()                      # authenticates with the [[principal]]s
    app = Starlette(routes=[Mount("/mcp", app=http), *http.routes], lifespan=...)
    # in the lifespan:  async with gateway.running(), http.running(): yield
    # in the console:   await gateway.runtime.aapprove(invocation_id, digest=d, approver=p)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from toolbound._clock import Clock, SystemClock
from toolbound._errors import ConfigurationError, ToolboundError
from toolbound._model import Resource, Subject, ToolSpec
from toolbound.access_log import note_principal
from toolbound.adapters.http import ApiError, problem_response
from toolbound.approvals import ApprovalStore, ToolVersionMismatch
from toolbound.identity import TokenRefused
from toolbound.mcp.confirmations import ConfirmationEndpoint
from toolbound.mcp.federation import Federation
from toolbound.mcp.passage import Downstream, Passage
from toolbound.mcp.review import held, shown_definition
from toolbound.mcp.server import (
    GuardedServer,
    HttpEndpoint,
    holds_capabilities,
    holds_capability,
)
from toolbound.mcp.telemetry import instrument
from toolbound.mcp.tokens import off_loop_if_fetching
from toolbound.mcp.upstream import (
    Upstream,
    UpstreamTool,
    close_schema,
    definition_of,
    digest_or_none,
)
from toolbound.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from toolbound.metrics import CallMetrics
from toolbound.pipeline.runtime import Runtime
from toolbound.registry import RegisteredTool, Registry, ToolSet
from toolbound.wiring import journal_recorder, ledger_for, policy_for, telemetry_sinks

try:
    import anyio
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from typing import TextIO

    import mcp_types as types
    from starlette.requests import Request

    from toolbound._model import JSONObject, JSONValue, ResourceExtractor
    from toolbound.ledger.store import Ledger
    from toolbound.mcp.config import GatewayConfig, ResourceRule
    from toolbound.recording import JournalRecorder
    from toolbound.trace import TraceSink

__all__ = ["Gateway", "ToolState", "ToolStatus", "ToolVersionMismatch"]

_LOG = logging.getLogger("toolbound.mcp")

ToolState = Literal["served", "quarantined", "broken", "hidden"]
"""Where one upstream tool stands: served, waiting for a person's approval of its
current definition, refused for a definition that cannot be enforced, or hidden by
the configuration."""

_FIRST_SIGHT = "trust on first use"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStatus:
    """One upstream tool as the gateway sees it now."""

    name: str
    """The name served downstream: ``<prefix>.<tool>``, or ``<tool>`` with ``prefix = ""``."""
    upstream: str
    tool: str
    state: ToolState
    digest: str | None
    approved_digest: str | None = None
    reason: str = ""
    definition: JSONObject = field(default_factory=dict, hash=False, repr=False)


class Gateway:
    """Guards the upstreams of a :class:`~toolbound.mcp.config.GatewayConfig`.

    ``runtime`` defaults to one built from the configuration: its grants, its store
    (``ledger`` overrides it) and its ``[telemetry]`` (``sinks`` overrides them). Pass
    one to share a runtime with a service. ``errlog`` receives the stderr of stdio
    upstreams.
    """

    def __init__(
        self,
        config: GatewayConfig,
        *,
        runtime: Runtime | None = None,
        ledger: Ledger | None = None,
        clock: Clock | None = None,
        sinks: Sequence[TraceSink] | None = None,
        errlog: TextIO | None = None,
    ) -> None:
        self.config = config
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._owns_runtime = runtime is None
        self.metrics = CallMetrics()
        """Calls, quarantined tools and upstream health, for ``/metrics`` (:meth:`http`)."""
        self.recorder: JournalRecorder | None = None
        """Keeps every call in the journal of a durable ``[store]`` (a runtime it builds)."""
        if runtime is None:
            if config.service.store_url != "memory":  # a journal nobody else could read
                self.recorder = journal_recorder(config.service, "mcp-gateway")
            runtime = Runtime(
                policy=policy_for(config.service, self.clock),
                ledger=ledger if ledger is not None else ledger_for(config.service.store_url),
                clock=self.clock,
                sinks=(
                    *(telemetry_sinks(config.service) if sinks is None else sinks),
                    self.metrics,
                    *(() if self.recorder is None else (self.recorder,)),
                ),
                io_threads=config.service.io_threads,
                confirmation_ttl=config.service.confirmation_ttl,
            )
        self.runtime = runtime
        self.approvals = ApprovalStore(config.approvals_path)
        self.downstream = Downstream(refresh_tools=lambda: self.refresh(listing=True))
        """The clients, for what upstreams send besides answers (:mod:`~toolbound.mcp.passage`)."""
        self.upstreams = {
            u.name: Upstream(u, errlog=errlog, passage=Passage(u, self.downstream))
            for u in config.upstreams
        }
        self.federation = Federation(
            list(self.upstreams.values()),
            runtime=self.runtime,
            holds=holds_capability(config.grant_holders()),
            downstream=self.downstream,
        )
        """The upstreams' resources and prompts (:mod:`~toolbound.mcp.federation`)."""
        self.registry = Registry()
        instrument(self.runtime, self.registry, self.upstreams.values())  # R14
        self._served: dict[str, RegisteredTool] = {}
        self._status: dict[str, ToolStatus] = {}
        self._refreshed: dict[str, float] = {}
        self._fresh_until = 0.0  # until then no upstream's tools are stale
        self.unreachable: set[str] = set()
        """Upstreams whose last listing failed (their tools stay as they were)."""
        self._generation = 0
        self._views: dict[Subject, tuple[int, ToolSet]] = {}
        self._lock: asyncio.Lock | None = None
        self._can_see = holds_capabilities(config.grant_holders())
        self.server = GuardedServer(
            runtime=self.runtime,
            catalog=self,
            name=config.gateway.name,
            confirm=("console" if config.service.four_eyes else config.gateway.confirm),
            timeout=config.service.timeout,
            result_budget=config.service.result_budget,
            content=self._content_rule,
            federation=self.federation,
        )
        self.confirmations = ConfirmationEndpoint.for_service(self.runtime, config.service)
        """The parked calls as approvers see and decide them (served by :meth:`http`)."""
        self._gauges()

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """Connect every upstream (one that fails is retried at the next refresh) and import."""
        self._lock = asyncio.Lock()
        results = await asyncio.gather(
            *(u.start() for u in self.upstreams.values()), return_exceptions=True
        )
        for upstream, result in zip(self.upstreams.values(), results, strict=True):
            if isinstance(result, BaseException):
                _LOG.warning("upstream %s: not reachable (%r)", upstream.name, result)
        await self.refresh(listing=True)
        await self.federation.offer_subscriptions()
        try:
            self._check_names()
        except ConfigurationError:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close every upstream connection."""
        await asyncio.gather(*(u.stop() for u in self.upstreams.values()))

    def close(self) -> None:
        """Release the runtime and ledger the gateway built (not one it was given)."""
        if self._owns_runtime:
            self.runtime.close()
            self.runtime.ledger.close()
        if self.recorder is not None:
            self.recorder.close()
            self.recorder.journal.close()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Started inside; stopped and closed after (a gateway runs once).

        Closing writes the journal's last rows and closes the stores: a thread of its
        own does it, while the loop waits without blocking.
        """
        await self.start()
        try:
            yield self
        finally:
            await self.stop()
            await anyio.to_thread.run_sync(self.close)

    def http(
        self, *, allowed_hosts: list[str] | None = None, local: Subject | None = None
    ) -> HttpEndpoint:
        """The gateway over streamable HTTP, callers authenticated by their bearer tokens.

        Its :attr:`~HttpEndpoint.routes` are the confirmation endpoints
        (:attr:`confirmations`), for the approvers among those callers, and the
        ``[gateway.protected_resource]`` metadata when configured. ``local``: local
        mode (see :class:`HttpEndpoint`).
        """
        return HttpEndpoint(
            self.server,
            self.config.subject_for,
            allowed_hosts=allowed_hosts,
            routes=[
                *self.confirmations.routes(),
                Route("/metrics", self._metrics, methods=["GET"]),
            ],
            local=local,
            protected_resource=self.config.gateway.protected_resource,
        )

    def _gauges(self) -> None:
        self.metrics.count_pending(self.runtime.desk)
        self.metrics.gauge(
            "quarantined_tools",
            "Upstream tools whose new definition waits for a person's approval.",
            lambda: sum(s.state == "quarantined" for s in self._status.values()),
        )
        self.metrics.gauge(
            "upstream_up",
            "1 when the upstream's last listing answered, else 0.",
            lambda: {(name,): float(name not in self.unreachable) for name in self.upstreams},
            ("upstream",),
        )

    async def _metrics(self, request: Request) -> Response:
        """``GET /metrics`` for an operator's bearer token (Prometheus' text format)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            error = ApiError(401, "unauthenticated", "send an operator's token: Bearer TOKEN")
            return problem_response(error)
        try:
            principal = await off_loop_if_fetching(
                self.runtime, self.config.service.authenticate, token.strip()
            )
        except TokenRefused as refused:
            return problem_response(ApiError(refused.status, refused.code, str(refused)))
        note_principal(principal)  # the access log names who called
        if "operator" not in principal.roles:
            return problem_response(
                ApiError(403, "forbidden", f"{principal.name} lacks the operator role")
            )
        return Response(self.metrics.exposition(), media_type=METRICS_CONTENT_TYPE)

    async def run_stdio(self) -> None:
        """Serve one client on stdin/stdout as ``[gateway].stdio_principal``."""
        principal = self.config.stdio_principal()
        if principal is None:
            msg = "serving over stdio needs [gateway].stdio_principal naming a [[principal]]"
            raise ToolboundError(msg, code="no_stdio_principal")
        async with self.running():
            await self.server.run_stdio(Subject(id=principal.subject, tenant=principal.tenant))

    # -- the catalog ----------------------------------------------------------------------

    async def refresh(self, *, listing: bool = True) -> None:
        """Re-import the upstreams' tools: always for a listing, else those gone stale."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        now = time.monotonic()
        if not listing and now <= self._fresh_until:
            return  # every upstream was listed within its refresh_seconds
        due = [
            u
            for u in self.upstreams.values()
            if listing or now - self._refreshed.get(u.name, 0.0) > u.config.refresh_seconds
        ]
        if not due:
            return
        async with self._lock:
            listings = await asyncio.gather(
                *(self._listing(u) for u in due), return_exceptions=False
            )
            changed = False
            for upstream, tools in zip(due, listings, strict=True):
                if tools is None:
                    self.unreachable.add(upstream.name)
                else:
                    self.unreachable.discard(upstream.name)
                    changed |= self._import(upstream, tools)
                    self._refreshed[upstream.name] = time.monotonic()
                    upstream.compared()  # R18: its calls may go out again
            self._fresh_until = min(
                (
                    self._refreshed.get(u.name, 0.0) + u.config.refresh_seconds
                    for u in self.upstreams.values()
                ),
                default=0.0,
            )
            if changed:
                self._generation += 1

    def visible(self, subject: Subject) -> ToolSet:
        """The served tools ``subject`` holds the capabilities for (list and call agree)."""
        seen = self._views.get(subject)
        if seen is not None and seen[0] == self._generation:
            return seen[1]
        view = ToolSet(t for t in self._served.values() if self._can_see(subject, t.spec))
        self._views[subject] = (self._generation, view)
        return view

    def _content_rule(self, name: str) -> tuple[str, int] | None:
        """Every upstream tool's content blocks pass through, up to its upstream's limit."""
        status = self._status.get(name)
        if status is None:
            return None
        cfg = self.upstreams[status.upstream].config
        return cfg.name, cfg.max_content_bytes

    def status(self) -> list[ToolStatus]:
        """Every upstream tool the gateway knows, with its state; by served name."""
        return [self._status[name] for name in sorted(self._status)]

    async def approve_tool(self, name: str, *, digest: str, approver: str) -> ToolStatus:
        """A person approves the current definition of ``name``, shown to them by ``digest``.

        Raises :class:`ToolVersionMismatch` when the upstream's current definition has
        another digest (it changed again since the person looked): nothing is approved.
        """
        await self.refresh(listing=True)
        status = self._status.get(name)
        if status is None:
            msg = f"no upstream tool is served as {name!r}"
            raise ToolVersionMismatch(msg, code="unknown_tool")
        if status.digest != digest:
            msg = f"{name}'s current definition is {status.digest}, not {digest}"
            raise ToolVersionMismatch(msg)
        self.approvals.approve(name, digest=digest, approver=approver, definition=status.definition)
        await self.refresh(listing=True)
        return self._status[name]

    # -- importing ---------------------------------------------------------------------------

    async def _listing(self, upstream: Upstream) -> list[types.Tool] | None:
        try:
            return await upstream.list_tools()
        except Exception as exc:  # noqa: BLE001 - an unreachable upstream keeps what it had
            _LOG.warning("upstream %s: cannot list tools (%r)", upstream.name, exc)
            return None

    def _import(self, upstream: Upstream, tools: list[types.Tool]) -> bool:
        """Bring one upstream's served tools in line with its listing; whether any changed."""
        cfg = upstream.config
        mine = [n for n, s in self._status.items() if s.upstream == cfg.name]
        before = {n: self._served[n].spec.key for n in mine if n in self._served}
        for name in mine:
            del self._status[name]
            self._served.pop(name, None)
        for tool in tools:
            status, registered = self._admit(upstream, tool)
            if status.name in self._status:
                # Kept names (prefix = "") can meet: the name stays with the upstream
                # that had it; at start this is refused (see _check_names).
                status = replace(status, state="broken", reason=self._collision(status))
                registered = None
                self._status[f"{status.name} ({cfg.name})"] = status
            else:
                self._status[status.name] = status
            if registered is not None:
                self._served[status.name] = registered
            elif status.state != "hidden":
                _LOG.warning("%s is not served: %s (%s)", status.name, status.state, status.reason)
        waiting = [
            (s.name, s.digest, s.reason, s.definition)
            for s in self._status.values()
            if s.upstream == cfg.name and s.state == "quarantined" and s.digest is not None
        ]
        self.approvals.hold(cfg.name, held(cfg.name, waiting, now=self.clock.now()))
        after = {n: t.spec.key for n, t in self._served.items() if self._owner(n) == cfg.name}
        return before != after

    def _serves(self, name: str, version: str) -> bool:
        """Whether ``name`` is served now at ``version`` (not quarantined, not gone)."""
        found = self._served.get(name)
        return found is not None and found.spec.version == version

    def _owner(self, name: str) -> str | None:
        status = self._status.get(name)
        return None if status is None else status.upstream

    def _collision(self, status: ToolStatus) -> str:
        return (
            f"upstreams {self._owner(status.name)} and {status.upstream} both serve "
            f"{status.name!r}; give one of them a prefix, e.g. prefix = "
            f'"{status.upstream}" under its [[upstream]]'
        )

    def _check_names(self) -> None:
        """At start: two upstreams serving one name is a configuration error, not a race."""
        # A tool that found its name taken is filed under another key (see _import).
        clashes = [s.reason for key, s in self._status.items() if key != s.name]
        if clashes:
            msg = "tool names collide: " + "; ".join(sorted(clashes))
            raise ConfigurationError(msg, code="tool_name_collision")

    def _admit(
        self, upstream: Upstream, tool: types.Tool
    ) -> tuple[ToolStatus, RegisteredTool | None]:
        cfg = upstream.config
        name = cfg.served_name(tool.name)
        found = digest_or_none(definition_of(tool))
        definition = shown_definition(tool)  # what a person reviews (R18)

        def status(state: ToolState, reason: str = "") -> ToolStatus:
            approval = self.approvals.get(name)
            return ToolStatus(
                name=name,
                upstream=cfg.name,
                tool=tool.name,
                state=state,
                digest=found,
                approved_digest=None if approval is None else approval.digest,
                reason=reason,
                definition=definition,
            )

        rule = cfg.rule(tool.name)
        if rule.hidden:
            return status("hidden", "hidden by the configuration"), None
        if found is None:
            return status("broken", "the definition has no canonical JSON form"), None
        try:
            registered = self._register(upstream, tool, name, found)
        except ToolboundError as exc:
            # R4: a schema that is missing or does not compile fails closed.
            return status("broken", str(exc)), None
        approval = self.approvals.get(name)
        if approval is None and cfg.new_tools == "trust":
            approval = self.approvals.approve(
                name, digest=found, approver=_FIRST_SIGHT, definition=definition
            )
        if approval is None:
            return status("quarantined", "a new tool: a person has not approved it yet"), None
        if approval.digest != found:
            return status(
                "quarantined",
                f"its definition changed since {approval.approved_by} approved "
                f"{approval.digest}; a person must approve the new one",
            ), None
        return status("served"), registered

    def _register(
        self, upstream: Upstream, tool: types.Tool, name: str, found: str
    ) -> RegisteredTool:
        cfg = upstream.config
        version = found.removeprefix("sha256:")[:16]
        existing = self.registry.get(name, version)
        if existing is not None:
            return existing
        rule = cfg.rule(tool.name)
        inputs: dict[str, object] = dict(tool.input_schema)
        outputs = None if tool.output_schema is None else dict(tool.output_schema)
        if cfg.strict_schemas:
            inputs = close_schema(inputs)
            outputs = None if outputs is None else close_schema(outputs)
        read = rule.effect in {"pure", "read"}
        spec = ToolSpec(
            name=name,
            version=version,
            description=(tool.description or "").strip() or f"{tool.name}, from {cfg.name}",
            input_schema=inputs,
            output_schema=outputs,
            effect=rule.effect,
            capabilities=(cfg.capability(tool.name),),
            resources=None if rule.resource is None else _extractor(rule.resource),
            timeout=rule.timeout or cfg.timeout,
            # Reads may be re-read; a write is repeated only with a key the upstream honours.
            max_attempts=rule.max_attempts
            or (2 if read or rule.idempotency == "native_key" else 1),
            idempotency=rule.idempotency,
            task_support=rule.task_support,
        )
        implementation = UpstreamTool(
            upstream,
            tool.name,
            write=spec.is_write,
            structured=outputs is not None,
            native_key=rule.idempotency == "native_key",
            attempt_timeout=cfg.attempt_timeout,
            served=lambda: self._serves(name, version),
        )
        return self.registry.register(spec, implementation)


def _extractor(rule: ResourceRule) -> ResourceExtractor:
    """The resource a call touches: the argument at ``rule.pointer`` (none if absent)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in rule.pointer.split("/")[1:]]

    def extract(arguments: JSONObject) -> list[Resource]:
        value: JSONValue = arguments
        for part in parts:
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return []  # nothing to show a scope: a scoped grant then denies
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return []
        return [Resource(kind=rule.kind, id=str(value), action=rule.action)]

    return extract
