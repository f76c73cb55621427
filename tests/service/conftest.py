from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from service_config import config_text
from service_pack import EFFECTS_ENV
from starlette.testclient import TestClient

from toolbound._loopguard import ENV as LOOP_GUARD_ENV
from toolbound._loopguard import set_loop_guard
from toolbound.config import parse_config
from toolbound.service.api import create_app
from toolbound.service.core import Service

if TYPE_CHECKING:
    from collections.abc import Iterator


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


@pytest.fixture
def service(tmp_path, effects_path, monkeypatch) -> Iterator[Service]:
    """The service on a SQLite file in the test's folder; a test file may define its own."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db"))
    svc = Service(parse_config(path.read_text(), source=path))
    yield svc
    svc.close()


@pytest.fixture
def client(service: Service) -> Iterator[TestClient]:
    """The service's API in process (ASGI)."""
    with TestClient(create_app(service)) as c:
        yield c
