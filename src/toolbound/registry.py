"""Registering tools and choosing what one request may see (R1, R2, R4).

A :class:`Registry` holds every known ``(name, version)`` with its implementation.
Registration is where a bad spec fails: names, limits and both schemas are checked
(each schema against its dialect's meta-schema) and compiled once. A request never
sees the registry, only a :class:`ToolSet` cut from it. Beside the tools, a registry's
:class:`Library` holds the resources, resource templates and prompts a pack declares
with :mod:`toolbound.library`.
"""

from __future__ import annotations

import inspect
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from toolbound._errors import SpecError
from toolbound.gates.validate import CompiledSchema

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence

    from toolbound._model import ToolSpec
    from toolbound.execution.tool import AsyncToolFunction, ToolFunction
    from toolbound.results.content import Block, Embedded, MessageRole

__all__ = [
    "Completer",
    "Library",
    "Message",
    "PromptArgument",
    "PromptSpec",
    "ReadValue",
    "RegisteredTool",
    "Registry",
    "ResourceSpec",
    "TemplateSpec",
    "ToolSet",
    "check_spec",
]

# Dots name families (orders.get); providers accept at most 64 of [A-Za-z0-9_-],
# adapters map dots where a provider needs it.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisteredTool:
    """A spec with its implementation and compiled schemas."""

    spec: ToolSpec
    function: ToolFunction | AsyncToolFunction
    is_async: bool
    inline: bool
    input: CompiledSchema
    output: CompiledSchema | None


