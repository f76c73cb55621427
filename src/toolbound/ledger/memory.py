"""The ledger in a dict: for tests and single-process use (R19)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from toolbound.ledger.rules import check_advance, decide_claim, swept, taken_over
from toolbound.ledger.store import Claimed

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from datetime import datetime

    from toolbound._model import Result
    from toolbound.ledger.store import (
        Claim,
        ExpiredPolicy,
        Intent,
        LedgerKey,
        LedgerRecord,
        Phase,
    )

__all__ = ["MemoryLedger"]


class MemoryLedger:
    """A :class:`~toolbound.ledger.store.Ledger` kept in memory. Thread-safe.

    :meth:`atomic` holds the ledger's lock for the transaction and restores the
    records if the block raises, so business writes kept in Python objects can
    mirror the SQL stores' all-or-nothing behaviour in tests.
    """

    def __init__(
        self, *, retention: timedelta = timedelta(days=1), expired: ExpiredPolicy = "reject"
    ) -> None:
        self.retention = retention
        self.expired: ExpiredPolicy = expired
        self._records: dict[LedgerKey, LedgerRecord] = {}
        self._undo: dict[LedgerKey, LedgerRecord | None] | None = None
        self._lock = threading.RLock()

    def _put(self, key: LedgerKey, record: LedgerRecord) -> None:
        if self._undo is not None:
            self._undo.setdefault(key, self._records.get(key))
        self._records[key] = record

    def claim(self, intent: Intent, *, now: datetime) -> Claim:
        """See :meth:`Ledger.claim`."""
        with self._lock:
            decision = decide_claim(
                intent,
                self._records.get(intent.key),
                now=now,
                retention=self.retention,
                expired=self.expired,
            )
            if decision.write is not None:
                self._put(intent.key, decision.write)
            return decision.answer

    def claim_executing(self, intent: Intent, *, now: datetime) -> Claim:
        """See :meth:`Ledger.claim_executing`: :meth:`claim`, then 'executing', under one lock.

        In memory there is no commit to save, so this composes the two operations: a
        subclass that overrides :meth:`claim` or :meth:`advance` (a test injecting
        faults) sees both. Other threads never see the record in between.
        """
        with self._lock:
            answer = self.claim(intent, now=now)
            if isinstance(answer, Claimed):
                self.advance(
                    intent.key,
                    invocation_id=intent.invocation_id,
                    phase="executing",
                    now=now,
                    epoch=answer.epoch,
                )
            return answer

    def advance(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None = None,
        evidence: Mapping[str, object] | None = None,
        epoch: int | None = None,
    ) -> None:
        """See :meth:`Ledger.advance`."""
        with self._lock:
            record = self._records.get(key)
            check_advance(
                key,
                invocation_id=invocation_id,
                target=phase,
                holder=None if record is None else record.invocation_id,
                current=None if record is None else record.phase,
                epoch=epoch,
                held=None if record is None else record.epoch,
            )
            assert record is not None  # noqa: S101 - check_advance refuses a missing record
            self._put(
                key,
                replace(
                    record,
                    phase=phase,
                    updated_at=now,
                    result=result if result is not None else record.result,
                    evidence=record.evidence if evidence is None else (*record.evidence, evidence),
                ),
            )

    def take_over(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        now: datetime,
        evidence: Mapping[str, object] | None = None,
    ) -> LedgerRecord:
        """See :meth:`Ledger.take_over`."""
        with self._lock:
            record = taken_over(
                self._records.get(key),
                key,
                invocation_id=invocation_id,
                now=now,
                evidence=evidence,
            )
            self._put(key, record)
            return record

    def get(self, key: LedgerKey) -> LedgerRecord | None:
        """See :meth:`Ledger.get`."""
        with self._lock:
            return self._records.get(key)

    def find(self, invocation_id: str) -> LedgerRecord | None:
        """See :meth:`Ledger.find`."""
        with self._lock:
            return next(
                (r for r in self._records.values() if r.invocation_id == invocation_id), None
            )

    def unresolved(self) -> list[LedgerRecord]:
        """See :meth:`Ledger.unresolved`."""
        with self._lock:
            found = [r for r in self._records.values() if r.phase == "unknown"]
        return sorted(found, key=lambda r: r.created_at)

    def sweep(self, *, now: datetime, grace: timedelta) -> list[LedgerRecord]:
        """See :meth:`Ledger.sweep`."""
        changed: list[LedgerRecord] = []
        with self._lock:
            for key, record in list(self._records.items()):
                new = swept(record, now=now, grace=grace)
                if new is not None:
                    self._put(key, new)
                    changed.append(new)
        return changed

    @contextmanager
    def atomic(self) -> Iterator[_MemoryTransaction]:
        """See :meth:`Ledger.atomic`."""
        with self._lock:
            # An undo log of the keys the transaction touches: rolling back costs
            # what the transaction wrote, not a copy of every record.
            outer, self._undo = self._undo, {}
            try:
                yield _MemoryTransaction(self)
            except BaseException:
                for key, before in self._undo.items():
                    if before is None:
                        self._records.pop(key, None)
                    else:
                        self._records[key] = before
                raise
            finally:
                if outer is not None:
                    for key, before in self._undo.items():
                        outer.setdefault(key, before)
                self._undo = outer

    def close(self) -> None:
        """Nothing to release."""


class _MemoryTransaction:
    __slots__ = ("_ledger",)

    def __init__(self, ledger: MemoryLedger) -> None:
        self._ledger = ledger

    @property
    def connection(self) -> object:
        return None

    def claim(self, intent: Intent, *, now: datetime) -> Claim:
        return self._ledger.claim(intent, now=now)

    def advance(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None = None,
        evidence: Mapping[str, object] | None = None,
        epoch: int | None = None,
    ) -> None:
        self._ledger.advance(
            key,
            invocation_id=invocation_id,
            phase=phase,
            now=now,
            result=result,
            evidence=evidence,
            epoch=epoch,
        )
