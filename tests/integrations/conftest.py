from __future__ import annotations

import asyncio
import warnings

import pytest


@pytest.fixture(autouse=True)
def _close_the_loop_sync_runners_leave():
    """Close the event loop a framework's sync runner set and left open.

    ``Agent.run_sync`` (Pydantic AI) creates an event loop, sets it as the thread's
    current loop and never closes it; a later ``asyncio.run`` drops it unclosed and
    its ResourceWarning surfaces in whatever test runs then.
    """
    yield
    policy = asyncio.get_event_loop_policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = policy.get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running():
        loop.close()
    policy.set_event_loop(None)
