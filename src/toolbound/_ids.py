"""The ids a call is given when its caller did not fix them.

Invocation and trace ids are random, 128 bits each (a trace id's low bits feed
samplers, so they must not count, and an invocation id must not be guessable
from another). Both come from one read of the OS's random source.
"""

from __future__ import annotations

import os

__all__ = ["call_ids"]


def call_ids() -> tuple[str, str]:
    """A fresh invocation id and trace id (32 hex digits each)."""
    both = os.urandom(32).hex()
    return both[:32], both[32:]
