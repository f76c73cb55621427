"""Shared fixtures: a fixed clock and a runtime harness."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from harness import Harness
from toolbound import FixedClock

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(datetime(2026, 7, 19, 6, 0, tzinfo=UTC))


@pytest.fixture
def harness(clock: FixedClock) -> Iterator[Harness]:
    h = Harness(clock)
    yield h
    h.close()
