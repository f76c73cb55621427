"""A caller's bearer token, checked without blocking the event loop.

An API key is a hash look-up, checked where it arrives. A JWT may need its issuer's
keys (JWKS over the network): an issuer that answers slowly or never makes that
request wait, never the loop, so no other caller stalls on it. The check then runs
on the runtime's I/O pool (:meth:`~toolbound.Runtime.off_loop`), the one that also
carries the ledger's work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from toolbound.identity import may_fetch

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound.pipeline.runtime import Runtime

__all__ = ["off_loop_if_fetching"]

_T = TypeVar("_T")


async def off_loop_if_fetching(
    runtime: Runtime, authenticate: Callable[[str], _T], token: str
) -> _T:
    """``authenticate(token)``; on the runtime's I/O pool when it may fetch an issuer's keys."""
    if may_fetch(token):
        return await runtime.off_loop(authenticate, token)
    return authenticate(token)