class Registry:
    """Every tool version this runtime can run."""

    __slots__ = ("_assert_format", "_tools", "library")

    def __init__(self, *, assert_format: bool = True) -> None:
        """Start empty.

        ``assert_format=False`` makes ``format`` an annotation only (R4 allows
        either); tools must then check formats they rely on themselves, and the
        setting is recorded in every trace.
        """
        self._tools: dict[tuple[str, str], RegisteredTool] = {}
        self._assert_format = assert_format
        self.library = Library()
        """The resources, resource templates and prompts served beside the tools
        (:mod:`toolbound.library`)."""

    def register(
        self,
        spec: ToolSpec,
        function: ToolFunction | AsyncToolFunction,
        *,
        inline: bool = False,
    ) -> RegisteredTool:
        """Check, compile and add one tool version.

        ``inline=True`` runs a sync tool on the caller's thread instead of a worker:
        faster, but its deadline can then only be checked after it returns, so it is
        allowed only for ``pure`` and ``read`` tools.
        """
        check_spec(spec)
        if spec.key in self._tools:
            msg = f"{spec.ref} is already registered"
            raise SpecError(msg)
        if not callable(function):
            msg = f"{spec.ref}: the implementation is not callable"
            raise SpecError(msg)
        is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004 - async callable objects
        )
        if inline and (is_async or spec.is_write):
            msg = f"{spec.ref}: only sync pure/read tools can run inline"
            raise SpecError(msg)
        tool = RegisteredTool(
            spec=spec,
            function=function,
            is_async=is_async,
            inline=inline,
            input=CompiledSchema.compile(
                spec.input_schema,
                assert_format=self._assert_format,
                where=f"{spec.ref} input_schema",
            ),
            output=None
            if spec.output_schema is None
            else CompiledSchema.compile(
                spec.output_schema,
                assert_format=self._assert_format,
                where=f"{spec.ref} output_schema",
            ),
        )
        self._tools[spec.key] = tool
        return tool

    def get(self, name: str, version: str) -> RegisteredTool | None:
        """The tool registered as ``name@version``, if any."""
        return self._tools.get((name, version))

    def versions(self, name: str) -> list[str]:
        """The registered versions of ``name``."""
        return [v for (n, v) in self._tools if n == name]

    def toolset(self, *refs: str) -> ToolSet:
        """The tools one request may see, by ``name@version`` (or ``name`` if unique).

        With no refs, every registered tool (one version per name required).
        """
        chosen: list[RegisteredTool] = []
        for ref in refs or [t.spec.ref for t in self._tools.values()]:
            name, _, version = ref.partition("@")
            if not version:
                versions = self.versions(name)
                if len(versions) != 1:
                    msg = f"{name}: say which version ({', '.join(versions) or 'none registered'})"
                    raise SpecError(msg)
                version = versions[0]
            tool = self.get(name, version)
            if tool is None:
                msg = f"{name}@{version} is not registered"
                raise SpecError(msg)
            chosen.append(tool)
        return ToolSet(chosen)

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(tuple(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)


# -- the library's entries (declared with toolbound.library) ---------------------------

ReadValue: TypeAlias = "str | bytes | Embedded | Sequence[Embedded]"
Completer: TypeAlias = "Callable[[str], Iterable[str]]"
"""The values an argument may take that start as the client has typed so far."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of a prompt: who says it and one content block."""

    role: MessageRole = "user"
    content: Block


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptArgument:
    """One argument of a prompt (always a string, as MCP defines them)."""

    name: str
    description: str | None = None
    required: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSpec:
    """A resource at a fixed URI, and the function that reads it."""

    uri: str
    name: str
    description: str
    read: Callable[[], ReadValue | Awaitable[ReadValue]]
    mime_type: str | None = None
    capabilities: tuple[str, ...] = ()
    timeout: float = 10.0

    def register(self, registry: Registry) -> None:
        """Add this resource to ``registry``'s library."""
        registry.library.add_resource(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateSpec:
    """Resources at URIs that match an RFC 6570 level-1 template (``{var}`` a path segment)."""

    uri_template: str
    name: str
    description: str
    read: Callable[..., ReadValue | Awaitable[ReadValue]]
    """Called with each template variable as a keyword argument."""
    mime_type: str | None = None
    capabilities: tuple[str, ...] = ()
    complete: Mapping[str, Completer] = field(default_factory=dict, hash=False)
    timeout: float = 10.0

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` when it matches this template, else ``None``."""
        found = _pattern(self.uri_template).fullmatch(uri)
        return None if found is None else found.groupdict()

    def register(self, registry: Registry) -> None:
        """Add this template to ``registry``'s library."""
        registry.library.add_template(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSpec:
    """A prompt: its arguments and the function that renders its messages."""

    name: str
    description: str
    arguments: tuple[PromptArgument, ...]
    render: Callable[..., str | Sequence[Message] | Awaitable[str | Sequence[Message]]]
    """Called with the given arguments as keyword arguments."""
    capabilities: tuple[str, ...] = ()
    complete: Mapping[str, Completer] = field(default_factory=dict, hash=False)

    def register(self, registry: Registry) -> None:
        """Add this prompt to ``registry``'s library."""
        registry.library.add_prompt(self)

    def missing(self, given: Mapping[str, str]) -> list[str]:
        """The required arguments ``given`` lacks."""
        return [a.name for a in self.arguments if a.required and a.name not in given]

    def unknown(self, given: Mapping[str, str]) -> list[str]:
        """The arguments in ``given`` this prompt does not declare."""
        names = {a.name for a in self.arguments}
        return sorted(n for n in given if n not in names)


class Library:
    """A pack's resources, resource templates and prompts, and who watches them change.

    Declared with :mod:`toolbound.library`; a second declaration of the same URI,
    template or prompt name is refused.
    """

    __slots__ = ("_lock", "_watchers", "prompts", "resources", "templates")

    def __init__(self) -> None:
        self.resources: dict[str, ResourceSpec] = {}
        """By URI."""
        self.templates: dict[str, TemplateSpec] = {}
        """By URI template."""
        self.prompts: dict[str, PromptSpec] = {}
        """By name."""
        self._watchers: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    def add_resource(self, spec: ResourceSpec) -> None:
        """Add a resource."""
        _free(self.resources, spec.uri, "resource")
        self._unnamed(spec.name)
        self.resources[spec.uri] = spec

    def add_template(self, spec: TemplateSpec) -> None:
        """Add a resource template."""
        _free(self.templates, spec.uri_template, "resource template")
        self._unnamed(spec.name)
        self.templates[spec.uri_template] = spec

    def _unnamed(self, name: str) -> None:
        # Each is read by its own read tool, resources.read.<name>: names are unique.
        taken = {r.name for r in self.resources.values()} | {
            t.name for t in self.templates.values()
        }
        if name in taken:
            msg = f"a resource or template named {name} is already registered"
            raise SpecError(msg)

    def add_prompt(self, spec: PromptSpec) -> None:
        """Add a prompt."""
        _free(self.prompts, spec.name, "prompt")
        self.prompts[spec.name] = spec

    def __bool__(self) -> bool:
        return bool(self.resources or self.templates or self.prompts)

    def owner(self, uri: str) -> ResourceSpec | TemplateSpec | None:
        """The resource at ``uri``, or else the first template (in order added) it matches."""
        found = self.resources.get(uri)
        if found is not None:
            return found
        return next((t for t in self.templates.values() if t.match(uri) is not None), None)

    def changed(self, uri: str) -> None:
        """Say the resource at ``uri`` changed; safe from any thread, never blocks."""
        with self._lock:
            watchers = tuple(self._watchers)
        for watcher in watchers:
            watcher(uri)

    def watch(self, watcher: Callable[[str], None]) -> Callable[[], None]:
        """Call ``watcher(uri)`` on every :meth:`changed`; returns what stops it.

        ``watcher`` may be called from any thread and must not block.
        """
        with self._lock:
            self._watchers.append(watcher)

        def stop() -> None:
            with self._lock:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)

        return stop


def _free(into: Mapping[str, object], key: str, what: str) -> None:
    if key in into:
        msg = f"{what} {key} is already registered"
        raise SpecError(msg)


class ToolSet:
    """The tool versions visible to one request: at most one version per name (R2)."""

    __slots__ = ("_by_name", "refs")

    def __init__(self, tools: Iterable[RegisteredTool]) -> None:
        self._by_name: dict[str, RegisteredTool] = {}
        for tool in tools:
            if tool.spec.name in self._by_name:
                msg = f"two versions of {tool.spec.name} in one tool set"
                raise SpecError(msg)
            self._by_name[tool.spec.name] = tool
        self.refs: tuple[str, ...] = tuple(t.spec.ref for t in self._by_name.values())
        """``name@version`` of each visible tool, as the trace records them."""

    def lookup(self, name: str, version: str | None = None) -> RegisteredTool | None:
        """Exact lookup: no fuzzy matching, no other version (R17 row 1)."""
        tool = self._by_name.get(name)
        if tool is None or (version is not None and tool.spec.version != version):
            return None
        return tool

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """The specs, as the model is shown them."""
        return tuple(t.spec for t in self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(tuple(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)


def check_spec(spec: ToolSpec) -> None:
    """Raise :class:`SpecError` naming every field of ``spec`` that cannot be registered."""
    problems: list[str] = []
    if not _NAME.match(spec.name):
        problems.append(f"name {spec.name!r} must match {_NAME.pattern}")
    if not _VERSION.match(spec.version):
        problems.append(f"version {spec.version!r} must match {_VERSION.pattern}")
    if not spec.description.strip():
        problems.append("description is empty")
    if spec.input_schema.get("type") != "object":
        problems.append('input_schema must declare "type": "object"')
    if not spec.timeout > 0:
        problems.append("timeout must be positive")
    if spec.max_attempts < 1:
        problems.append("max_attempts must be at least 1")
    if spec.result_budget < 256:  # noqa: PLR2004 - room for the envelope itself
        problems.append("result_budget must be at least 256 bytes")
    if spec.is_write and spec.capabilities == ():
        problems.append("a write tool must require at least one capability")
    if problems:
        msg = f"{spec.name}@{spec.version}: " + "; ".join(problems)
        raise SpecError(msg)


def _pattern(template: str) -> re.Pattern[str]:
    """An RFC 6570 level-1 template as a pattern: each ``{var}`` one path segment or more."""
    parts = re.split(r"(\{[^}]*\})", template)
    return re.compile(
        "".join(
            f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") and p.endswith("}") else re.escape(p)
            for p in parts
        )
    )
