"""R10: the retry matrix, one test per cell, and the bounds decide() enforces."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbound._clock import FixedClock
from toolbound._model import ToolSpec
from toolbound.execution.retry import (
    ACTIONS,
    FAILURES,
    MATRIX,
    RELIABILITIES,
    AuthFailed,
    BusinessRejection,
    FakeSleeper,
    MaybeCommitted,
    NoResponse,
    NotReached,
    ResponseLost,
    RetryPolicy,
    SystemSleeper,
    Transient,
    backoff_delay,
    classify,
    decide,
    policy_for,
    reliability_of,
    retry_after_of,
)
from toolbound.execution.tool import CommitUnknown, NotCommitted

# R10, restated cell by cell from SPEC.md (not copied from the module under test).
#   columns: read | keyed_write (native key) | queryable_write (query by key) | unkeyed_write
R10 = {
    "parse_schema": ("stop", "stop", "stop", "stop"),
    "authorization_deny": ("stop", "stop", "stop", "stop"),
    "not_reached": ("retry", "retry", "retry", "retry"),
    "transient": ("retry", "retry", "retry", "retry"),
    "maybe_committed": ("retry", "retry", "query", "unknown"),
    "timeout_unknown": ("retry", "retry", "query", "unknown"),
    "auth": ("stop", "stop", "stop", "stop"),
    "business": ("stop", "stop", "stop", "stop"),
}
COLUMNS = ("read", "keyed_write", "queryable_write", "unkeyed_write")
CELLS = [
    pytest.param(failure, column, action, id=f"{failure}-{column}->{action}")
    for failure, row in R10.items()
    for column, action in zip(COLUMNS, row, strict=True)
]


def spec(**overrides) -> ToolSpec:
    """A minimal spec; only effect, idempotency and max_attempts matter here."""
    fields = {
        "name": "t",
        "version": "v1",
        "description": "A test tool.",
        "input_schema": {"type": "object"},
        "effect": "read",
    } | overrides
    return ToolSpec(**fields)


ROOMY = RetryPolicy(max_attempts=3, base_delay=0.1, max_delay=5.0)


def half() -> float:
    return 0.5


def one() -> float:
    return 1.0


def zero() -> float:
    return 0.0


@pytest.mark.parametrize(("failure", "reliability", "expected"), CELLS)
def test_matrix_cell(failure, reliability, expected):
    """Each cell of R10: with attempts and time to spare, decide() takes the table's action."""
    assert MATRIX[failure, reliability] == expected
    decision = decide(
        failure,
        reliability,
        attempt=1,
        policy=ROOMY,
        remaining=30.0,
        retry_after=None,
        rng=half,
    )
    assert decision.action == expected
    if expected == "retry":
        assert decision.delay == 0.05  # half of the first window, base_delay 0.1
    elif expected == "query":
        assert decision.delay == 0.0
    else:
        assert decision.delay is None
    assert failure in decision.reason


def test_matrix_covers_every_cell_once():
    """The table has exactly one valid action for every failure class and key reliability."""
    assert set(MATRIX) == {(f, r) for f in FAILURES for r in RELIABILITIES}
    assert set(MATRIX.values()) <= set(ACTIONS)
    assert len(CELLS) == len(MATRIX) == 32
    with pytest.raises(TypeError):
        MATRIX["auth", "read"] = "retry"  # type: ignore[index]


# -- backoff --------------------------------------------------------------------------


def test_full_jitter_bounds():
    """rng=0 waits nothing, rng=1 waits the whole window, anything between scales linearly."""
    policy = RetryPolicy(base_delay=0.1, max_delay=5.0)
    assert backoff_delay(3, policy, zero) == 0.0
    assert backoff_delay(3, policy, one) == pytest.approx(0.4)
    assert backoff_delay(3, policy, lambda: 0.999999) == pytest.approx(0.4, rel=1e-5)
    assert backoff_delay(3, policy, half) == pytest.approx(0.2)


def test_backoff_grows_exponentially_and_is_capped():
    """The window doubles per attempt from base_delay until max_delay caps it."""
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    windows = [backoff_delay(n, policy, one) for n in range(1, 8)]
    assert windows == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])
    assert backoff_delay(10_000, policy, one) == 1.0  # no float overflow on long runs


