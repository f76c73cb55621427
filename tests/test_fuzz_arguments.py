"""Fuzzing the whole admission path with argument bytes (R3 to R6, STYLE 5).

Random and mutated argument bytes go through ``Runtime.run`` over the example packs
(orders, calendar, weather, files, payments), seeded from valid arguments of their
tools: truncation, random bytes inserted or replaced, duplicate keys, deep nesting,
huge and tiny numbers, invalid UTF-8, lone surrogates, NaN, byte order marks, wrong
types, extra fields, trailing data, other tools' arguments. Every input must end in
a typed outcome, never an exception; every rejection carries a catalogued code (or
one the example tool itself chose); what goes back to the model is valid JSON.

A few thousand inputs run in the normal suite; ``pytest -m long`` runs 10**5. The
generator is seeded, so a failure names an input that reproduces.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, get_args

import pytest

from toolbound import CallContext, FixedClock, Proposal, Registry, Runtime, Subject
from toolbound._outcome import (
    AwaitingConfirmation,
    Cancelled,
    Failed,
    Observed,
    Outcome,
    OutcomeUnknown,
    Rejected,
)
from toolbound.gates.authorize import Grant, GrantPolicy, IdScope, OwnerScope, PathScope
from toolbound.gates.normalize import canonical_json
from toolbound.gates.parse import _Code as ParseCode
from toolbound.packs import calendar, files, orders, payments, weather
from toolbound.problems import CATALOGUE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from toolbound._clock import Clock

MIRA = Subject(id="mira", tenant="acme", session="s-1")
SEED = 20260719
QUICK = 5_000
# The budget is ~10 s; the limit leaves room for a machine shared with other work.
QUICK_LIMIT = 30.0
LONG = 100_000
# A runtime is rebuilt this often, so that ledgers and pending calls stay small.
PER_RUNTIME = 5_000

OUTCOMES = (Observed, Rejected, AwaitingConfirmation, Failed, OutcomeUnknown, Cancelled)
PARSE_CODES = frozenset(get_args(ParseCode))
# Codes the example tools choose for themselves (toolbound.problems: "Codes that are
# not toolbound's"); a rejection or failure may carry these too.
PACK_CODES = frozenset(
    {"not_found", "version_conflict", "ends_after_midnight", "outside_workspace"}
)

# Valid arguments for each tool: the seeds every mutation starts from.
SEEDS: dict[str, tuple[bytes, ...]] = {
    "get_order": (b'{"order_id":"A-104"}', b'{"order_id":"B-205"}'),
    "weather.forecast": (
        b'{"city":"Shanghai","date":"2026-07-20"}',
        b'{"city":"\xe4\xb8\x8a\xe6\xb5\xb7","date":"2026-07-21"}',
    ),
    "calendar.create_event": (
        b'{"calendar_id":"work","title":"Design review","date":"tomorrow","start":"09:00"}',
        (
            b'{"calendar_id":"work","title":"1:1","date":"2026-07-22","start":"23:00",'
            b'"duration_minutes":45}'
        ),
    ),
    "calendar.update_event": (
        b'{"calendar_id":"work","event_id":"evt-1","expected_version":1,"title":"Moved"}',
        b'{"calendar_id":"work","event_id":"evt-1","expected_version":1.0,"date":"friday"}',
    ),
    "payments.send": (b'{"amount": 4200, "to": "leo"}', b'{"amount":90000,"to":"landlord"}'),
    "read_file": (b'{"path":"notes.txt"}', b'{"path":"escape.txt"}'),
}
TOOLS = (*SEEDS, "cancel_order")  # and one the model invents


# --- the world the calls run in ------------------------------------------------------


def grants(workspace: Path) -> list[Grant]:
    """Enough authority for every pack tool to execute, so fuzzing reaches execution."""
    return [
        Grant(
            subject="mira",
            tenant="acme",
            capability="orders:read",
            actions=frozenset({"read"}),
            scope=OwnerScope(),
        ),
        Grant(
            subject="mira", tenant="acme", capability="weather:read", actions=frozenset({"read"})
        ),
        Grant(
            subject="mira",
            tenant="acme",
            capability="calendar:write",
            actions=frozenset({"create", "modify"}),
            scope=IdScope(frozenset({"work"})),
        ),
        Grant(
            subject="mira",
            tenant="acme",
            capability="files:read",
            actions=frozenset({"read"}),
            scope=PathScope(workspace),
        ),
        Grant(
            subject="mira",
            tenant="acme",
            capability="payments:send",
            actions=frozenset({"create"}),
            scope=IdScope(frozenset({"leo", "landlord"})),
        ),
    ]


class World:
    """A runtime over all five packs, and the context of one subject."""

    def __init__(self, workspace: Path, clock: Clock) -> None:
        registry = Registry()
        self.calendar = calendar.CalendarBackend()
        self.calendar.create(
            {"calendar_id": "work", "title": "Standup", "date": "2026-07-20", "start": "09:00"}
        )
        orders.register(registry, orders.OrdersBackend())
        calendar.register(registry, self.calendar)
        weather.register(registry)
        files.register(registry, workspace)
        payments.register(registry, payments.PaymentsBackend())
        self.runtime = Runtime(policy=GrantPolicy(grants(workspace)), clock=clock)
        self.context = CallContext(
            subject=MIRA, tools=registry.toolset(), timezone="Asia/Shanghai", timeout=5.0
        )

    def run(self, name: str, data: bytes, call_id: str) -> Outcome:
        return self.runtime.run(
            Proposal(name=name, arguments=data, proposal_id=call_id), self.context
        )


# --- the inputs ----------------------------------------------------------------------

STRANGE_NUMBERS = (
    *b"""1e400 -1e400 1e-400 -1e-400 0e-400 -0.0 -0 1.0 2e2 1.5 5e-324 1.7976931348623157e308
    9007199254740993 1e20 1E+2 00 01 1. .5 +1 0x10 1e NaN Infinity -Infinity nan inf""".split(),
    b"9" * 5000,
    b"-" + b"9" * 4300,
    b"0." + b"0" * 400 + b"1",
)
STRANGE_STRINGS = (
    b'"\\ud800"',
    b'"\\udc00\\ud800"',
    b'"\\ud83d\\ude00"',
    b'"\\ud83d"',
    b'"\\u0000"',
    b'"\xed\xa0\x80"',
    b'"\xf0\x9f\x98"',
    b'"\xc0\xaf"',
    b'"\xff"',
    b'"\xef\xbb\xbf"',
    b'"\\x41"',
    b'"\\u12"',
    b'"\t"',
    b'"' + b"a" * 5000 + b'"',
    b'"\xe2\x80\xae"',
    b'"../../etc/passwd"',
    b'"/etc/passwd"',
    b'"escape.txt"',
    b'"tomorrow"',
    b'"2026-02-30"',
    b'"23:59"',
    b'"work"',
    b'"home"',
    b'"evt-1"',
    b'"leo"',
    b'"A-104"',
)
OTHER_VALUES = tuple(
    b"""null true false [] {} [1,2,3] {"a":1} {"a":1,"a":2} 0 1 -1 480 481 4 1000000
    1000001""".split()
)
VALUES = STRANGE_NUMBERS + STRANGE_STRINGS + OTHER_VALUES
INSERTS = (
    b"\xef\xbb\xbf",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\\",
    b'"',
    b",",
    b":",
    b"{",
    b"}",
    b"[",
    b"]",
    b" ",
    b"\n",
    b"\\u",
    b"\\ud800",
    b"NaN",
    b"//",
    b"/*",
    b"\x7f",
)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def insert_random(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    roll = rng.random()
    if roll < 0.3:
        junk = rng.randbytes(rng.randint(1, 8))
    elif roll < 0.6:
        junk = bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randint(1, 8)))
    else:
        junk = rng.choice(INSERTS)
    return data[:at] + junk + data[at:]


def replace_byte(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    at = rng.randrange(len(data))
    return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]


def delete_span(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + data[at + rng.randint(1, 6) :]


def members(data: bytes) -> list[tuple[str, bytes]] | None:
    """The top-level members of a document, their values as JSON bytes, if it parses."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    return [(key, json.dumps(item).encode()) for key, item in value.items()]


