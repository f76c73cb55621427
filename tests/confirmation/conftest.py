"""Every case of the confirmation suite runs once per surface."""

from __future__ import annotations

import pytest
from desk_surfaces import SURFACES


@pytest.fixture(params=sorted(SURFACES))
def surface(request, tmp_path, clock):
    """A fresh surface with nothing parked, on the suite's fixed clock."""
    opened = SURFACES[request.param](tmp_path, clock)
    yield opened
    opened.close()
