"""The session's context with a proposal: what the model has seen, for the flow rules (R6).

``POST /v1/proposals`` may carry ``context``::

    "context": {
      "session": "chat-42",                       # optional: index the session durably
      "user": ["Pay my landlord 500 (landlord-account-123)"],   # the user's messages
      "results": [{"tool": "email.read", "content": {...}}]      # earlier tool results
    }

The user's messages are trusted: the caller is the authenticated agent application,
and it vouches for what its user said. Tool results it sends are untrusted and
private, whatever tool they name: a claim in a request body never raises a value's
trust (only ``[provenance] trust`` does, by tool name). The result of a call the
service itself runs is labelled as its tool declares it
(:meth:`~toolbound.provenance.Label.of_result`).

With a ``session``, everything above is kept (:class:`~toolbound.session_values.SessionValues`):
each call proposed in the session adds its user messages and results before it is
examined, and its own result after it ran, so a later proposal is examined against
everything the model of that session has seen, on any replica. Without one, the call
is examined against the context it carries. Without either, it carries no
provenance, and the flow rules confirm its guarded values as ``not_tracked``.

Nothing here runs unless the configuration has flow rules (``[provenance]``); the
context is still checked, so a client learns of a malformed one at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NoReturn, cast

from toolbound.adapters.http import ApiError
from toolbound.provenance import Label, Provenance
from toolbound.session_values import SessionValues, Value

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from toolbound._clock import Clock
    from toolbound._model import JSONValue
    from toolbound._outcome import Outcome
    from toolbound.config import ProvenanceConfig
    from toolbound.journal import Journal
    from toolbound.registry import Registry

__all__ = ["SessionContext", "Sessions"]

_KEYS: Final = frozenset({"session", "user", "results"})
_RESULT_KEYS: Final = frozenset({"tool", "content"})
_MAX_SESSION_ID: Final = 200


def _bad(message: str) -> NoReturn:
    raise ApiError(400, "bad_request_body", f"context: {message}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionContext:
    """What a proposal says the model has seen, and the session it belongs to."""

    session: str | None = None
    user: tuple[JSONValue, ...] = ()
    results: tuple[tuple[str, JSONValue], ...] = ()
    """``(tool, content)``: a tool's name (or ``name@version``) and what it returned."""

    @classmethod
    def from_json(cls, raw: object) -> SessionContext | None:
        """The ``context`` member of a proposal, checked; ``None`` when absent."""
        if raw is None:
            return None
        if not isinstance(raw, dict):
            _bad("must be an object with session, user and/or results")
        unknown = set(raw) - _KEYS
        if unknown:
            _bad(f"unknown member(s) {sorted(unknown)}")
        session = raw.get("session")
        if session is not None and (
            not isinstance(session, str) or not 0 < len(session) <= _MAX_SESSION_ID
        ):
            _bad(f"session must be a string of 1 to {_MAX_SESSION_ID} characters")
        user = raw.get("user", [])
        if not isinstance(user, list):
            _bad("user must be an array of the user's messages")
        results = raw.get("results", [])
        if not isinstance(results, list):
            _bad("results must be an array of {tool, content}")
        return cls(
            session=session,
            user=tuple(cast("list[JSONValue]", user)),
            results=tuple(_result(item, i) for i, item in enumerate(results)),
        )

    def as_json(self) -> dict[str, object]:
        """The context as the journal keeps it with the proposal (to examine it again)."""
        return {
            "session": self.session,
            "user": list(self.user),
            "results": [{"tool": tool, "content": content} for tool, content in self.results],
        }

    def values(self) -> list[Value]:
        """The context's values, labelled: the user's trusted, results untrusted and private."""
        values = [Value(Label.user("context"), message) for message in self.user]
        for tool, content in self.results:
            name, _, version = tool.partition("@")
            label = Label(
                origin="tool",
                tool=name,
                version=version or None,
                untrusted=True,
                private=True,
                note="context",
            )
            values.append(Value(label, content))
        return values


def _result(item: object, i: int) -> tuple[str, JSONValue]:
    if not isinstance(item, dict) or set(item) != _RESULT_KEYS:
        _bad(f"results[{i}] must be an object with exactly tool and content")
    tool = item["tool"]
    if not isinstance(tool, str) or not tool:
        _bad(f"results[{i}].tool must be the tool's name")
    return tool, cast("JSONValue", item["content"])


class Sessions:
    """Builds each proposal's provenance from its context and its session (R6)."""

    def __init__(
        self, journal: Journal, registry: Registry, provenance: ProvenanceConfig, clock: Clock
    ) -> None:
        """Keep sessions in ``journal``'s database, when ``provenance`` has rules."""
        self.enabled = provenance.enabled
        self.registry = registry
        self.clock = clock
        self.store = SessionValues(journal) if self.enabled else None

    def index(self, tenant: str, context: SessionContext | None) -> Provenance | None:
        """The provenance a new proposal is examined against; its context kept first."""
        if self.store is None or context is None:
            return None
        values = context.values()
        if context.session is None:
            return _indexed(values)
        if not self.store.add(tenant, context.session, values, now=self.clock.now()):
            return None
        return self.store.index(tenant, context.session)

    def stored(self, tenant: str, request: Mapping[str, object]) -> Provenance | None:
        """The provenance of a stored proposal, run again after a person's decision."""
        context = SessionContext.from_json(request.get("context"))
        if self.store is None or context is None:
            return None
        if context.session is None:
            return _indexed(context.values())
        return self.store.index(tenant, context.session)

    def learn(self, tenant: str, context: SessionContext | None, outcome: Outcome) -> None:
        """Keep what the model is shown of an observed call in its session (R11)."""
        if self.store is None or context is None or context.session is None:
            return
        if outcome.kind != "observed":
            return
        inv = outcome.invocation
        tool = self.registry.get(inv.tool_name, inv.tool_version)
        if tool is None:
            return
        shown = outcome.message.payload.get("data")
        label = Label.of_result(tool.spec, inv.invocation_id)
        self.store.add(tenant, context.session, [Value(label, shown)], now=self.clock.now())

    def learn_stored(self, tenant: str, request: Mapping[str, object], outcome: Outcome) -> None:
        """:meth:`learn` for a stored proposal that ran after a person's decision."""
        self.learn(tenant, SessionContext.from_json(request.get("context")), outcome)

    def purge(self, *, before: datetime) -> int:
        """Retention: remove the sessions idle since before ``before``; how many values went."""
        return 0 if self.store is None else self.store.purge(before=before)


def _indexed(values: list[Value]) -> Provenance:
    index = Provenance()
    for value in values:
        index.add(value.label, value.content)
    return index
