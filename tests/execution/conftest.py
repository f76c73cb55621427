"""Fixtures for execution tests: the loopback shop."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from shop import Shop, serve_shop

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def shop() -> Iterator[Shop]:
    with serve_shop() as state:
        yield state
