"""Parameter roles: what each argument of a write *does*, declared or read from the schema.

A flow rule needs to know which parameters matter and how. Five roles say it:

=============== ================================================================
``destination`` who or where data goes: a recipient, participants, a channel, a
                URL, an IBAN, a path written to
``target``      what a write acts on: a file, an event, a booking, an account
                setting, an id
``secret``      a password, a token, a PIN
``content``     what is said: a subject, a body, a title, a text
``quantity``    an amount, a count, a date or a time: a scalar that grant limits
                (``NumberLimit``, ``TimeRangeLimit``) bound, not its origin
=============== ================================================================

A tool declares roles on :attr:`~toolbound.ToolSpec.roles` (JSON Pointers such as
``"/to"`` or ``"/payment/iban"``, each covering everything below it), or with
``Annotated[str, Role("destination")]`` in :func:`~toolbound.define`. Where it
declares none, :func:`plan` infers them from the input schema alone, in this order:

1. ``writeOnly: true`` or ``format: password``, or a name whose head word is a
   secret word (``password``, ``token``, ``pin``, ``api_key``…) → ``secret``;
2. ``format`` ``email``, ``uri``, ``hostname``, ``ipv4``… or a ``pattern`` for an
   address (``@``) or an IBAN → ``destination``; ``date``, ``time``, ``date-time``,
   ``duration`` → ``quantity``;
3. the parameter's name, split into words (``recipient_iban``, ``channelName``); its
   last word is its head: a destination word (``to``, ``cc``, ``recipients``,
   ``participants``, ``url``, ``iban``, ``channel``, ``user``, ``path``…) →
   ``destination``; a generic identifier (``id``, ``*_id``, ``name``, ``key``,
   ``handle``) → ``destination`` when qualified by a destination word
   (``channel_id``, ``recipient_name``), else ``target``; a content word
   (``subject``, ``body``, ``title``, ``text``, ``message``, ``description``…) →
   ``content``; an amount or time word (``amount``, ``price``, ``count``,
   ``date``, ``start``…) → ``quantity``;
4. the type: numbers → ``quantity``; booleans, ``enum`` and ``const`` (a choice
   from a closed set) → no role; any other string → ``target``, so that an
   unrecognised parameter of a write is guarded rather than waved through.

Arrays are transparent (``/participants`` covers ``/participants/0``); ``$ref``,
``anyOf``, ``oneOf`` and ``allOf`` are followed. Nothing here knows any tool by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, get_args

from toolbound._errors import SpecError
from toolbound._labels import RoleName

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from toolbound._model import ToolSpec

__all__ = ["ROLES", "Role", "RoleName", "RolePlan", "infer_role", "plan", "system_fields"]

ROLES: tuple[RoleName, ...] = get_args(RoleName)


@dataclass(frozen=True, slots=True)
class Role:
    """Declares a parameter's role beside its type: ``Annotated[str, Role("destination")]``."""

    name: RoleName

    def __post_init__(self) -> None:
        """Refuse a role that is not one of the six."""
        if self.name not in ROLES:
            msg = f"Role({self.name!r}): a role is one of {', '.join(ROLES)}"
            raise SpecError(msg)


