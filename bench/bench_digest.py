"""Canonical JSON + digest (R5), per call, beside a same-run json.dumps + SHA-256 baseline.

Every call pays for ``canonical_json`` and ``digest`` on its hot path. The baseline
is what a non-canonical shortcut would cost: ``json.dumps(sort_keys=True)`` and one
SHA-256. ``rfc8785`` is the same digest with the pure-Python canonicalizer doing all
the work (no json-module fast path); ``medium+2.0s`` carries integral floats, which
take that slow path in ``canonical_json`` too.
"""

from __future__ import annotations

import hashlib
import json
import timeit
from functools import partial
from typing import TYPE_CHECKING

import rfc8785

from toolbound.gates.normalize import canonical_json, digest

if TYPE_CHECKING:
    from collections.abc import Callable

SMALL = {
    "title": "Standup",
    "date": "2026-07-20",
    "attendees": ["mira@example.com", "leo@example.com"],
    "duration_minutes": 30,
    "remind": True,
}
MEDIUM = {
    "order_id": "ord_8f14e45f",
    "items": [
        {"sku": f"SKU-{i:04d}", "quantity": i % 5 + 1, "gift": i % 3 == 0, "tags": ["a", "b"]}
        for i in range(20)
    ],
    "address": {"street": "1 Main St", "city": "Zürich", "postcode": "8001", "country": "CH"},
    "note": "leave at the door — 谢谢",
}
LARGE = {
    "rows": [
        {
            "id": i,
            "name": f"row {i}",
            "active": i % 2 == 0,
            "scores": list(range(10)),
            "meta": {"owner": "mira", "parent": None},
        }
        for i in range(500)
    ]
}
# Non-integral floats in 1e-4..1e16 stay on the fast path; integral ones ("2.0"
# parses as a float) need ES6 formatting, which sends the whole value to rfc8785.
MEDIUM_DECIMALS = {**MEDIUM, "total": 129.95, "weights": [0.25 + i for i in range(20)]}
MEDIUM_FLOATS = {**MEDIUM, "total": 130.0, "weights": [float(i) for i in range(20)]}
CASES = {
    "small": SMALL,
    "medium": MEDIUM,
    "large": LARGE,
    "medium+0.25s": MEDIUM_DECIMALS,
    "medium+2.0s": MEDIUM_FLOATS,
}


def ours(value: dict[str, object]) -> str:
    """The pipeline's work: canonicalize, then digest."""
    return digest(
        tenant="acme",
        tool_name="create_event",
        tool_version="1.0.0",
        canonical=canonical_json(value),  # type: ignore[arg-type]
    )


def rfc8785_only(value: dict[str, object]) -> str:
    """The same digest with rfc8785 doing all the serializing."""
    return digest(
        tenant="acme",
        tool_name="create_event",
        tool_version="1.0.0",
        canonical=rfc8785.dumps(value),  # type: ignore[arg-type]
    )


def baseline(value: dict[str, object]) -> str:
    """A non-canonical shortcut: sorted json.dumps and one SHA-256."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()


def digest_only(_value: dict[str, object], *, canonical: bytes) -> str:
    """Only the digest, over bytes already canonical."""
    return digest(
        tenant="acme", tool_name="create_event", tool_version="1.0.0", canonical=canonical
    )


def per_call_us(func: Callable[[dict[str, object]], str], value: dict[str, object]) -> float:
    """Best of five runs, in microseconds per call."""
    timer = timeit.Timer(lambda: func(value))
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=5, number=number)) / number * 1e6


def main() -> None:
    """Print µs/call for each case and the ratios to the baseline."""
    header = f"{'case':<14}{'bytes':>8}{'ours':>11}{'rfc8785':>11}{'baseline':>11}"
    print(header + f"{'ours/base':>11}{'rfc/base':>10}{'digest':>9}")
    for name, value in CASES.items():
        size = len(canonical_json(value))  # type: ignore[arg-type]
        t_ours = per_call_us(ours, value)
        t_rfc = per_call_us(rfc8785_only, value)
        t_base = per_call_us(baseline, value)
        canonical = canonical_json(value)  # type: ignore[arg-type]
        t_digest = per_call_us(partial(digest_only, canonical=canonical), value)
        print(
            f"{name:<14}{size:>8}{t_ours:>9.1f}us{t_rfc:>9.1f}us{t_base:>9.1f}us"
            f"{t_ours / t_base:>10.2f}x{t_rfc / t_base:>9.2f}x{t_digest:>7.2f}us"
        )


if __name__ == "__main__":
    main()
