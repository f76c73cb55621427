"""Every case of the confirmation suite runs once per surface."""

from __future__ import annotations

import pytest
from desk_surfaces import SURFACES
from framework_surfaces import FRAMEWORKS

EVERY_SURFACE = {**SURFACES, **FRAMEWORKS}


@pytest.fixture(params=sorted(EVERY_SURFACE))
def surface(request, tmp_path, clock):
    """A fresh surface with nothing parked, on the suite's fixed clock."""
    opened = EVERY_SURFACE[request.param](tmp_path, clock)
    yield opened
    opened.close()
