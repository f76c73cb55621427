"""Time the parse gate (R3) against bare ``json.loads`` on the same bytes.

Run: ``.venv/bin/python bench/bench_parse.py``. Prints microseconds per call (best
of several runs) for small, medium and large argument objects and the ratio of the
gate to the same-run baseline, so the figure means the same on any machine.
"""

from __future__ import annotations

import json
import timeit
from functools import partial
from typing import TYPE_CHECKING

from toolbound.gates.parse import parse_arguments

if TYPE_CHECKING:
    from collections.abc import Callable

REPEATS = 7  # best of 7: the minimum is the least disturbed by the rest of the machine
TARGET_SECONDS = 0.05  # per run; each run repeats the call until it takes about this


def _documents() -> dict[str, bytes]:
    small = {"order_id": "A-104", "reason": "damaged", "refund": True}
    medium = {
        "order_id": "A-104",
        "items": [
            {"sku": f"SKU-{i:04d}", "quantity": i % 5 + 1, "price": 12.5 + i, "gift": i % 2 == 0}
            for i in range(24)
        ],
        "note": "Leave at the front desk; call on arrival. " * 4,
    }
    large = {
        "rows": [
            {
                "id": i,
                "name": f"row {i} — café",
                "values": [i, i + 0.25, None, True],
                "meta": {"tags": ["a", "b"], "text": "lorem ipsum " * 4},
            }
            for i in range(1_200)
        ]
    }
    return {
        name: json.dumps(doc, ensure_ascii=False).encode()
        for name, doc in (("small", small), ("medium", medium), ("large", large))
    }


def _best_microseconds(call: Callable[[], object]) -> float:
    timer = timeit.Timer(call)
    number, _ = timer.autorange()
    number = max(1, int(number * TARGET_SECONDS / 0.2))  # autorange aims at 0.2 s
    return min(timer.repeat(repeat=REPEATS, number=number)) / number * 1e6


def main() -> None:
    """Print one row per document: size, gate and baseline time, and their ratio."""
    print(f"{'document':<10}{'bytes':>9}{'parse µs':>12}{'loads µs':>12}{'ratio':>8}")
    for name, data in _documents().items():
        assert parse_arguments(data) == json.loads(data)  # time the same work
        gate = _best_microseconds(partial(parse_arguments, data))
        baseline = _best_microseconds(partial(json.loads, data))
        print(f"{name:<10}{len(data):>9}{gate:>12.2f}{baseline:>12.2f}{gate / baseline:>8.2f}")


if __name__ == "__main__":
    main()