def test_backoff_rejects_bad_inputs():
    """Attempt numbers start at 1 and rng must stay within [0, 1]."""
    with pytest.raises(ValueError, match="start at 1"):
        backoff_delay(0, ROOMY, half)
    with pytest.raises(ValueError, match="rng"):
        backoff_delay(1, ROOMY, lambda: 1.5)
    with pytest.raises(ValueError, match="start at 1"):
        decide("transient", "read", attempt=0, policy=ROOMY, remaining=9, retry_after=None, rng=one)


@pytest.mark.parametrize(
    "fields",
    [{"max_attempts": 0}, {"base_delay": -1.0}, {"max_delay": -0.1}, {"min_attempt_time": -1.0}],
    ids=lambda f: next(iter(f)),
)
def test_policy_rejects_nonsense(fields):
    """A policy with no attempts or a negative time is a configuration error."""
    with pytest.raises(ValueError, match="must"):
        RetryPolicy(**fields)


def test_backoff_window_is_cut_to_the_deadline():
    """A large backoff window is cut so the retry still starts with min_attempt_time left."""
    policy = RetryPolicy(max_attempts=5, base_delay=10.0, max_delay=10.0, min_attempt_time=0.05)
    decision = decide(
        "transient", "read", attempt=1, policy=policy, remaining=0.3, retry_after=None, rng=one
    )
    assert decision.action == "retry"
    assert decision.delay == pytest.approx(0.25)


@given(
    attempt=st.integers(min_value=1, max_value=40),
    remaining=st.floats(min_value=-1.0, max_value=20.0, allow_nan=False),
    draw=st.floats(min_value=0.0, max_value=1.0),
    retry_after=st.none() | st.floats(min_value=0.0, max_value=30.0),
    cell=st.sampled_from(sorted(MATRIX)),
)
def test_never_waits_past_the_deadline(attempt, remaining, draw, retry_after, cell):
    """Whatever the draw, a planned retry leaves at least min_attempt_time before the deadline."""
    policy = RetryPolicy(max_attempts=50, base_delay=0.1, max_delay=8.0, min_attempt_time=0.05)
    failure, reliability = cell
    decision = decide(
        failure,
        reliability,
        attempt=attempt,
        policy=policy,
        remaining=remaining,
        retry_after=retry_after,
        rng=lambda: draw,
    )
    if decision.action == "retry":
        assert decision.delay is not None
        assert decision.delay >= 0.0
        assert decision.delay + policy.min_attempt_time <= remaining + 1e-9
        if retry_after is not None:
            assert decision.delay == retry_after
    if decision.action in {"stop", "unknown"}:
        assert decision.delay is None


# -- the seed's worked example (42.4) and Retry-After -----------------------------------


def test_two_attempts_of_point_two_with_point_zero_five_backoff_fit_one_second():
    """Seed 42.4: max 2 attempts of 0.2 s with 0.05 s backoff take 0.45 s of a 1 s budget."""
    clock = FixedClock(datetime(2026, 7, 19, 6, 0, tzinfo=UTC))
    sleeper = FakeSleeper(clock=clock)
    policy = RetryPolicy(max_attempts=2, base_delay=0.05, max_delay=0.05, min_attempt_time=0.2)
    deadline = clock.monotonic() + 1.0
    attempts = 0
    decision = None
    while True:
        attempts += 1
        clock.advance(0.2)  # the attempt times out after its 0.2 s cap
        decision = decide(
            "timeout_unknown",
            "read",
            attempt=attempts,
            policy=policy,
            remaining=deadline - clock.monotonic(),
            retry_after=None,
            rng=one,
        )
        if decision.action != "retry":
            break
        assert decision.delay is not None
        sleeper.sleep(decision.delay)
    assert attempts == 2
    assert sleeper.slept == [pytest.approx(0.05)]
    assert clock.monotonic() == pytest.approx(0.45)
    assert clock.monotonic() <= 1.0
    assert decision.action == "stop"
    assert "attempt 2 of 2 was the last" in decision.reason


def test_retry_after_that_fits_is_honoured_exactly():
    """A Retry-After that fits in the time left is the delay, with no jitter added."""
    decision = decide(
        "transient", "keyed_write", attempt=1, policy=ROOMY, remaining=3.0, retry_after=1.0, rng=one
    )
    assert decision.action == "retry"
    assert decision.delay == 1.0
    assert "Retry-After" in decision.reason


def test_retry_after_one_second_with_insufficient_time_stops():
    """Seed 42.4: Retry-After 1 with 0.55 s left stops instead of waiting past the deadline."""
    decision = decide(
        "transient", "read", attempt=1, policy=ROOMY, remaining=0.55, retry_after=1.0, rng=zero
    )
    assert decision.action == "stop"
    assert decision.delay is None
    assert "Retry-After 1s does not fit" in decision.reason


