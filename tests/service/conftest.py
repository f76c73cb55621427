from __future__ import annotations

import pytest
from service_pack import EFFECTS_ENV


@pytest.fixture
def effects_path(tmp_path, monkeypatch):
    path = tmp_path / "effects.txt"
    monkeypatch.setenv(EFFECTS_ENV, str(path))
    return path