def assemble(pairs: list[tuple[str, bytes]]) -> bytes:
    return b"{" + b",".join(json.dumps(k).encode() + b":" + v for k, v in pairs) + b"}"


def duplicate_key(rng: random.Random, data: bytes) -> bytes:
    pairs = members(data)
    if not pairs:
        return data
    key, _ = rng.choice(pairs)
    pairs.insert(rng.randrange(len(pairs) + 1), (key, rng.choice(VALUES)))
    return assemble(pairs)


def replace_value(rng: random.Random, data: bytes) -> bytes:
    pairs = members(data)
    if not pairs:
        return data
    at = rng.randrange(len(pairs))
    pairs[at] = (pairs[at][0], rng.choice(VALUES))
    return assemble(pairs)


def extra_field(rng: random.Random, data: bytes) -> bytes:
    pairs = members(data) or []
    name = rng.choice(("principal", "role", "instruction", "", "\u0000", "a" * 300))
    pairs.append((name, rng.choice(VALUES)))
    return assemble(pairs)


def drop_field(rng: random.Random, data: bytes) -> bytes:
    pairs = members(data)
    if not pairs:
        return data
    pairs.pop(rng.randrange(len(pairs)))
    return assemble(pairs)


def nest(rng: random.Random, data: bytes) -> bytes:
    pairs = members(data)
    if not pairs:
        return data
    depth = rng.choice((1, 2, 30, 63, 64, 65, 200, 5000))
    opener, closer = (b"[", b"]") if rng.random() < 0.5 else (b'{"k":', b"}")
    at = rng.randrange(len(pairs))
    pairs[at] = (pairs[at][0], opener * depth + pairs[at][1] + closer * depth)
    return assemble(pairs)


