"""The configuration's API keys, found by their SHA-256: one hash a request.

``ServiceConfig.principal_for`` hashes the key once for every ``[[principal]]`` it
tries; a service answering many requests looks the key's digest up instead. The
principals are the configuration's, read once as the service starts: a key is
revoked by removing its principal and restarting (or rolling) the replicas, which
builds the table again (see the rotation steps in docs/service.md).
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from toolbound.identity import hash_key

if TYPE_CHECKING:
    from collections.abc import Iterable

    from toolbound.identity import Principal

__all__ = ["ApiKeys"]


class ApiKeys:
    """Principals by the SHA-256 of their API key; of two with one key, the first."""

    def __init__(self, principals: Iterable[Principal]) -> None:
        self._by_digest: dict[str, Principal] = {}
        for principal in principals:
            if principal.key_sha256:
                self._by_digest.setdefault(principal.key_sha256, principal)

    def principal(self, key: str) -> Principal | None:
        """The principal whose API key ``key`` is, if any (as ``principal_for`` finds it)."""
        digest = hash_key(key)
        found = self._by_digest.get(digest)
        # The table finds the entry; the comparison that admits it is constant-time.
        if found is None or not hmac.compare_digest(digest, found.key_sha256):
            return None
        return found