def test_retry_after_beyond_max_delay_is_still_honoured_within_the_deadline():
    """max_delay caps our own backoff, not the server's instruction, as long as it fits."""
    policy = RetryPolicy(max_attempts=3, base_delay=0.1, max_delay=0.5)
    decision = decide(
        "transient", "read", attempt=1, policy=policy, remaining=9.0, retry_after=2.0, rng=one
    )
    assert (decision.action, decision.delay) == ("retry", 2.0)


# -- attempt counting and fallbacks ---------------------------------------------------


def test_max_attempts_counts_the_first_attempt():
    """max_attempts=2 is the first try and one retry; max_attempts=1 never retries."""
    two = RetryPolicy(max_attempts=2)
    first = decide(
        "not_reached", "read", attempt=1, policy=two, remaining=9, retry_after=None, rng=one
    )
    second = decide(
        "not_reached", "read", attempt=2, policy=two, remaining=9, retry_after=None, rng=one
    )
    only = decide(
        "not_reached",
        "read",
        attempt=1,
        policy=RetryPolicy(max_attempts=1),
        remaining=9,
        retry_after=None,
        rng=one,
    )
    assert (first.action, second.action, only.action) == ("retry", "stop", "stop")


@pytest.mark.parametrize("failure", ["timeout_unknown", "maybe_committed"])
def test_keyed_write_that_may_have_committed_ends_unknown_when_out_of_attempts(failure):
    """R9: a keyed write whose retry cannot happen is UNKNOWN, never 'not executed'."""
    policy = RetryPolicy(max_attempts=2)
    decision = decide(
        failure, "keyed_write", attempt=2, policy=policy, remaining=9, retry_after=None, rng=one
    )
    assert decision.action == "unknown"


@pytest.mark.parametrize("reliability", ["keyed_write", "queryable_write"])
def test_write_that_may_have_committed_ends_unknown_when_out_of_time(reliability):
    """With no time left for a retry or a query, a possibly committed write is UNKNOWN."""
    decision = decide(
        "timeout_unknown",
        reliability,
        attempt=1,
        policy=ROOMY,
        remaining=0.01,
        retry_after=None,
        rng=one,
    )
    assert decision.action == "unknown"


def test_read_out_of_time_just_stops():
    """A read has nothing to reconcile: without time left it stops."""
    decision = decide(
        "timeout_unknown", "read", attempt=1, policy=ROOMY, remaining=0.0, retry_after=None, rng=one
    )
    assert decision.action == "stop"


def test_not_reached_write_out_of_attempts_stops_not_unknown():
    """A write that provably never arrived stops: nothing happened, nothing to reconcile."""
    decision = decide(
        "not_reached",
        "unkeyed_write",
        attempt=3,
        policy=ROOMY,
        remaining=9.0,
        retry_after=None,
        rng=one,
    )
    assert decision.action == "stop"


def test_query_does_not_consume_an_attempt():
    """A query-by-key write is asked about even after its last execution attempt."""
    decision = decide(
        "timeout_unknown",
        "queryable_write",
        attempt=ROOMY.max_attempts,
        policy=ROOMY,
        remaining=1.0,
        retry_after=None,
        rng=one,
    )
    assert (decision.action, decision.delay) == ("query", 0.0)


def test_query_answer_not_found_turns_into_a_retry_as_not_reached():
    """After a query finds no trace of the key, deciding again as not_reached retries."""
    decision = decide(
        "not_reached",
        "queryable_write",
        attempt=1,
        policy=ROOMY,
        remaining=5.0,
        retry_after=None,
        rng=half,
    )
    assert decision.action == "retry"


# -- classification and the signals ----------------------------------------------------


SIGNALS = [
    pytest.param(NotReached("refused"), "not_reached", id="NotReached"),
    pytest.param(Transient("busy", status=429, retry_after=2.0), "transient", id="Transient"),
    pytest.param(AuthFailed("no", status=401), "auth", id="AuthFailed"),
    pytest.param(BusinessRejection("bad qty", status=422), "business", id="BusinessRejection"),
    pytest.param(NoResponse("late"), "timeout_unknown", id="NoResponse"),
    pytest.param(ResponseLost("lost"), "timeout_unknown", id="ResponseLost"),
    pytest.param(MaybeCommitted("500", status=500), "maybe_committed", id="MaybeCommitted"),
    pytest.param(CommitUnknown("?"), "timeout_unknown", id="CommitUnknown"),
    pytest.param(NotCommitted("no"), None, id="bare-NotCommitted"),
    pytest.param(ValueError("boom"), None, id="ValueError"),
    pytest.param(TimeoutError(), None, id="TimeoutError"),
]