def reframe(rng: random.Random, data: bytes) -> bytes:
    """Change what surrounds the object: BOM, whitespace, wrappers, trailing data."""
    return rng.choice(
        (
            b"\xef\xbb\xbf" + data,
            b" \r\n\t" + data + b"\n",
            b" \xef\xbb\xbf" + data,
            b"[" + data + b"]",
            data + data,
            data + b" x",
            b'"' + data.replace(b'"', b'\\"') + b'"',
            data.decode("utf-8", "replace").encode("utf-16"),
            b"",
            b"   ",
            b"null",
            data * 40_000 if rng.random() < 0.01 else data,  # over the 1 MiB limit
        )
    )


def random_document(rng: random.Random, _data: bytes) -> bytes:
    """A random object of random JSON values, not tied to any schema."""

    def value(depth: int) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.5:
            return rng.choice(
                (
                    None,
                    True,
                    False,
                    rng.randint(-(2**60), 2**60),
                    rng.uniform(-1e6, 1e6),
                    rng.random(),
                    "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(5)),
                )
            )
        if roll < 0.75:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {str(rng.randint(0, 9)): value(depth + 1) for _ in range(rng.randint(0, 3))}

    return json.dumps(
        {
            k: value(0)
            for k in rng.sample(
                ("order_id", "city", "date", "amount", "to", "path", "title", "start", "x"), 3
            )
        }
    ).encode()


def random_bytes(rng: random.Random, _data: bytes) -> bytes:
    return rng.randbytes(rng.randint(0, 64))


MUTATIONS: tuple[Callable[[random.Random, bytes], bytes], ...] = (
    truncate,
    insert_random,
    replace_byte,
    delete_span,
    duplicate_key,
    replace_value,
    replace_value,
    extra_field,
    drop_field,
    nest,
    reframe,
    random_document,
    random_bytes,
)


def inputs(seed: int, count: int) -> Iterator[tuple[str, bytes]]:
    """``count`` (tool name, argument bytes) pairs, the same for the same seed."""
    rng = random.Random(seed)  # noqa: S311 - seeded on purpose: inputs replay
    for _ in range(count):
        name = rng.choice(TOOLS)
        data = rng.choice(
            SEEDS[rng.choice(tuple(SEEDS))]
            if rng.random() < 0.1 or name not in SEEDS
            else SEEDS[name]
        )
        for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
            data = rng.choice(MUTATIONS)(rng, data)
        yield name, data


# --- the checks ----------------------------------------------------------------------


