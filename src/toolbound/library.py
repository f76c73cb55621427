"""Resources, resource templates and prompts declared beside a pack's tools (R1, R18).

A pack offers more than tools: documents a client may read, and prompts a person
may pick. Each is declared from a function, as tools are with
:func:`toolbound.define.tool`, and registered in the pack's
:class:`~toolbound.Registry` (its :attr:`~toolbound.Registry.library`)::

    @resource("notes://today", mime_type="text/plain", capabilities=("notes:read",))
    def today() -> str:
        '''Today's notes.'''

    @resource_template("notes://day/{day}", capabilities=("notes:read",))
    def day(day: str) -> str:
        '''The notes of one day.'''

    @prompt(capabilities=("notes:read",), complete={"tone": lambda v: ["brief", "long"]})
    def summarise(day: str, tone: str = "brief") -> list[Message]:
        '''Summarise one day's notes.'''

A resource read is a read like any other: it runs through the runtime as the read
tool :func:`reader` makes (``resources.read.<name>``: authorized for the declared
capabilities with ``Resource(kind="resource", id=URI, action="read")`` so a grant's
scopes apply, traced, its contents marked untrusted). A caller sees a resource,
template or prompt only when it holds every capability declared for it.

What a read returns: ``str`` (text, with the declared media type, ``text/plain`` by
default), ``bytes`` (a blob, ``application/octet-stream`` by default), an
:class:`~toolbound.results.content.Embedded` or a list of them. A prompt returns a
``str`` (one user message) or a list of :class:`Message`. A resource that changes
is announced with :meth:`Library.changed`; servers tell the clients subscribed to it.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import TYPE_CHECKING, Final

from toolbound._errors import SpecError
from toolbound._model import Resource, ToolSpec
from toolbound.define import docstring_params
from toolbound.registry import (
    Library,
    Message,
    PromptArgument,
    PromptSpec,
    ResourceSpec,
    TemplateSpec,
    check_spec,
)
from toolbound.results.content import Embedded, Text, contents_json

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from toolbound._model import JSONObject, JSONValue
    from toolbound.execution.tool import AsyncToolFunction, ToolContext, ToolFunction
    from toolbound.registry import Completer, ReadValue

__all__ = [
    "READ_TOOL_PREFIX",
    "Library",
    "Message",
    "PromptArgument",
    "PromptSpec",
    "ResourceSpec",
    "TemplateSpec",
    "messages",
    "prompt",
    "reader",
    "resource",
    "resource_template",
]

READ_TOOL_PREFIX: Final = "resources.read."
"""A resource read runs as the read tool ``resources.read.<name>`` (trace, metrics)."""


_URI_SCHEMA: Final[dict[str, object]] = {
    "type": "object",
    "properties": {"uri": {"type": "string", "minLength": 1}},
    "required": ["uri"],
    "additionalProperties": False,
}
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


# -- declaring -----------------------------------------------------------------------------


def resource(
    uri: str,
    *,
    name: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    capabilities: tuple[str, ...] = (),
    timeout: float = 10.0,
) -> Callable[[Callable[[], ReadValue | Awaitable[ReadValue]]], ResourceSpec]:
    """Declare the resource at ``uri``, read by the decorated function (no parameters)."""

    def decorate(fn: Callable[[], ReadValue | Awaitable[ReadValue]]) -> ResourceSpec:
        where = _where(fn)
        params = _parameters(fn, where)
        if params:
            msg = f"{where}: a resource's reader takes no parameters, not {', '.join(params)}"
            raise SpecError(msg)
        spec = ResourceSpec(
            uri=_uri(uri, where),
            name=name or _name_of(fn),
            description=_description(fn, description, where),
            read=fn,
            mime_type=mime_type,
            capabilities=tuple(capabilities),
            timeout=timeout,
        )
        reader(spec)  # the read tool's checks (name, timeout), now rather than at serving
        return spec

    return decorate


def resource_template(
    uri_template: str,
    *,
    name: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    capabilities: tuple[str, ...] = (),
    complete: Mapping[str, Completer] | None = None,
    timeout: float = 10.0,
) -> Callable[[Callable[..., ReadValue | Awaitable[ReadValue]]], TemplateSpec]:
    """Declare resources at ``uri_template``; the function takes each ``{variable}`` by name.

    ``complete`` maps a variable to what completes it (``completion/complete``).
    """

    def decorate(fn: Callable[..., ReadValue | Awaitable[ReadValue]]) -> TemplateSpec:
        where = _where(fn)
        variables = _VARIABLE.findall(uri_template)
        params = _parameters(fn, where)
        if not variables or sorted(variables) != sorted(params):
            msg = (
                f"{where}: the template {uri_template!r} has the variables "
                f"{sorted(variables)}, the function the parameters {sorted(params)}"
            )
            raise SpecError(msg)
        _completes(complete or {}, set(variables), where)
        spec = TemplateSpec(
            uri_template=_uri(uri_template, where),
            name=name or _name_of(fn),
            description=_description(fn, description, where),
            read=fn,
            mime_type=mime_type,
            capabilities=tuple(capabilities),
            complete=dict(complete or {}),
            timeout=timeout,
        )
        reader(spec)
        return spec

    return decorate


def prompt(
    *,
    name: str | None = None,
    description: str | None = None,
    capabilities: tuple[str, ...] = (),
    complete: Mapping[str, Completer] | None = None,
) -> Callable[[Callable[..., object]], PromptSpec]:
    """Declare a prompt rendered by the decorated function.

    Its parameters are the prompt's arguments (each a ``str``; one with a default is
    optional), described from the docstring's ``Args:`` as tools are.
    """

    def decorate(fn: Callable[..., object]) -> PromptSpec:
        where = _where(fn)
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        described = docstring_params(inspect.getdoc(fn) or "")
        arguments: list[PromptArgument] = []
        for param in signature.parameters.values():
            if hints.get(param.name, str) not in {str, str | None}:
                msg = f"{where}: prompt argument {param.name} must be a str"
                raise SpecError(msg)
            arguments.append(
                PromptArgument(
                    name=param.name,
                    description=described.get(param.name),
                    required=param.default is inspect.Parameter.empty,
                )
            )
        _completes(complete or {}, {a.name for a in arguments}, where)
        prompt_name = name or _name_of(fn)
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,63}", prompt_name):
            msg = f"{where}: prompt name {prompt_name!r} must match [A-Za-z][A-Za-z0-9_.-]{{0,63}}"
            raise SpecError(msg)
        return PromptSpec(
            name=prompt_name,
            description=_description(fn, description, where),
            arguments=tuple(arguments),
            render=typing.cast("Callable[..., str | Sequence[Message]]", fn),
            capabilities=tuple(capabilities),
            complete=dict(complete or {}),
        )

    return decorate


# -- reading through the runtime ------------------------------------------------------------


def reader(
    spec: ResourceSpec | TemplateSpec,
) -> tuple[ToolSpec, ToolFunction | AsyncToolFunction]:
    """The read tool of one resource or template: a read, scoped by the URI (R6).

    Its value is the list of resource contents in MCP's shape (:func:`contents_json`).
    """

    def resources(arguments: JSONObject) -> list[Resource]:
        return [Resource(kind="resource", id=str(arguments.get("uri", "")), action="read")]

    async def read(arguments: JSONObject, _ctx: ToolContext) -> JSONValue:
        uri = str(arguments["uri"])
        if isinstance(spec, TemplateSpec):
            variables = spec.match(uri)
            if variables is None:
                msg = f"{uri} does not match {spec.uri_template}"
                raise ValueError(msg)
            value = spec.read(**variables)
        else:
            value = spec.read()
        if inspect.isawaitable(value):
            value = await value
        return _contents(uri, value, spec.mime_type)

    tool = ToolSpec(
        name=f"{READ_TOOL_PREFIX}{spec.name}",
        version="1",
        description=f"Read the resource {spec.name}.",
        input_schema=_URI_SCHEMA,
        effect="read",
        capabilities=spec.capabilities,
        resources=resources,
        timeout=spec.timeout,
        # The contents go back as MCP resource contents, bounded by size per item.
        result_budget=1 << 20,
    )
    check_spec(tool)
    return tool, read


def _contents(uri: str, value: ReadValue, mime_type: str | None) -> JSONValue:
    if isinstance(value, str):
        item = Embedded(uri=uri, text=value, mime_type=mime_type or "text/plain")
        return [contents_json(item)]
    if isinstance(value, bytes):
        blob = Embedded(uri=uri, data=value, mime_type=mime_type or "application/octet-stream")
        return [contents_json(blob)]
    items = [value] if isinstance(value, Embedded) else list(value)
    if not all(isinstance(i, Embedded) for i in items):
        msg = f"reading {uri} gave {type(value).__name__}, not str, bytes or Embedded"
        raise TypeError(msg)
    return [contents_json(i) for i in items]


def messages(value: str | Sequence[Message]) -> list[Message]:
    """A prompt function's return value as messages (a ``str`` is one user message)."""
    if isinstance(value, str):
        return [Message(role="user", content=Text(text=value))]
    found = list(value)
    if not all(isinstance(m, Message) for m in found):
        msg = "a prompt returns a str or a list of Message"
        raise TypeError(msg)
    return found


# -- small helpers -----------------------------------------------------------------------------


def _name_of(fn: object) -> str:
    return str(getattr(fn, "__name__", ""))


def _where(fn: object) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def _parameters(fn: Callable[..., object], where: str) -> list[str]:
    if not callable(fn):
        msg = f"{where}: not a function"
        raise SpecError(msg)
    return list(inspect.signature(fn).parameters)


def _description(fn: object, given: str | None, where: str) -> str:
    if given is not None and given.strip():
        return given.strip()
    doc = (inspect.getdoc(fn) or "").strip().split("\n\n", 1)[0]
    if not doc:
        msg = f"{where}: no description: write a docstring or pass description="
        raise SpecError(msg)
    return " ".join(doc.split())


def _uri(uri: str, where: str) -> str:
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", uri):
        msg = f"{where}: {uri!r} is not an absolute URI (scheme:...)"
        raise SpecError(msg)
    return uri


def _completes(complete: Mapping[str, Completer], names: set[str], where: str) -> None:
    unknown = sorted(set(complete) - names)
    if unknown:
        msg = f"{where}: complete= names {unknown}, which are not its arguments"
        raise SpecError(msg)
