"""Upstream resources and prompts, served by the gateway under the same guard as tools (R6, R18).

Each upstream's resources and prompts are offered downstream only to callers that
hold its capability (``[[upstream]].resources_capability``, default
``<upstream>:resources``; ``prompts_capability``, default ``<upstream>:prompts``);
a caller without it sees none, and a read or get of one is refused as unknown::

    resources/list, resources/templates/list   the upstreams the caller holds
                                               resources for; names as tools are
                                               (``<prefix>.<name>``), URIs unchanged
    resources/read                             a read through the runtime: authorized
                                               (``Resource(kind="resource", id=URI)``,
                                               so a grant's scope applies), traced and
                                               counted like a tool read; contents
                                               marked untrusted and bounded
    resources/subscribe, resources/unsubscribe a URI the caller may read, of an upstream
                                               that offers subscriptions; a subscription
                                               runs through the runtime like a read
                                               (``resources.subscribe.<upstream>``). The
                                               upstream is subscribed while any client is;
                                               its
                                               notifications/resources/updated reach the
                                               subscribed clients (:mod:`.passage`)
    prompts/list, prompts/get                  names as tools are; forwarded
    completion/complete                        for a prompt or template the caller
                                               may use; forwarded

A URI is routed to the upstream that listed it, or whose template matches it (the
first in configuration order when two do).
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Final, TypeVar, cast

from toolbound._model import Resource, ToolSpec
from toolbound.library import READ_TOOL_PREFIX
from toolbound.mcp.content import mark_block
from toolbound.mcp.passage import Downstream
from toolbound.mcp.reads import RESOURCE_NOT_FOUND, not_found, read_through, run_on
from toolbound.mcp.rounds import missing_capabilities, refused_requests
from toolbound.registry import Registry

try:
    import mcp_types as types
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from toolbound._model import JSONObject, JSONValue, Subject
    from toolbound.execution.tool import ToolContext
    from toolbound.mcp.rounds import Round
    from toolbound.mcp.upstream import Upstream
    from toolbound.pipeline.runtime import Runtime

__all__ = ["READ_TOOL_PREFIX", "RESOURCE_NOT_FOUND", "SUBSCRIBE_TOOL_PREFIX", "Federation"]

SUBSCRIBE_TOOL_PREFIX: Final = "resources.subscribe."
"""A subscription runs as the read tool ``resources.subscribe.<upstream>`` (trace, metrics)."""

_LOG = logging.getLogger("toolbound.mcp")
_T = TypeVar("_T")
_Named = TypeVar("_Named", types.Resource, types.ResourceTemplate, types.Prompt)
_URI_SCHEMA: Final = {
    "type": "object",
    "properties": {"uri": {"type": "string", "minLength": 1}},
    "required": ["uri"],
    "additionalProperties": False,
}


class Federation:
    """The resources and prompts of ``upstreams``, for the callers ``holds`` allows.

    ``holds(subject, capability)`` says whether a subject holds a grant for a
    capability; ``runtime`` runs every resource read (R6, R14).
    """

    def __init__(
        self,
        upstreams: Sequence[Upstream],
        *,
        runtime: Runtime,
        holds: Callable[[Subject, str], bool],
        downstream: Downstream | None = None,
    ) -> None:
        self._upstreams = list(upstreams)
        self._downstream = downstream if downstream is not None else Downstream()
        self._runtime = runtime
        self._holds = holds
        self._uris: dict[str, Upstream] = {}
        self._templates: list[tuple[re.Pattern[str], Upstream]] = []
        self._prompts: dict[str, tuple[Upstream, str]] = {}
        registry = Registry()
        self._readers = {u.name: registry.register(*_reader(u)) for u in self._upstreams}
        self.subscribable = False
        """Whether some upstream offered subscriptions when :meth:`offer_subscriptions` asked."""
        self._subscribers = {
            u.name: registry.register(*_subscriber(u, self._downstream)) for u in self._upstreams
        }

    # -- resources ---------------------------------------------------------------------

    async def list_resources(self, subject: Subject) -> list[types.Resource]:
        """The resources of every upstream whose resources ``subject`` may read."""
        found: list[types.Resource] = []
        for upstream in self._mine(subject, "resources"):
            for resource in await _or_none(upstream, upstream.list_resources()):
                self._uris.setdefault(str(resource.uri), upstream)
                found.append(_renamed(resource, upstream))
        return found

    async def list_resource_templates(self, subject: Subject) -> list[types.ResourceTemplate]:
        """The resource templates of every upstream whose resources ``subject`` may read."""
        found: list[types.ResourceTemplate] = []
        for upstream in self._mine(subject, "resources"):
            found.extend(_renamed(t, upstream) for t in await self._templates_of(upstream))
        return found

    async def read_resource(self, subject: Subject, uri: str) -> types.ReadResourceResult:
        """``resources/read`` through the runtime, as a read of the owning upstream."""
        upstream = await self._owner(uri, subject)
        if upstream is None:
            raise not_found(uri)
        return await read_through(
            self._runtime,
            subject,
            self._readers[upstream.name],
            uri,
            limit=upstream.config.max_content_bytes,
            source=f"upstream {upstream.name}",
        )

    async def offer_subscriptions(self) -> bool:
        """Ask the upstreams: subscriptions are served if one of them offers them."""
        offered = False
        for upstream in self._upstreams:
            try:
                offered |= await upstream.subscribes()
            except Exception as exc:  # noqa: BLE001 - an unreachable upstream offers nothing
                _LOG.info("upstream %s: no capabilities (%r)", upstream.name, exc)
        self.subscribable = offered
        return offered

    async def subscribe(self, subject: Subject, uri: str, connection: object) -> None:
        """``resources/subscribe`` through the runtime, as a read of the owning upstream.

        The upstream itself is subscribed for the URI's first client (the read tool
        ``resources.subscribe.<upstream>`` does it).
        """
        upstream = await self._owner(uri, subject)
        if upstream is None:
            raise not_found(uri)
        if not await upstream.subscribes():
            raise MCPError(
                code=types.METHOD_NOT_FOUND,
                message=f"upstream {upstream.name} does not offer resource subscriptions",
            )
        await run_on(self._runtime, subject, self._subscribers[upstream.name], uri)
        self._downstream.subscribe(uri, connection)

    async def unsubscribe(self, subject: Subject, uri: str, connection: object) -> None:
        """``resources/unsubscribe``: the upstream is unsubscribed when no client is left."""
        upstream = await self._owner(uri, subject)
        if upstream is None:
            raise not_found(uri)
        if self._downstream.unsubscribe(uri, connection) and await upstream.subscribes():
            await upstream.subscribe(uri, subscribe=False)

    # -- prompts -------------------------------------------------------------------------

    async def list_prompts(self, subject: Subject) -> list[types.Prompt]:
        """The prompts of every upstream whose prompts ``subject`` may get."""
        found: list[types.Prompt] = []
        for upstream in self._mine(subject, "prompts"):
            for prompt in await _or_none(upstream, upstream.list_prompts()):
                served = upstream.config.served_name(prompt.name)
                self._prompts.setdefault(served, (upstream, prompt.name))
                found.append(prompt.model_copy(update={"name": served}))
        return found

    async def get_prompt(
        self, subject: Subject, name: str, arguments: dict[str, str]
    ) -> types.GetPromptResult:
        """``prompts/get`` forwarded to the upstream serving ``name``; blocks marked untrusted."""
        upstream, own = await self._prompt(subject, name)
        result = await upstream.get_prompt(own, arguments)
        messages = [
            m.model_copy(update={"content": mark_block(m.content)}) for m in result.messages
        ]
        return result.model_copy(update={"messages": messages})

    async def get_prompt_round(
        self, subject: Subject, name: str, arguments: dict[str, str], round_: Round
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """``prompts/get`` from a 2026-07-28 caller (:mod:`toolbound.mcp.rounds`).

        To an upstream configured ``relay_input_requests``, over its 2026-07-28
        connection: its ``InputRequiredResult`` comes back as it came (the server
        seals its state), or a JSON-RPC error when it asks for what may not pass.
        """
        upstream, own = await self._prompt(subject, name)
        if not upstream.config.relay_input_requests:
            return await self.get_prompt(subject, name, arguments)
        raw = await upstream.get_prompt_round(own, arguments, round_)
        if raw.get("resultType") != "input_required":
            result = types.GetPromptResult.model_validate(raw)
            messages = [
                m.model_copy(update={"content": mark_block(m.content)}) for m in result.messages
            ]
            return result.model_copy(update={"messages": messages})
        requests = raw.get("inputRequests") or {}
        config = upstream.config
        allow = {
            "allow_elicitation": config.allow_elicitation,
            "allow_sampling": config.allow_sampling,
        }
        why = refused_requests(requests, allow=allow)
        if why is not None:
            raise MCPError(code=types.INVALID_REQUEST, message=f"upstream {config.name}: {why}")
        missing = missing_capabilities(requests, round_.capabilities)
        if missing:
            raise MCPError(
                code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=f"{name} needs client capabilities this request did not declare: "
                + ", ".join(sorted(missing)),
                data={"requiredCapabilities": missing},
            )
        return types.InputRequiredResult.model_validate(raw)

    async def complete(
        self, subject: Subject, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        """``completion/complete`` for a prompt or template ``subject`` may use."""
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            upstream, own = await self._prompt(subject, ref.name)
            forwarded = params.model_copy(update={"ref": ref.model_copy(update={"name": own})})
            return await upstream.complete(forwarded)
        owner = await self._owner(ref.uri, subject)
        if owner is None:
            return types.CompleteResult(completion=types.Completion(values=[]))
        return await owner.complete(params)

    # -- routing ---------------------------------------------------------------------------

    def _mine(self, subject: Subject, feature: str) -> list[Upstream]:
        def grant(u: Upstream) -> str:
            return u.config.resources_grant if feature == "resources" else u.config.prompts_grant

        return [u for u in self._upstreams if self._holds(subject, grant(u))]

    async def _templates_of(self, upstream: Upstream) -> list[types.ResourceTemplate]:
        templates = await _or_none(upstream, upstream.list_resource_templates())
        self._templates = [(p, u) for p, u in self._templates if u is not upstream]
        self._templates.extend((_pattern(t.uri_template), upstream) for t in templates)
        return templates

    async def _owner(self, uri: str, subject: Subject) -> Upstream | None:
        """The upstream serving ``uri``, if ``subject`` may read its resources."""
        mine = self._mine(subject, "resources")
        for attempt in range(2):
            for upstream in mine:
                if self._uris.get(uri) is upstream:
                    return upstream
            for pattern, upstream in self._templates:
                if upstream in mine and pattern.fullmatch(uri):
                    return upstream
            if attempt == 0:
                # Not seen yet: list again (a client may read without listing first).
                for upstream in mine:
                    for resource in await _or_none(upstream, upstream.list_resources()):
                        self._uris.setdefault(str(resource.uri), upstream)
                    await self._templates_of(upstream)
        return None

    async def _prompt(self, subject: Subject, name: str) -> tuple[Upstream, str]:
        if name not in self._prompts:
            await self.list_prompts(subject)
        found = self._prompts.get(name)
        if found is None or found[0] not in self._mine(subject, "prompts"):
            # Hidden is the same as absent, as for tools.
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")
        return found


# -- pure helpers -------------------------------------------------------------------------


def _reader(
    upstream: Upstream,
) -> tuple[ToolSpec, Callable[[JSONObject, ToolContext], Awaitable[JSONValue]]]:
    """The read tool of one upstream's resources: a read, scoped by the URI."""
    cfg = upstream.config

    def resources(arguments: JSONObject) -> list[Resource]:
        return [Resource(kind="resource", id=str(arguments.get("uri", "")), action="read")]

    async def read(arguments: JSONObject, ctx: ToolContext) -> JSONValue:
        result = await upstream.read_resource(str(arguments["uri"]), timeout=ctx.deadline_in)
        return [
            cast("JSONValue", c.model_dump(by_alias=True, mode="json", exclude_none=True))
            for c in result.contents
        ]

    spec = ToolSpec(
        name=f"{READ_TOOL_PREFIX}{cfg.name}",
        version="1",
        description=f"Read one resource of upstream {cfg.name}.",
        input_schema=_URI_SCHEMA,
        effect="read",
        capabilities=(cfg.resources_grant,),
        resources=resources,
        timeout=cfg.timeout,
        max_attempts=2,
        # The contents go back as MCP resource contents, bounded by max_content_bytes.
        result_budget=max(cfg.max_content_bytes * 2, 16_384),
    )
    return spec, read