_SECRET = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "passcode",
        "secret",
        "token",
        "pin",
        "otp",
        "credential",
        "credentials",
        "apikey",
    }
)
_DESTINATION = frozenset(
    {
        "to",
        "cc",
        "bcc",
        "recipient",
        "recipients",
        "receiver",
        "receivers",
        "participant",
        "participants",
        "attendee",
        "attendees",
        "invitee",
        "invitees",
        "email",
        "emails",
        "address",
        "addresses",
        "url",
        "urls",
        "uri",
        "link",
        "endpoint",
        "webhook",
        "host",
        "hostname",
        "domain",
        "iban",
        "account",
        "channel",
        "channels",
        "phone",
        "destination",
        "payee",
        "user",
        "users",
        "member",
        "members",
        "contact",
        "contacts",
        "path",
        "folder",
    }
)
_GENERIC = frozenset({"id", "ids", "uuid", "key", "name", "names", "handle", "ref", "number"})
_CONTENT = frozenset(
    {
        "subject",
        "body",
        "title",
        "text",
        "message",
        "messages",
        "content",
        "contents",
        "description",
        "note",
        "notes",
        "comment",
        "comments",
        "summary",
        "caption",
        "reason",
        "details",
        "agenda",
        "memo",
        "location",
        "topic",
        "reply",
        "html",
        "markdown",
    }
)
_QUANTITY = frozenset(
    {
        "amount",
        "amounts",
        "price",
        "quantity",
        "count",
        "total",
        "sum",
        "fee",
        "limit",
        "size",
        "nights",
        "rating",
        "percent",
        "percentage",
        "rate",
        "duration",
        "minutes",
        "hours",
        "date",
        "time",
        "datetime",
        "day",
        "start",
        "end",
        "until",
        "deadline",
        "when",
    }
)
_DESTINATION_FORMATS = frozenset(
    {
        "email",
        "idn-email",
        "uri",
        "iri",
        "uri-reference",
        "iri-reference",
        "hostname",
        "idn-hostname",
        "ipv4",
        "ipv6",
    }
)
_QUANTITY_FORMATS = frozenset({"date", "time", "date-time", "duration"})
_IBAN_PATTERN = re.compile(r"\[A-Z\]\{2\}.*(?:\\d|\[0-9\])\{2\}")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_MAX_DEPTH = 12
_MEMO = 4096  # concrete pointers whose role a plan remembers
# Keywords that say nothing about a value's type: a $ref beside only these is the
# schema it points to (a $ref'd enum is a closed choice, as an inline one).
_ANNOTATIONS = frozenset(
    {"$ref", "title", "description", "default", "examples", "deprecated", "$comment"}
)


def _words(name: str) -> list[str]:
    words = [w.lower() for w in _SPLIT.split(_CAMEL.sub("_", name)) if w]
    # "apiKey" and "api_key" are one secret word, as "apikey" is.
    joined = "".join(words)
    return [joined] if joined in _SECRET else words


@dataclass(frozen=True, slots=True, kw_only=True)
class _Leaf:
    """What the schema says about one parameter, all branches together."""

    types: frozenset[str]
    formats: frozenset[str]
    patterns: tuple[str, ...]
    closed: bool
    write_only: bool


def infer_role(
    path: tuple[str, ...], schema: Mapping[str, object], root: Mapping[str, object] | None = None
) -> RoleName | None:
    """The role of the parameter at ``path`` (property names) with this leaf ``schema``.

    ``root`` is the whole input schema, against which ``$ref`` resolves.
    """
    return _infer(path, _describe(schema, schema if root is None else root))


def _infer(path: tuple[str, ...], leaf: _Leaf) -> RoleName | None:  # noqa: PLR0911 - one rule per line
    words = _words(path[-1]) if path else []
    head = words[-1] if words else ""
    qualifiers = {w for part in path for w in _words(part)} - {head}
    if leaf.write_only or "password" in leaf.formats or head in _SECRET:
        return "secret"
    if leaf.formats & _DESTINATION_FORMATS:
        return "destination"
    if any("@" in p or _IBAN_PATTERN.search(p) for p in leaf.patterns):
        return "destination"
    if leaf.formats & _QUANTITY_FORMATS:
        return "quantity"
    if head in _DESTINATION:
        return "destination"
    if head in _GENERIC:
        return "destination" if qualifiers & _DESTINATION else "target"
    if head in _CONTENT:
        return "content"
    if head in _QUANTITY or leaf.types & {"number", "integer"}:
        return "quantity"
    if leaf.closed or (leaf.types and leaf.types <= {"boolean", "null"}):
        return None
    return "target"


