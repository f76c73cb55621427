"""A pack's own resources and prompts, served by ``mcp-serve`` under the same guard as its tools.

The :class:`~toolbound.registry.Library` of the served registry
(:mod:`toolbound.library`) is offered to each caller that holds every capability
declared for an item; to any other caller the item does not exist::

    resources/list, resources/templates/list   what the caller may read
    resources/read                             a read through the runtime
                                               (:func:`~toolbound.mcp.reads.read_through`):
                                               authorized, traced, contents bounded
                                               and marked untrusted
    resources/subscribe, /unsubscribe          for a resource the caller may read;
      (2026-07-28: subscriptions/listen)       Library.changed(uri) sends each
                                               subscriber notifications/resources/updated
                                               (a listen stream honours only the URIs
                                               the caller may read)
    prompts/list, prompts/get                  rendered by the pack's function, with
                                               its required arguments checked; image,
                                               audio and resource blocks marked untrusted
    completion/complete                        the values the pack's completer gives
                                               for an argument of a prompt or template
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from toolbound.library import PromptSpec, TemplateSpec, messages, reader
from toolbound.mcp.content import mark_block
from toolbound.mcp.reads import not_found, read_through
from toolbound.mcp.relay import connection_of
from toolbound.registry import Registry
from toolbound.results.content import Text, block_json

try:
    import mcp_types as types
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
    from mcp.shared.exceptions import MCPError
    from pydantic import TypeAdapter
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from toolbound._model import Subject
    from toolbound.library import Message, ResourceSpec
    from toolbound.pipeline.runtime import Runtime
    from toolbound.registry import Library, RegisteredTool

__all__ = ["LocalResources", "Subscribable", "subscription_handlers"]

MAX_COMPLETIONS: Final = 100
"""MCP caps one completion answer at 100 values."""

_BLOCK: Final = TypeAdapter(types.ContentBlock)
_LOG = logging.getLogger("toolbound.mcp")


@runtime_checkable
class Subscribable(Protocol):
    """Resources a client may subscribe to (``resources/subscribe``)."""

    async def subscribe(self, subject: Subject, uri: str, session: ServerSession) -> None:
        """Tell ``session`` when ``uri`` changes, if ``subject`` may read it."""
        ...

    async def unsubscribe(self, subject: Subject, uri: str, session: ServerSession) -> None:
        """Stop telling ``session`` about ``uri``."""
        ...

    async def listen(
        self,
        subject: Subject,
        ctx: ServerRequestContext[Any, Any],
        params: types.SubscriptionsListenRequestParams,
    ) -> types.SubscriptionsListenResult:
        """Serve one ``subscriptions/listen`` stream (2026-07-28) for ``subject``."""
        ...


class LocalResources:
    """The resources, templates and prompts of ``library``, for the callers ``holds`` allows.

    ``holds(subject, capability)`` says whether a subject holds a grant for a
    capability (``None``: everyone holds every one); ``runtime`` runs every read;
    ``limit`` bounds each item of a read's contents, in bytes.
    """

    def __init__(
        self,
        library: Library,
        *,
        runtime: Runtime,
        holds: Callable[[Subject, str], bool] | None,
        limit: int,
    ) -> None:
        self._library = library
        self._runtime = runtime
        self._holds = holds
        self._limit = limit
        registry = Registry()
        items: list[ResourceSpec | TemplateSpec] = [
            *library.resources.values(),
            *library.templates.values(),
        ]
        self._readers: dict[int, RegisteredTool] = {
            id(item): registry.register(*reader(item)) for item in items
        }
        self._subscribers: dict[str, list[tuple[Subject, ServerSession]]] = {}
        self._bus = InMemorySubscriptionBus()
        self._listening = ListenHandler(self._bus)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = library.watch(self._changed)

    def close(self) -> None:
        """Stop watching the library for changes, and end every listen stream."""
        self._stop()
        self._listening.close()

    # -- resources ---------------------------------------------------------------------

    async def list_resources(self, subject: Subject) -> list[types.Resource]:
        """``resources/list``: the resources ``subject`` may read."""
        return [
            types.Resource(uri=r.uri, name=r.name, description=r.description, mime_type=r.mime_type)
            for r in self._library.resources.values()
            if self._may(subject, r.capabilities)
        ]

    async def list_resource_templates(self, subject: Subject) -> list[types.ResourceTemplate]:
        """``resources/templates/list``: the templates ``subject`` may read through."""
        return [
            types.ResourceTemplate(
                uri_template=t.uri_template,
                name=t.name,
                description=t.description,
                mime_type=t.mime_type,
            )
            for t in self._library.templates.values()
            if self._may(subject, t.capabilities)
        ]

    async def read_resource(self, subject: Subject, uri: str) -> types.ReadResourceResult:
        """``resources/read`` through the runtime, as a read of the resource's own tool."""
        owner = self._owner(subject, uri)
        return await read_through(
            self._runtime,
            subject,
            self._readers[id(owner)],
            uri,
            limit=self._limit,
            source=f"resource {owner.name}",
        )

    async def subscribe(self, subject: Subject, uri: str, session: ServerSession) -> None:
        """``resources/subscribe``: ``session`` hears when ``uri`` changes."""
        self._owner(subject, uri)  # hidden or absent: refused alike
        self._loop = asyncio.get_running_loop()
        found = self._subscribers.setdefault(uri, [])
        if not any(connection_of(s) is connection_of(session) for _, s in found):
            found.append((subject, session))

    async def listen(
        self,
        subject: Subject,
        ctx: ServerRequestContext[Any, Any],
        params: types.SubscriptionsListenRequestParams,
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: updates of the requested resources ``subject`` may read.

        A URI it may not read, or that no one declared, is left out of the honoured
        filter the stream acknowledges, as the SDK leaves out what it does not serve.
        """
        self._loop = asyncio.get_running_loop()
        wanted = params.notifications
        mine = [u for u in wanted.resource_subscriptions or () if self._readable(subject, u)]
        narrowed = wanted.model_copy(update={"resource_subscriptions": mine or None})
        return await self._listening(ctx, params.model_copy(update={"notifications": narrowed}))

    async def unsubscribe(self, subject: Subject, uri: str, session: ServerSession) -> None:
        """``resources/unsubscribe``: no more updates of ``uri`` for ``session``."""
        del subject
        gone = connection_of(session)
        found = self._subscribers.get(uri, [])
        found[:] = [(who, s) for who, s in found if connection_of(s) is not gone]

    # -- prompts -------------------------------------------------------------------------

    async def list_prompts(self, subject: Subject) -> list[types.Prompt]:
        """``prompts/list``: the prompts ``subject`` may get."""
        return [
            types.Prompt(
                name=p.name,
                description=p.description,
                arguments=[
                    types.PromptArgument(
                        name=a.name, description=a.description, required=a.required
                    )
                    for a in p.arguments
                ],
            )
            for p in self._library.prompts.values()
            if self._may(subject, p.capabilities)
        ]

    async def get_prompt(
        self, subject: Subject, name: str, arguments: dict[str, str]
    ) -> types.GetPromptResult:
        """``prompts/get``: the prompt rendered with ``arguments``."""
        spec = self._prompt(subject, name)
        wrong = [f"missing {m}" for m in spec.missing(arguments)]
        wrong += [f"unknown {u}" for u in spec.unknown(arguments)]
        if wrong:
            raise MCPError(code=types.INVALID_PARAMS, message=f"prompt {name}: {', '.join(wrong)}")
        value = spec.render(**arguments)
        if inspect.isawaitable(value):
            value = await value
        rendered = messages(value)
        return types.GetPromptResult(
            description=spec.description, messages=[_message(m) for m in rendered]
        )

    async def complete(
        self, subject: Subject, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        """``completion/complete`` for an argument of a prompt or template ``subject`` may use."""
        ref = params.ref
        completers: Mapping[str, Callable[[str], Any]]
        if isinstance(ref, types.PromptReference):
            completers = self._prompt(subject, ref.name).complete
        else:
            template = self._library.templates.get(ref.uri)
            if template is None or not self._may(subject, template.capabilities):
                raise not_found(ref.uri)
            completers = template.complete
        completer = completers.get(params.argument.name)
        values = [] if completer is None else [str(v) for v in completer(params.argument.value)]
        return types.CompleteResult(
            completion=types.Completion(
                values=values[:MAX_COMPLETIONS],
                total=len(values),
                has_more=len(values) > MAX_COMPLETIONS,
            )
        )

    # -- who may ---------------------------------------------------------------------------

    def _may(self, subject: Subject, capabilities: tuple[str, ...]) -> bool:
        holds = self._holds
        return holds is None or all(holds(subject, c) for c in capabilities)

    def _owner(self, subject: Subject, uri: str) -> ResourceSpec | TemplateSpec:
        owner = self._library.owner(uri)
        if owner is None or not self._may(subject, owner.capabilities):
            raise not_found(uri)  # hidden is the same as absent, as for tools
        return owner

    def _readable(self, subject: Subject, uri: str) -> bool:
        owner = self._library.owner(uri)
        return owner is not None and self._may(subject, owner.capabilities)

    def _prompt(self, subject: Subject, name: str) -> PromptSpec:
        spec = self._library.prompts.get(name)
        if spec is None or not self._may(subject, spec.capabilities):
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")
        return spec

    # -- updates ---------------------------------------------------------------------------

    def _changed(self, uri: str) -> None:
        """From any thread: schedule the updates on the loop the subscriptions came from."""
        loop = self._loop
        if loop is None:
            return  # nobody has subscribed or listened yet
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell

            def start() -> None:
                loop.create_task(self._tell(uri))

            loop.call_soon_threadsafe(start)

    async def _tell(self, uri: str) -> None:
        await self._bus.publish(ResourceUpdated(uri=uri))
        found = self._subscribers.get(uri, [])
        for subject, session in list(found):
            if not self._readable(subject, uri):
                continue
            try:
                await session.send_resource_updated(uri)
            except Exception as exc:  # noqa: BLE001 - a gone client: forget it
                _LOG.debug("resource update for %s not delivered: %r", uri, exc)
                found[:] = [(w, s) for w, s in found if s is not session]


def subscription_handlers(
    subscribable: Subscribable,
    caller: Callable[[ServerRequestContext[Any, Any]], Subject],
) -> dict[str, Any]:
    """The SDK handlers for resource subscriptions, each as the caller.

    ``resources/subscribe`` and ``/unsubscribe`` (2025-era connections),
    ``subscriptions/listen`` (2026-07-28).
    """

    async def on_subscribe_resource(
        ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        await subscribable.subscribe(caller(ctx), str(params.uri), ctx.session)
        return types.EmptyResult()

    async def on_unsubscribe_resource(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await subscribable.unsubscribe(caller(ctx), str(params.uri), ctx.session)
        return types.EmptyResult()

    async def on_subscriptions_listen(
        ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        return await subscribable.listen(caller(ctx), ctx, params)

    return {
        "on_subscribe_resource": on_subscribe_resource,
        "on_unsubscribe_resource": on_unsubscribe_resource,
        "on_subscriptions_listen": on_subscriptions_listen,
    }


def _message(message: Message) -> types.PromptMessage:
    block = _BLOCK.validate_python(block_json(message.content))
    # The pack's own words stay as they are; media and resources it embeds are data.
    content = block if isinstance(message.content, Text) else mark_block(block)
    return types.PromptMessage(role=message.role, content=content)
