"""Clocks.

Everything that reads time takes a :class:`Clock`, so tests and normalizers can pin
it (R5: relative dates resolve against a fixed reference).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FixedClock", "SystemClock"]


class Clock(Protocol):
    """Wall time for records, monotonic time for deadlines."""

    def now(self) -> datetime:
        """The current instant, timezone-aware."""
        ...

    def time(self) -> float:
        """The current instant as POSIX seconds (cheap; for trace events)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for deadlines)."""
        ...


class SystemClock:
    """The machine's clocks."""

    __slots__ = ()

    def now(self) -> datetime:
        """The current instant in UTC."""
        return datetime.now(UTC)

    def time(self) -> float:
        """``time.time()``."""
        return time.time()

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()


@dataclass(slots=True)
class FixedClock:
    """A clock that moves only when told to: for tests and reproducible demos."""

    at: datetime
    _mono: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            msg = "FixedClock needs a timezone-aware datetime"
            raise ValueError(msg)

    def now(self) -> datetime:
        """The pinned instant."""
        return self.at

    def time(self) -> float:
        """The pinned instant as POSIX seconds."""
        return self.at.timestamp()

    def monotonic(self) -> float:
        """Seconds advanced since creation."""
        return self._mono

    def advance(self, seconds: float) -> None:
        """Move both clocks forward."""
        self.at += timedelta(seconds=seconds)
        self._mono += seconds
