"""A dependency that cannot answer now, as the answer a caller can act on: 503.

A store that is down, unreachable, locked past its busy timeout, out of pooled
connections within ``[store] pool_timeout``, cancelled by ``statement_timeout`` or
out of disk, and an identity provider whose keys cannot be had, each raise a typed
error with a ``storage_*`` (or ``identity_unavailable``) code at its own boundary.
:func:`unavailable` turns them — and an ``OSError`` from a failed write — into one
503 ``application/problem+json`` with ``Retry-After``: the request may be sent again
(with the same Idempotency-Key) once the dependency is back, and nothing about the
failure is a 500.
"""

from __future__ import annotations

from toolbound.adapters.http import ApiError
from toolbound.journal import JournalError
from toolbound.ledger.store import LedgerError

__all__ = ["RETRY_AFTER", "unavailable"]

RETRY_AFTER = 1  # seconds a client is asked to wait before trying again
_STORE_CODES = frozenset({"storage_unavailable", "storage_full"})


def unavailable(exc: BaseException) -> ApiError | None:
    """The 503 problem for a failure of the service's store, or ``None`` if it is none."""
    if isinstance(exc, JournalError | LedgerError) and exc.code in _STORE_CODES:
        code = str(exc.code)
    elif isinstance(exc, OSError):
        # A write the operating system refused (ENOSPC, EIO), below the stores' own errors.
        code = "storage_unavailable"
    else:
        return None
    return ApiError(
        503,
        code,
        "the service's store cannot answer now; nothing was lost that was acknowledged",
        hint="retry shortly with the same Idempotency-Key",
        retry_after=RETRY_AFTER,
    )
