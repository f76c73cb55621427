from __future__ import annotations

import pytest
from service_pack import EFFECTS_ENV

from toolbound._loopguard import ENV as LOOP_GUARD_ENV
from toolbound._loopguard import set_loop_guard


@pytest.fixture(autouse=True)
def no_blocking_on_the_loop(monkeypatch):
    """Every service test fails if a store or identity call blocks an event loop's thread.

    Servers the tests start as subprocesses inherit the switch from the environment.
    """
    monkeypatch.setenv(LOOP_GUARD_ENV, "1")
    set_loop_guard(True)
    yield
    set_loop_guard(False)


@pytest.fixture
def effects_path(tmp_path, monkeypatch):
    path = tmp_path / "effects.txt"
    monkeypatch.setenv(EFFECTS_ENV, str(path))
    return path