def _describe(schema: Mapping[str, object], root: Mapping[str, object]) -> _Leaf:
    types: set[str] = set()
    formats: set[str] = set()
    patterns: list[str] = []
    closed = True
    write_only = False
    for branch in _branches(schema, root, 0):
        kind = branch.get("type")
        if isinstance(kind, str):
            types.add(kind)
        elif isinstance(kind, list):
            types.update(str(k) for k in kind)
        if isinstance(fmt := branch.get("format"), str):
            formats.add(fmt)
        if isinstance(pattern := branch.get("pattern"), str):
            patterns.append(pattern)
        write_only = write_only or branch.get("writeOnly") is True
        if "enum" not in branch and "const" not in branch and branch.get("type") != "null":
            closed = False
    return _Leaf(
        types=frozenset(types),
        formats=frozenset(formats),
        patterns=tuple(patterns),
        closed=closed,
        write_only=write_only,
    )


def _branches(
    schema: Mapping[str, object], root: Mapping[str, object], depth: int
) -> Iterator[Mapping[str, object]]:
    """``schema`` with ``$ref`` resolved and ``anyOf`` / ``oneOf`` / ``allOf`` spread out."""
    if depth > _MAX_DEPTH:
        return
    ref = schema.get("$ref")
    resolved = False
    if isinstance(ref, str):
        target = _resolve(root, ref)
        if target is not None:
            resolved = True
            yield from _branches(target, root, depth + 1)
    if resolved and not (schema.keys() - _ANNOTATIONS):
        return  # only a reference (and notes): what it points to is the whole schema
    spread = False
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            spread = True
            for option in options:
                if isinstance(option, dict):
                    yield from _branches(option, root, depth + 1)
    if not spread or "type" in schema:
        yield schema


def _resolve(root: Mapping[str, object], ref: str) -> Mapping[str, object] | None:
    if not ref.startswith("#/"):
        return None
    node: object = root
    for escaped in ref[2:].split("/"):
        step = escaped.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    return node if isinstance(node, dict) else None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _walk(
    schema: Mapping[str, object],
    root: Mapping[str, object],
    pointer: str,
    path: tuple[str, ...],
    depth: int,
) -> Iterator[tuple[str, tuple[str, ...], Mapping[str, object]]]:
    """``(shape pointer, property path, leaf schema)`` for every leaf below ``schema``."""
    branches = list(_branches(schema, root, depth))
    containers = False
    for branch in branches:
        properties = branch.get("properties")
        if isinstance(properties, dict) and depth < _MAX_DEPTH:
            containers = True
            for key, sub in properties.items():
                if isinstance(sub, dict):
                    yield from _walk(
                        sub, root, f"{pointer}/{_escape(key)}", (*path, key), depth + 1
                    )
        items = branch.get("items")
        if isinstance(items, dict) and depth < _MAX_DEPTH:
            containers = True  # arrays are transparent: /participants covers /participants/0
            yield from _walk(items, root, pointer, path, depth + 1)
    if not containers and path:
        yield pointer, path, schema


