"""The idempotency ledger's contract (R8) and its in-memory store.

Records are keyed by ``(scope, tool version, key)`` and hold the invocation digest,
the phase and, once committed, the stored result. :meth:`Ledger.claim` answers the
four cases of R8:

* no record (or one that failed before commit) → :class:`Claimed`: go ahead;
* same digest, committed → :class:`Replay` of the original result, no second effect;
* same digest, still executing or outcome unknown → :class:`InFlight`;
* different digest → :class:`KeyReused`: rejected, never treated as the original.

Durable stores (SQLite, PostgreSQL) implement the same protocol.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from toolbound._model import Result

__all__ = [
    "Claim",
    "Claimed",
    "InFlight",
    "KeyReused",
    "Ledger",
    "LedgerKey",
    "MemoryLedger",
    "Phase",
    "Replay",
]

Phase = Literal["executing", "committed", "unknown", "failed"]


@dataclass(frozen=True, slots=True)
class LedgerKey:
    """Where one idempotency record lives."""

    scope: str
    tool_version: str
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Claimed:
    """The key is ours: execute."""

    kind: Literal["claimed"] = "claimed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """The same call already committed: here is its result."""

    kind: Literal["replay"] = "replay"
    invocation_id: str
    result: Result


@dataclass(frozen=True, slots=True, kw_only=True)
class InFlight:
    """The same call is executing, or its outcome is unknown and awaits reconciliation."""

    kind: Literal["in_flight"] = "in_flight"
    invocation_id: str
    phase: Phase


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyReused:
    """The key was used for different arguments (R8: reject key reuse)."""

    kind: Literal["key_reused"] = "key_reused"
    invocation_id: str


Claim = Claimed | Replay | InFlight | KeyReused


class Ledger(Protocol):
    """Durable memory of which writes happened (R8, R9)."""

    def claim(self, key: LedgerKey, *, digest: str, invocation_id: str) -> Claim:
        """Atomically look up ``key`` and, if free, record intent to execute."""
        ...

    def settle(self, key: LedgerKey, *, invocation_id: str, phase: Phase, result: Result) -> None:
        """Record how the claimed execution ended."""
        ...


@dataclass(slots=True)
class _Record:
    digest: str
    invocation_id: str
    phase: Phase
    result: Result | None = None


class MemoryLedger:
    """A ledger in a dict: for tests and single-process use. Thread-safe."""

    __slots__ = ("_lock", "_records")

    def __init__(self) -> None:
        self._records: dict[LedgerKey, _Record] = {}
        self._lock = threading.Lock()

    def claim(self, key: LedgerKey, *, digest: str, invocation_id: str) -> Claim:
        """See :meth:`Ledger.claim`."""
        with self._lock:
            record = self._records.get(key)
            if record is None or (record.phase == "failed" and record.digest == digest):
                # A failure before commit changed nothing; the same call may run again.
                self._records[key] = _Record(digest, invocation_id, "executing")
                return Claimed()
            if record.digest != digest:
                return KeyReused(invocation_id=record.invocation_id)
            if record.phase == "committed" and record.result is not None:
                return Replay(invocation_id=record.invocation_id, result=record.result)
            return InFlight(invocation_id=record.invocation_id, phase=record.phase)

    def settle(self, key: LedgerKey, *, invocation_id: str, phase: Phase, result: Result) -> None:
        """See :meth:`Ledger.settle`."""
        with self._lock:
            record = self._records.get(key)
            if record is None or record.invocation_id != invocation_id:
                msg = f"invocation {invocation_id} does not hold {key}"
                raise LookupError(msg)
            record.phase = phase
            record.result = result