@pytest.mark.parametrize(("exc", "expected"), SIGNALS)
def test_classify(exc, expected):
    """Typed signals map to their failure class; unclassified exceptions give None."""
    assert classify(exc) == expected


def test_signals_keep_the_runtime_semantics_of_their_base_classes():
    """Before the runtime reads the matrix, each signal still settles correctly (R9)."""
    for before in (NotReached("x"), Transient("x"), AuthFailed("x"), BusinessRejection("x")):
        assert isinstance(before, NotCommitted)
    assert isinstance(NoResponse("x"), NotCommitted)  # a read commits nothing
    for unknown in (ResponseLost("x"), MaybeCommitted("x", status=502)):
        assert isinstance(unknown, CommitUnknown)
    assert AuthFailed("x").recoverable is False  # the model cannot fix credentials
    assert BusinessRejection("x").recoverable is True  # a corrected new call may work
    assert Transient("x").code == "transient"
    assert NotReached("x").code == "not_reached"


def test_retry_after_of():
    """Only a Transient carries a Retry-After."""
    assert retry_after_of(Transient("busy", retry_after=3.0)) == 3.0
    assert retry_after_of(Transient("busy")) is None
    assert retry_after_of(NotReached("x")) is None


@pytest.mark.parametrize(
    ("effect", "idempotency", "key", "expected"),
    [
        ("pure", "none", None, "read"),
        ("read", "native_key", "k", "read"),
        ("reversible_write", "native_key", "k", "keyed_write"),
        ("irreversible_write", "query_by_key", "k", "queryable_write"),
        ("open_world", "none", "k", "unkeyed_write"),
        ("irreversible_write", "native_key", None, "unkeyed_write"),
    ],
)
def test_reliability_of(effect, idempotency, key, expected):
    """The column follows the spec's effect and idempotency, and needs the key present."""
    assert reliability_of(spec(effect=effect, idempotency=idempotency), key=key) == expected


def test_policy_for_takes_max_attempts_from_the_spec():
    """The spec decides how many attempts; the base policy keeps its timing."""
    policy = policy_for(spec(max_attempts=4), RetryPolicy(base_delay=0.3))
    assert (policy.max_attempts, policy.base_delay) == (4, 0.3)
    assert policy_for(spec()).max_attempts == 1  # ToolSpec's default: no retries


# -- sleepers -------------------------------------------------------------------------


def test_fake_sleeper_records_and_advances_the_clock():
    """FakeSleeper returns at once, remembers each wait and moves an injected clock."""
    clock = FixedClock(datetime(2026, 7, 19, 6, 0, tzinfo=UTC))
    sleeper = FakeSleeper(clock=clock)
    sleeper.sleep(0.25)
    asyncio.run(sleeper.asleep(0.5))
    assert sleeper.slept == [0.25, 0.5]
    assert sleeper.total == 0.75
    assert clock.monotonic() == 0.75


def test_system_sleeper_sleeps_for_real():
    """SystemSleeper delegates to time.sleep and asyncio.sleep (here for zero seconds)."""
    sleeper = SystemSleeper()
    sleeper.sleep(0)
    asyncio.run(sleeper.asleep(0))


def test_a_retry_loop_driven_by_decide_needs_no_real_sleep():
    """A 429, a 503, then success: two jittered waits, recorded by the fake, within budget."""
    clock = FixedClock(datetime(2026, 7, 19, 6, 0, tzinfo=UTC))
    sleeper = FakeSleeper(clock=clock)
    failures = [Transient("busy", status=429), Transient("down", status=503)]
    policy = RetryPolicy(max_attempts=3, base_delay=0.1, max_delay=1.0)
    attempt = 0
    while True:
        attempt += 1
        if not failures:
            break
        exc = failures.pop(0)
        failure = classify(exc)
        assert failure is not None
        decision = decide(
            failure,
            "keyed_write",
            attempt=attempt,
            policy=policy,
            remaining=2.0 - clock.monotonic(),
            retry_after=retry_after_of(exc),
            rng=one,
        )
        assert decision.action == "retry"
        assert decision.delay is not None
        sleeper.sleep(decision.delay)
    assert attempt == 3
    assert sleeper.slept == pytest.approx([0.1, 0.2])