def _subscriber(
    upstream: Upstream, downstream: Downstream
) -> tuple[ToolSpec, Callable[[JSONObject, ToolContext], Awaitable[JSONValue]]]:
    """The subscribe tool of one upstream's resources: a read, scoped by the URI."""
    reader, _ = _reader(upstream)

    async def subscribe(arguments: JSONObject, ctx: ToolContext) -> JSONValue:
        del ctx
        uri = str(arguments["uri"])
        if downstream.subscribers(uri):
            return "already subscribed upstream"
        await upstream.subscribe(uri)
        return "subscribed upstream"

    spec = replace(
        reader,
        name=f"{SUBSCRIBE_TOOL_PREFIX}{upstream.name}",
        description=f"Subscribe to one resource of upstream {upstream.name}.",
        max_attempts=1,
        result_budget=1024,
    )
    return spec, subscribe


def _renamed(item: _Named, upstream: Upstream) -> _Named:
    return item.model_copy(update={"name": upstream.config.served_name(item.name)})


def _pattern(template: str) -> re.Pattern[str]:
    """An RFC 6570 level-1 template as a pattern: each ``{var}`` one path segment or more."""
    parts = re.split(r"(\{[^}]*\})", template)
    return re.compile(
        "".join("[^/]+" if p.startswith("{") and p.endswith("}") else re.escape(p) for p in parts)
    )


async def _or_none(upstream: Upstream, listing: Awaitable[list[_T]]) -> list[_T]:
    """A listing, or nothing when the upstream does not offer it or cannot be reached."""
    try:
        return await listing
    except (MCPError, ValidationError, OSError) as exc:
        _LOG.info("upstream %s: no listing (%r)", upstream.name, exc)
        return []