@dataclass(frozen=True, slots=True, kw_only=True)
class RolePlan:
    """The role of every parameter of one tool: declared ones first, then inferred.

    Keys are *shape* pointers: JSON Pointers with array indexes left out, so
    ``/participants`` is the role of ``/participants/3`` and ``/items/email``
    that of ``/items/0/email``.
    """

    tool: str
    declared: Mapping[str, RoleName] = field(default_factory=dict)
    inferred: Mapping[str, RoleName] = field(default_factory=dict)
    described: frozenset[str] = frozenset()
    """Every leaf the schema describes, with a role or none (a closed choice)."""
    _memo: dict[tuple[str, bool], RoleName | None] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def roles(self) -> dict[str, RoleName]:
        """Every parameter's role, declared over inferred."""
        out = dict(self.inferred)
        for pointer in out:
            declared = self._declared(pointer)
            if declared is not None:
                out[pointer] = declared
        return {**out, **self.declared}

    def role(self, pointer: str, *, number: bool = False) -> RoleName | None:
        """The role of the argument at ``pointer`` (a concrete JSON Pointer).

        A key the schema does not describe (inside an untyped array item or
        object) is inferred from its name and its ancestors' names, its type read
        from the value (``number``): the keys of ``[{"email": ...}]`` get roles too.
        A declared ``none`` is no role.
        """
        key = (pointer, number)
        if key in self._memo:
            return self._memo[key]
        if len(self._memo) > _MEMO:
            self._memo.clear()  # a bound: concrete pointers of long arrays are many
        found = self._role(pointer, number=number)
        self._memo[key] = found
        return found

    def _role(self, pointer: str, *, number: bool) -> RoleName | None:
        shape = _shape(pointer)
        declared = self._declared(shape)
        if declared is not None:
            return None if declared == "none" else declared
        inferred = self.inferred.get(shape)
        if inferred is not None or shape in self.described or not shape:
            return inferred
        path = tuple(part.replace("~1", "/").replace("~0", "~") for part in shape.split("/")[1:])
        kind = frozenset({"number"}) if number else frozenset({"string"})
        return _infer(
            path,
            _Leaf(types=kind, formats=frozenset(), patterns=(), closed=False, write_only=False),
        )

    def pointers(self, role: RoleName) -> tuple[str, ...]:
        """The shape pointers of the parameters playing ``role``."""
        return tuple(p for p, r in self.roles.items() if r == role)

    def _declared(self, shape: str) -> RoleName | None:
        best: tuple[int, RoleName] | None = None
        for pointer, role in self.declared.items():
            prefix = _shape(pointer)
            covers = shape == prefix or shape.startswith(prefix + "/") or prefix == ""
            if covers and (best is None or len(prefix) > best[0]):
                best = (len(prefix), role)
        return None if best is None else best[1]


def _shape(pointer: str) -> str:
    # Array indexes dropped; a property whose name is all digits reads as one.
    return "".join("/" + part for part in pointer.split("/")[1:] if not part.isdigit())


def plan(spec: ToolSpec) -> RolePlan:
    """The roles of ``spec``'s parameters: its declarations, and inference for the rest.

    Raises :class:`~toolbound.SpecError` for a declared role that is not one of
    the five or a key that is not a JSON Pointer.
    """
    for pointer, role in spec.roles.items():
        if pointer and not pointer.startswith("/"):
            msg = f"{spec.ref}: role key {pointer!r} must be a JSON Pointer such as '/to'"
            raise SpecError(msg)
        if role not in ROLES:
            msg = f"{spec.ref}: role {role!r} of {pointer} is not one of {', '.join(ROLES)}"
            raise SpecError(msg)
    schema = spec.input_schema
    inferred: dict[str, RoleName] = {}
    described: set[str] = set()
    for pointer, path, leaf in _walk(schema, schema, "", (), 0):
        if _describe(leaf, schema).types - {"object", "array"} or _closed(leaf, schema):
            described.add(pointer)  # an untyped object or array leaves its keys open
        found = _infer(path, _describe(leaf, schema))
        if found is not None:
            inferred.setdefault(pointer, found)
    return RolePlan(
        tool=spec.ref,
        declared=dict(spec.roles),
        inferred=inferred,
        described=frozenset(described),
    )


def _closed(leaf: Mapping[str, object], root: Mapping[str, object]) -> bool:
    return _describe(leaf, root).closed


def system_fields(schema: Mapping[str, object] | None) -> frozenset[str]:
    """The shape pointers of the fields an output ``schema`` marks system-assigned.

    ``readOnly: true`` (JSON Schema: the value is managed by the owning authority):
    ids, timestamps, amounts the system computed, which no third party writes.
    """
    if not schema:
        return frozenset()
    leaves = list(_walk(schema, schema, "", (), 0)) or [("", (), _root_leaf(schema))]
    return frozenset(
        pointer
        for pointer, _, leaf in leaves
        if any(branch.get("readOnly") is True for branch in _branches(leaf, schema, 0))
    )


def _root_leaf(schema: Mapping[str, object]) -> Mapping[str, object]:
    """The schema of a result that is a scalar or a list of scalars (array items)."""
    items = schema.get("items")
    return _root_leaf(items) if isinstance(items, dict) else schema