def fault(outcome: object) -> str | None:  # noqa: PLR0911 - one return per invariant
    """What is wrong with an outcome, if anything."""
    if not isinstance(outcome, OUTCOMES):
        return f"not a typed outcome: {type(outcome).__name__}"
    try:
        json.loads(outcome.message.content)
    except ValueError as exc:
        return f"the message for the model is not JSON: {exc}"
    invocation = getattr(outcome, "invocation", None)
    if invocation is not None and canonical_json(invocation.arguments) != invocation.canonical:
        return "the invocation's arguments do not give its canonical bytes (R5)"
    if isinstance(outcome, Rejected | Failed | OutcomeUnknown):
        code = outcome.problem.code
        if code not in CATALOGUE and code not in PACK_CODES:
            return f"{outcome.kind} with an uncatalogued code {code!r}"
        if outcome.problem.kind == "parse" and code not in PARSE_CODES:
            return f"a parse rejection with code {code!r}, not one of the parse gate's"
        if code == "tool_error":
            # The gates admitted these arguments, so the pack tool must be able to take
            # them: an unclassified exception means a gate let through what it should not.
            return f"the tool raised on admitted arguments: {outcome.problem.message}"
    return None


def fuzz(workspace: Path, count: int, seed: int = SEED) -> dict[str, int]:
    """Run ``count`` inputs; return how the outcomes fell. Fails on the first fault."""
    tally: dict[str, int] = {}
    world: World | None = None
    for index, (name, data) in enumerate(inputs(seed, count)):
        if index % PER_RUNTIME == 0:
            if world is not None:
                world.runtime.close()
            world = World(workspace, FixedClock(datetime(2026, 7, 19, 6, 0, tzinfo=UTC)))
        assert world is not None
        try:
            outcome = world.run(name, data, f"call_{index}")
        except Exception as exc:  # noqa: BLE001 - the finding is reported, with its input
            pytest.fail(f"input #{index} {name} {data[:300]!r} raised {exc!r}")
        problem = fault(outcome)
        assert problem is None, f"input #{index} {name} {data[:300]!r}: {problem}"
        key = outcome.kind
        if isinstance(outcome, Rejected):
            key = f"rejected:{outcome.problem.code}"
        tally[key] = tally.get(key, 0) + 1
    if world is not None:
        world.runtime.close()
    return tally


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "notes.txt").write_text("A-104: customer asked about delivery.\n")
    (tmp_path / "secret.txt").write_text("not for the model\n")
    (root / "escape.txt").symlink_to(tmp_path / "secret.txt")
    return root


def test_the_generator_is_deterministic():
    """The same seed gives the same inputs, so a failure can be replayed."""
    assert list(inputs(SEED, 200)) == list(inputs(SEED, 200))
    assert list(inputs(SEED, 200)) != list(inputs(SEED + 1, 200))


def test_a_few_thousand_mutated_arguments_all_end_in_typed_outcomes(workspace: Path):
    """Random and mutated argument bytes never raise; each ends typed, with a known code."""
    started = time.perf_counter()
    tally = fuzz(workspace, QUICK)
    elapsed = time.perf_counter() - started
    assert sum(tally.values()) == QUICK
    # The mix reaches every stage: parse, validation, authorization and execution.
    assert tally.get("observed", 0) > 0
    assert any(key.startswith("rejected:") and key[9:] in PARSE_CODES for key in tally)
    assert tally.get("rejected:type", 0) + tally.get("rejected:additional_properties", 0) > 0
    assert elapsed < QUICK_LIMIT


@pytest.mark.long
def test_a_hundred_thousand_mutated_arguments_all_end_in_typed_outcomes(
    workspace: Path, capsys: pytest.CaptureFixture[str]
):
    """The full run (``pytest -m long``): 10**5 inputs, every one a typed outcome."""
    started = time.perf_counter()
    tally = fuzz(workspace, LONG)
    elapsed = time.perf_counter() - started
    assert sum(tally.values()) == LONG
    with capsys.disabled():
        sys.stdout.write(f"\n{LONG} inputs in {elapsed:.1f} s\n")
        for key, count in sorted(tally.items(), key=lambda item: -item[1]):
            sys.stdout.write(f"  {count:7d}  {key}\n")
