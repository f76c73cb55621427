"""The authorization gate (R6): grants, scopes, limits, confirmation, combination."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbound._clock import FixedClock
from toolbound._errors import ConfigurationError, Problem
from toolbound._model import Action, Resource, Subject, ToolSpec
from toolbound.gates.authorize import (
    AllOf,
    Allow,
    AuthzRequest,
    Confirm,
    Decision,
    Deny,
    DomainScope,
    Grant,
    GrantPolicy,
    IdScope,
    NumberLimit,
    OwnerScope,
    PathScope,
    RateLimit,
    TimeRangeLimit,
    authorize,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from toolbound._model import JSONObject

NOW = datetime(2026, 9, 14, tzinfo=UTC)
ACTIONS: tuple[Action, ...] = get_args(Action)
MIRA = Subject(id="mira", tenant="shop", session="s1")
LEO = Subject(id="leo", tenant="shop", session="s9")


def make_spec(*capabilities: str, name: str = "get_order") -> ToolSpec:
    """Build a read tool needing ``capabilities``."""
    return ToolSpec(
        name=name,
        version="1",
        description="test tool",
        input_schema={"type": "object"},
        effect="read",
        capabilities=capabilities,
    )


GET_ORDER = make_spec("orders:read:own")
PAY = make_spec("payments:create", name="pay")


def make_request(
    *,
    subject: Subject = MIRA,
    spec: ToolSpec = GET_ORDER,
    arguments: JSONObject | None = None,
    resources: tuple[Resource, ...] = (),
    now: datetime = NOW,
) -> AuthzRequest:
    """Build a request for mira at NOW unless told otherwise."""
    return AuthzRequest(
        subject=subject,
        spec=spec,
        arguments=arguments if arguments is not None else {},
        resources=resources,
        now=now,
    )


def make_grant(**overrides: object) -> Grant:
    """Build mira's grant to read orders, with ``overrides``."""
    fields: dict[str, object] = {
        "subject": "mira",
        "tenant": "shop",
        "capability": "orders:read:own",
        "actions": frozenset({"read"}),
    }
    fields.update(overrides)
    return Grant(**fields)  # type: ignore[arg-type]


def order(order_id: str, owner: str | None, *, exists: bool = True, action: Action = "read"):
    """Build an order resource as the orders tool's extractor would name it."""
    return Resource(kind="order", id=order_id, action=action, owner=owner, exists=exists)


def outcome(decision: Decision) -> str:
    """Collapse a decision to 'allow', 'confirm' or the deny code, for tables."""
    match decision:
        case Allow():
            return "allow"
        case Confirm():
            return "confirm"
        case Deny():
            assert decision.problem.kind == "authorization"
            return decision.problem.code


def decide(grants: list[Grant], request: AuthzRequest) -> Decision:
    """Authorize ``request`` against a GrantPolicy of ``grants``."""
    return authorize(GrantPolicy(grants), request)


MIRA_ORDERS = make_grant(scope=OwnerScope())
LEO_ORDERS = make_grant(subject="leo", scope=OwnerScope())


# --- the mira / leo orders example (seed 001, R6 row ownership) ----------------------


@pytest.mark.parametrize(
    ("subject", "resource", "expected"),
    [
        (MIRA, order("A-104", "mira"), "allow"),
        (MIRA, order("B-205", "leo"), "not_found_or_not_owned"),
        (MIRA, order("Z-999", None, exists=False), "not_found_or_not_owned"),
        (MIRA, order("C-300", None), "not_found_or_not_owned"),
        (MIRA, order("A-104", "mira", exists=False), "not_found_or_not_owned"),
        (LEO, order("B-205", "leo"), "allow"),
        (LEO, order("A-104", "mira"), "not_found_or_not_owned"),
    ],
)
def test_orders_are_readable_only_by_their_owner(subject, resource, expected):
    """Each subject reads its own orders; another's order or a missing one is refused."""
    request = make_request(subject=subject, resources=(resource,))
    assert outcome(decide([MIRA_ORDERS, LEO_ORDERS], request)) == expected


def test_missing_and_foreign_orders_are_indistinguishable():
    """A missing order and leo's order give mira the very same problem: existence is hidden."""
    foreign = decide([MIRA_ORDERS], make_request(resources=(order("B-205", "leo"),)))
    missing = decide([MIRA_ORDERS], make_request(resources=(order("B-205", None, exists=False),)))
    assert isinstance(foreign, Deny)
    assert foreign == missing
    assert foreign.problem.recoverable is False
    assert "leo" not in str(foreign.problem.as_json())


def test_allowed_read_grants_exactly_the_specs_capabilities():
    """Allow carries exactly the capabilities the spec lists, never more."""
    decision = decide(
        [MIRA_ORDERS, make_grant(capability="orders:write", actions=frozenset(ACTIONS))],
        make_request(resources=(order("A-104", "mira"),)),
    )
    assert decision == Allow(capabilities=frozenset({"orders:read:own"}), reason=decision.reason)


@pytest.mark.parametrize(
    "claim",
    [
        {"principal": "leo"},
        {"subject": "leo", "tenant": "shop"},
        {"role": "admin", "is_admin": True},
        {"user": {"id": "leo", "tenant": "shop", "session": "s9"}},
        {"capabilities": ["orders:read:own", "orders:write"]},
    ],
)
@pytest.mark.parametrize("resource", [order("A-104", "mira"), order("B-205", "leo")])
def test_identity_claimed_in_arguments_changes_nothing(claim, resource):
    """R17: arguments claiming another identity or admin rights leave the decision as it was."""
    baseline = decide([MIRA_ORDERS, LEO_ORDERS], make_request(resources=(resource,)))
    claimed = decide(
        [MIRA_ORDERS, LEO_ORDERS],
        make_request(arguments={"order_id": resource.id, **claim}, resources=(resource,)),
    )
    assert claimed == baseline


# --- binding: subject, tenant, session, expiry -------------------------------------------


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        (Subject(id="mira", tenant="shop"), "allow"),
        (Subject(id="mira", tenant="acme"), "capability_missing"),
        (Subject(id="Mira", tenant="shop"), "capability_missing"),
        (Subject(id="mira", tenant="Shop"), "capability_missing"),
        (Subject(id="leo", tenant="shop"), "capability_missing"),
    ],
)
def test_grants_bind_exact_subject_id_and_tenant(subject, expected):
    """A grant serves only its own subject id in its own tenant, compared exactly."""
    request = make_request(subject=subject, spec=PAY)
    grant = make_grant(capability="payments:create", actions=frozenset({"create"}))
    assert outcome(decide([grant], request)) == expected


@pytest.mark.parametrize(
    ("grant_session", "subject_session", "expected"),
    [
        ("s1", "s1", "allow"),
        ("s1", "s2", "capability_missing"),
        ("s1", None, "capability_missing"),
        (None, "s1", "allow"),
        (None, None, "allow"),
    ],
)
def test_session_bound_grant_serves_only_that_session(grant_session, subject_session, expected):
    """A session-bound grant serves that session only; an unbound one serves any."""
    grant = make_grant(capability="payments:create", session=grant_session)
    request = make_request(subject=Subject(id="mira", tenant="shop", session=subject_session))
    assert outcome(decide([grant], make_request(subject=request.subject, spec=PAY))) == expected


@pytest.mark.parametrize(
    ("expires_at", "expected"),
    [
        (None, "allow"),
        (NOW + timedelta(seconds=1), "allow"),
        (NOW, "capability_missing"),
        (NOW - timedelta(days=1), "capability_missing"),
    ],
)
def test_grant_is_dead_from_its_expiry_on(expires_at, expected):
    """A grant works strictly before its expiry and not at or after it."""
    grant = make_grant(capability="payments:create", expires_at=expires_at)
    assert outcome(decide([grant], make_request(spec=PAY))) == expected


def test_missing_capability_is_named_without_leaking_other_grants():
    """The denial names the capability the tool needs and nothing about others' grants."""
    spec = make_spec("orders:read:own", "refunds:create", name="refund")
    leo_refunds = make_grant(subject="leo", capability="refunds:create", actions=frozenset())
    decision = decide([make_grant(), leo_refunds], make_request(spec=spec))
    assert isinstance(decision, Deny)
    assert decision.problem == Problem(
        kind="authorization",
        code="capability_missing",
        message="refund@1 needs capability 'refunds:create', which this subject does not hold",
        recoverable=False,
        hint=decision.problem.hint,
    )
    assert decision.problem.hint
    assert "leo" not in str(decision.problem.as_json())


# --- read / create / modify / delete kept apart -----------------------------------------


@pytest.mark.parametrize(
    ("granted", "action", "expected"),
    [
        ({"read"}, "read", "allow"),
        ({"read"}, "create", "action_not_granted"),
        ({"read"}, "modify", "action_not_granted"),
        ({"read"}, "delete", "action_not_granted"),
        ({"read", "create"}, "delete", "action_not_granted"),
        ({"modify"}, "read", "action_not_granted"),
        ({"read", "create", "modify", "delete"}, "delete", "allow"),
    ],
)
def test_actions_are_granted_separately(granted, action, expected):
    """A grant to read never lets a call create, modify or delete, and so on for each."""
    grant = make_grant(actions=frozenset(granted), scope=OwnerScope())
    request = make_request(resources=(order("A-104", "mira", action=action),))
    assert outcome(decide([grant], request)) == expected


def test_action_is_checked_before_ownership():
    """Asking to delete someone else's order says the action is missing, not who owns it."""
    request = make_request(resources=(order("B-205", "leo", action="delete"),))
    assert outcome(decide([MIRA_ORDERS], request)) == "action_not_granted"


def test_resources_need_a_declared_capability():
    """A spec that declares no capability cannot reach any resource."""
    request = make_request(spec=make_spec(), resources=(order("A-104", "mira"),))
    assert outcome(decide([MIRA_ORDERS], request)) == "action_not_granted"


def test_no_capabilities_and_no_resources_is_allowed_with_nothing():
    """A tool needing no capability and touching no resource is allowed with no capabilities."""
    decision = decide([], make_request(spec=make_spec()))
    assert isinstance(decision, Allow)
    assert decision.capabilities == frozenset()


def test_every_resource_must_be_admitted():
    """One foreign order among the call's resources refuses the whole call."""
    request = make_request(resources=(order("A-104", "mira"), order("B-205", "leo")))
    assert outcome(decide([MIRA_ORDERS], request)) == "not_found_or_not_owned"


def test_any_live_grant_may_admit_a_resource():
    """With two scoped grants of one capability, a resource either admits is allowed."""
    grants = [
        make_grant(capability="calendar:read", scope=IdScope(frozenset({"work"}))),
        make_grant(capability="calendar:read", scope=IdScope(frozenset({"home"}))),
    ]
    spec = make_spec("calendar:read", name="list_events")
    for calendar, expected in [("work", "allow"), ("home", "allow"), ("team", "out")]:
        resource = Resource(kind="calendar", id=calendar, action="read")
        decision = decide(grants, make_request(spec=spec, resources=(resource,)))
        assert outcome(decision) == ("resource_out_of_scope" if expected == "out" else expected)


@pytest.mark.parametrize(
    ("grants", "expected"),
    [
        ([make_grant(scope=OwnerScope())], "scope_unchecked"),
        ([make_grant(scope=OwnerScope()), make_grant()], "allow"),
    ],
)
def test_scoped_grant_needs_a_resource_to_check(grants, expected):
    """A call naming no resource is not let through by a scope nobody consulted."""
    assert outcome(decide(grants, make_request())) == expected


# --- scopes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_id", "admitted"),
    [
        ("work", True),
        ("home", True),
        ("Work", False),
        ("work ", False),
        ("team", False),
        ("", False),
    ],
)
def test_id_scope_admits_only_enumerated_ids(resource_id, admitted):
    """IdScope compares ids exactly against its enumeration."""
    scope = IdScope(frozenset({"work", "home"}))
    resource = Resource(kind="calendar", id=resource_id, action="read")
    assert (scope.admits(resource, MIRA) is None) is admitted


@pytest.mark.parametrize(
    ("domains", "subdomains", "target", "admitted"),
    [
        ({"example.com"}, False, "https://example.com/a?b=c", True),
        ({"example.com"}, False, "http://example.com:8080/", True),
        ({"example.com"}, False, "example.com", True),
        ({"example.com"}, False, "HTTPS://EXAMPLE.COM./", True),
        ({"example.com"}, False, "https://example.com#@evil.com", True),
        ({"example.com"}, False, "https://api.example.com/", False),
        ({"example.com"}, True, "https://api.example.com/", True),
        ({"example.com"}, True, "https://a.b.example.com/", True),
        ({"example.com"}, True, "https://evil-example.com/", False),
        ({"example.com"}, True, "https://example.com.evil.com/", False),
        ({"example.com"}, True, "https://notexample.com/", False),
        ({"example.com"}, False, "https://example.com@evil.com/", False),
        ({"example.com"}, False, "https://user:pw@example.com/", False),
        ({"example.com"}, False, "https://evil.com\\@example.com/", False),
        ({"example.com"}, True, "https://evil.com\\.example.com/", False),
        ({"example.com"}, False, "https://%65xample.com/", False),
        ({"example.com"}, False, "https://exa mple.com/", False),
        ({"example.com"}, False, "https://example.com\t/", False),
        ({"example.com"}, False, "ftp://example.com/", False),
        ({"example.com"}, False, "file://example.com/etc/passwd", False),
        ({"example.com"}, False, "javascript:alert(1)//example.com", False),
        ({"example.com"}, False, "//example.com/", False),
        ({"example.com"}, False, "http:example.com", False),
        ({"example.com"}, False, "https://example.com:99999/", False),
        ({"example.com"}, False, "https://ex\u0430mple.com/", False),  # Cyrillic a
        (
            {"example.com"},
            False,
            "https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/",
            False,
        ),  # fullwidth, remapped
        ({"bücher.example"}, False, "https://BÜCHER.example/", True),
        ({"bücher.example"}, False, "https://xn--bcher-kva.example/", True),
        ({"xn--bcher-kva.example"}, False, "https://bücher.example/", True),
        ({"fass.de"}, False, "https://faß.de/", False),  # IDNA 2003 and 2008 disagree
        ({"127.0.0.1"}, False, "http://127.0.0.1:8000/", True),
        ({"::1"}, False, "http://[::1]/", True),
        ({"127.0.0.1"}, False, "http://2130706433/", False),
        ({"example.com"}, False, "", False),
    ],
)
def test_domain_scope_traps(domains, subdomains, target, admitted):
    """DomainScope admits allowlisted http(s) hosts only, and none of the usual disguises."""
    scope = DomainScope(frozenset(domains), allow_subdomains=subdomains)
    resource = Resource(kind="url", id=target, action="read")
    assert (scope.admits(resource, MIRA) is None) is admitted


def test_domain_denial_through_policy():
    """A URL off the allowlist is denied as resource_out_of_scope."""
    grant = make_grant(capability="web:fetch", scope=DomainScope(frozenset({"example.com"})))
    spec = make_spec("web:fetch", name="fetch")
    resource = Resource(kind="url", id="https://example.com@evil.com/", action="read")
    decision = decide([grant], make_request(spec=spec, resources=(resource,)))
    assert outcome(decision) == "resource_out_of_scope"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Build a root "data" beside "database", with symlinks leading in and out."""
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "report.txt").write_text("ok")
    (root / "sub" / "x.txt").write_text("ok")
    (tmp_path / "database").mkdir()
    (tmp_path / "database" / "secret.txt").write_text("secret")
    (tmp_path / "outside.txt").write_text("secret")
    (root / "escape").symlink_to(tmp_path / "database", target_is_directory=True)
    (root / "escape_file").symlink_to(tmp_path / "outside.txt")
    (root / "inner_link").symlink_to(root / "sub", target_is_directory=True)
    (root / "dangling_out").symlink_to(tmp_path / "nowhere.txt")
    (tmp_path / "root_link").symlink_to(root, target_is_directory=True)
    return tmp_path


@pytest.mark.parametrize(
    ("path", "admitted"),
    [
        ("{root}/report.txt", True),
        ("report.txt", True),
        ("sub/x.txt", True),
        ("sub/../report.txt", True),
        ("./sub/./x.txt", True),
        ("{root}", True),
        (".", True),
        ("new/file.txt", True),
        ("inner_link/x.txt", True),
        ("../database/secret.txt", False),
        ("{root}/../database/secret.txt", False),
        ("sub/../../database/secret.txt", False),
        ("{tmp}/database/secret.txt", False),
        ("{tmp}/database", False),
        ("{tmp}/datax", False),
        ("{tmp}", False),
        ("escape/secret.txt", False),
        ("{root}/escape", False),
        ("escape_file", False),
        ("dangling_out", False),
        ("/etc/passwd", False),
        ("", False),
        ("sub/\x00x.txt", False),
    ],
)
@pytest.mark.parametrize("root_name", ["data", "root_link"])
def test_path_scope_on_real_files(tree, path, admitted, root_name):
    """PathScope resolves symlinks and '..' on both sides; '/data' never admits '/database'."""
    scope = PathScope(tree / root_name)
    resource_id = path.format(root=tree / "data", tmp=tree)
    resource = Resource(kind="file", id=resource_id, action="read")
    assert (scope.admits(resource, MIRA) is None) is admitted


def test_path_scope_resolves_relative_paths_against_root_not_cwd(tree, monkeypatch):
    """A relative path means a path under the root, whatever the working directory is."""
    monkeypatch.chdir(tree / "database")
    scope = PathScope(str(tree / "data"))
    inside = Resource(kind="file", id="secret.txt", action="read")
    assert scope.admits(inside, MIRA) is None
    assert os.path.exists("secret.txt")  # noqa: PTH110 - the cwd has its own secret.txt


def test_path_denial_through_policy(tree):
    """A path escaping through a symlink is denied as resource_out_of_scope."""
    grant = make_grant(capability="files:read", scope=PathScope(tree / "data"))
    spec = make_spec("files:read", name="read_file")
    resource = Resource(kind="file", id="escape/secret.txt", action="read")
    decision = decide([grant], make_request(spec=spec, resources=(resource,)))
    assert outcome(decision) == "resource_out_of_scope"


# --- limits ------------------------------------------------------------------------------


def pay_grant(*limits: object, **overrides: object) -> Grant:
    """Build mira's grant to create payments under ``limits``."""
    return make_grant(
        capability="payments:create", actions=frozenset({"create"}), limits=limits, **overrides
    )


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"amount": 50}, "allow"),
        ({"amount": 0}, "allow"),
        ({"amount": 500}, "allow"),
        ({"amount": 500.0}, "allow"),
        ({"amount": 500.01}, "limit_exceeded"),
        ({"amount": 10_000}, "limit_exceeded"),
        ({"amount": -1}, "limit_exceeded"),
        ({}, "allow"),
        ({"amount": "100"}, "limit_exceeded"),
        ({"amount": True}, "limit_exceeded"),
        ({"amount": None}, "limit_exceeded"),
        ({"amount": float("nan")}, "limit_exceeded"),
        ({"amount": float("inf")}, "limit_exceeded"),
    ],
)
def test_number_limit_on_amount(arguments, expected):
    """Amounts in [0, 500] pass, a missing amount passes, anything else is over the limit."""
    grant = pay_grant(NumberLimit("/amount", minimum=0, maximum=500))
    assert outcome(decide([grant], make_request(spec=PAY, arguments=arguments))) == expected


def test_number_limit_problem_points_at_the_field():
    """An amount over the limit is recoverable and points at /amount with the bound."""
    grant = pay_grant(NumberLimit("/amount", maximum=500))
    decision = decide([grant], make_request(spec=PAY, arguments={"amount": 900}))
    assert isinstance(decision, Deny)
    assert decision.problem.pointer == "/amount"
    assert decision.problem.recoverable is True
    assert decision.problem.message == "/amount is 900, above the maximum 500"


@pytest.mark.parametrize(
    ("pointer", "arguments", "ok"),
    [
        ("/items/0/quantity", {"items": [{"quantity": 3}]}, True),
        ("/items/0/quantity", {"items": [{"quantity": 11}]}, False),
        ("/items/1/quantity", {"items": [{"quantity": 11}]}, True),
        ("/a~1b", {"a/b": 11}, False),
        ("/m~0n", {"m~n": 11}, False),
    ],
)
def test_number_limit_follows_json_pointers(pointer, arguments, ok):
    """The limit reads the field its RFC 6901 pointer names, escapes included."""
    limit = NumberLimit(pointer, maximum=10)
    assert (limit.check(make_request(arguments=arguments)) is None) is ok


RANGE = TimeRangeLimit("/start", "/end", max_span=timedelta(days=30))
FUTURE = TimeRangeLimit("/start", "/end", max_span=timedelta(days=30), not_before_now=True)


@pytest.mark.parametrize(
    ("limit", "arguments", "ok"),
    [
        (RANGE, {"start": "2026-01-01", "end": "2026-03-31"}, False),  # 90 days
        (RANGE, {"start": "2026-01-01", "end": "2026-01-30"}, True),  # 30 whole days
        (RANGE, {"start": "2026-01-01", "end": "2026-01-31"}, False),  # 31 whole days
        (RANGE, {"start": "2026-01-01", "end": "2026-01-01"}, True),
        (RANGE, {"start": "2026-01-01T00:00:00Z", "end": "2026-01-31T00:00:00Z"}, True),
        (RANGE, {"start": "2026-01-01T00:00:00Z", "end": "2026-01-31T00:00:01Z"}, False),
        (RANGE, {"start": "2026-01-01T08:00:00+08:00", "end": "2026-01-31T00:00:00Z"}, True),
        (RANGE, {"start": "2026-01-01T00:00:00Z", "end": "2026-01-30"}, True),  # to the 31st
        (RANGE, {"start": "2026-01-01T00:00:01Z", "end": "2026-01-30"}, True),
        (RANGE, {"start": "2026-01-01T00:00:00Z", "end": "2026-01-31"}, False),
        (RANGE, {"start": "2026-01-01", "end": "2026-01-31T00:00:00Z"}, True),
        (RANGE, {"start": "2026-01-01", "end": "2026-01-31T00:00:01Z"}, False),
        (RANGE, {"start": "2026-02-01", "end": "2026-01-01"}, False),
        (RANGE, {"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T23:59:00Z"}, False),
        (RANGE, {"start": "2026-01-01T00:00:00", "end": "2026-01-31T00:00:00Z"}, False),
        (RANGE, {"start": "2026-01-01"}, True),
        (RANGE, {}, True),
        (RANGE, {"start": "next week", "end": "2026-01-02"}, False),
        (RANGE, {"start": 20260101, "end": "2026-01-02"}, False),
        (FUTURE, {"start": "2026-09-14T00:00:00Z", "end": "2026-09-20T00:00:00Z"}, True),
        (FUTURE, {"start": "2026-09-13T23:59:00Z", "end": "2026-09-20T00:00:00Z"}, False),
        (FUTURE, {"start": "2026-09-13"}, True),  # still 13 September at UTC-12
        (FUTURE, {"start": "2026-09-12"}, False),
        (FUTURE, {"start": "2026-09-14T09:00:00"}, False),  # naive: cannot compare to now
    ],
)
def test_time_range_limit(limit, arguments, ok):
    """Ranges over 30 days, reversed, unparseable or starting in the past are refused."""
    grant = pay_grant(limit)
    decision = decide([grant], make_request(spec=PAY, arguments=arguments))
    assert outcome(decision) == ("allow" if ok else "limit_exceeded")


def test_ninety_day_range_names_the_span():
    """A 90-day date range against a 30-day maximum says how long it is."""
    decision = decide(
        [pay_grant(RANGE)],
        make_request(spec=PAY, arguments={"start": "2026-01-01", "end": "2026-03-31"}),
    )
    assert isinstance(decision, Deny)
    assert decision.problem.recoverable is True
    assert "90 days" in decision.problem.message


def rate_grants(limit: RateLimit) -> list[Grant]:
    """Build payment grants for mira, leo and mira@acme sharing one rate limit."""
    return [
        pay_grant(limit),
        pay_grant(limit, subject="leo"),
        pay_grant(limit, tenant="acme"),
    ]


def test_rate_limit_window_slides():
    """Two calls per minute: the third waits until the first leaves the window."""
    clock = FixedClock(at=NOW)
    grants = rate_grants(RateLimit(2, timedelta(minutes=1), clock))
    steps = [
        (0.0, "allow"),  # t=0
        (10.0, "allow"),  # t=10
        (10.0, "rate_limited"),  # t=20
        (39.9, "rate_limited"),  # t=59.9
        (0.1, "allow"),  # t=60: the call at t=0 has left the window
        (0.0, "rate_limited"),  # t=60: calls at 10 and 60
        (10.0, "allow"),  # t=70
    ]
    for advance, expected in steps:
        clock.advance(advance)
        assert outcome(decide(grants, make_request(spec=PAY))) == expected


def test_rate_limit_counts_only_calls_it_lets_through():
    """Refused calls, by the rate limit or by another check, do not spend the budget."""
    clock = FixedClock(at=NOW)
    rate = RateLimit(1, timedelta(minutes=1), clock)
    grants = [pay_grant(NumberLimit("/amount", maximum=10), rate)]
    assert outcome(decide(grants, make_request(spec=PAY, arguments={"amount": 50}))) == (
        "limit_exceeded"
    )
    assert outcome(decide(grants, make_request(spec=PAY, arguments={"amount": 5}))) == "allow"
    clock.advance(30)
    refused = decide(grants, make_request(spec=PAY, arguments={"amount": 5}))
    assert isinstance(refused, Deny)
    assert refused.problem.code == "rate_limited"
    assert refused.problem.recoverable is True
    assert "retry in 30.0 s" in refused.problem.message
    clock.advance(30)
    assert outcome(decide(grants, make_request(spec=PAY, arguments={"amount": 5}))) == "allow"


def test_rate_limit_budget_is_per_subject_and_tenant():
    """Mira's calls do not spend leo's budget, nor mira's budget in another tenant."""
    grants = rate_grants(RateLimit(1, timedelta(minutes=1), FixedClock(at=NOW)))
    subjects = [MIRA, LEO, Subject(id="mira", tenant="acme")]
    assert [outcome(decide(grants, make_request(subject=s, spec=PAY))) for s in subjects] == [
        "allow"
    ] * 3
    assert [outcome(decide(grants, make_request(subject=s, spec=PAY))) for s in subjects] == [
        "rate_limited"
    ] * 3


def test_rate_limit_is_thread_safe():
    """Under concurrent checks exactly max_calls calls get through."""
    limit = RateLimit(100, timedelta(minutes=1), FixedClock(at=NOW))
    request = make_request(spec=PAY)
    results: list[str | None] = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        mine = [limit.check(request) for _ in range(50)]
        results.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(None) == 100
    assert len(results) == 400


# --- confirmation -----------------------------------------------------------------------


def over_100(request: AuthzRequest) -> bool:
    """Say whether the amount is above 100."""
    amount = request.arguments.get("amount")
    return isinstance(amount, int | float) and amount > 100


@pytest.mark.parametrize(
    ("confirm", "amount", "expected"),
    [
        (False, 5000, "allow"),
        (True, 5, "confirm"),
        (over_100, 100, "allow"),
        (over_100, 100.01, "confirm"),
        (over_100, 5000, "confirm"),
    ],
)
def test_confirmation_by_flag_or_predicate(confirm, amount, expected):
    """A grant asks a person always (True) or when its predicate says so (amount > 100)."""
    grant = pay_grant(confirm=confirm)
    decision = decide([grant], make_request(spec=PAY, arguments={"amount": amount}))
    assert outcome(decision) == expected
    if isinstance(decision, Confirm):
        assert decision.capabilities == frozenset({"payments:create"})


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(
    ("amount", "expected"), [(50, "allow"), (500, "confirm"), (5000, "limit_exceeded")]
)
def test_small_grant_is_preferred_over_one_needing_confirmation(reverse, amount, expected):
    """Small payments go through, larger ones need a person, huge ones are refused."""
    grants = [
        pay_grant(NumberLimit("/amount", maximum=100)),
        pay_grant(NumberLimit("/amount", maximum=1000), confirm=True),
    ]
    if reverse:
        grants.reverse()
    decision = decide(grants, make_request(spec=PAY, arguments={"amount": amount}))
    assert outcome(decision) == expected


# --- combination and the authorize() invariants ----------------------------------------


class FixedPolicy:
    """A policy that always answers the same and counts how often it was asked."""

    def __init__(self, decision: Decision) -> None:
        """Answer ``decision`` every time."""
        self.decision = decision
        self.calls = 0

    def authorize(self, request: AuthzRequest) -> Decision:  # noqa: ARG002
        """Count the question and give the fixed answer."""
        self.calls += 1
        return self.decision


AB = frozenset({"a", "b"})
ALLOW_AB = Allow(capabilities=AB, reason="p allows")
CONFIRM_AB = Confirm(capabilities=AB, reason="p confirms")
DENY_1 = Deny(problem=Problem(kind="authorization", code="first", message="1", recoverable=False))
DENY_2 = Deny(problem=Problem(kind="authorization", code="second", message="2", recoverable=False))


@pytest.mark.parametrize(
    ("decisions", "expected", "asked"),
    [
        ([ALLOW_AB], ALLOW_AB, [1]),
        ([ALLOW_AB, ALLOW_AB], Allow(capabilities=AB, reason="p allows; p allows"), [1, 1]),
        ([ALLOW_AB, CONFIRM_AB], Confirm(capabilities=AB, reason="p confirms"), [1, 1]),
        ([CONFIRM_AB, ALLOW_AB], Confirm(capabilities=AB, reason="p confirms"), [1, 1]),
        ([DENY_1, DENY_2], DENY_1, [1, 0]),
        ([ALLOW_AB, DENY_2, DENY_1], DENY_2, [1, 1, 0]),
        ([CONFIRM_AB, DENY_1], DENY_1, [1, 1]),
        (
            [ALLOW_AB, Allow(capabilities=frozenset({"a"}), reason="q")],
            Allow(capabilities=frozenset({"a"}), reason="p allows; q"),
            [1, 1],
        ),
    ],
)
def test_all_of_combines_in_order(decisions, expected, asked):
    """First deny wins and stops; any confirm confirms; capabilities intersect."""
    policies = [FixedPolicy(d) for d in decisions]
    spec = make_spec("a", "b")
    assert AllOf(*policies).authorize(make_request(spec=spec)) == expected
    assert [p.calls for p in policies] == asked


def test_all_of_narrowed_capabilities_deny_through_authorize():
    """If one policy withholds a capability the tool needs, authorize() denies the call."""
    policy = AllOf(
        FixedPolicy(ALLOW_AB), FixedPolicy(Allow(capabilities=frozenset({"a"}), reason=""))
    )
    decision = authorize(policy, make_request(spec=make_spec("a", "b")))
    assert outcome(decision) == "capability_missing"
    assert isinstance(decision, Deny)
    assert "'b'" in decision.problem.message


def test_all_of_grant_policies():
    """A tenant-wide cap and a user's own grant must both agree."""
    tenant_cap = GrantPolicy([pay_grant(NumberLimit("/amount", maximum=1000))])
    user = GrantPolicy([pay_grant(NumberLimit("/amount", maximum=200), confirm=over_100)])
    policy = AllOf(tenant_cap, user)
    results = [
        outcome(authorize(policy, make_request(spec=PAY, arguments={"amount": amount})))
        for amount in (50, 150, 500)
    ]
    assert results == ["allow", "confirm", "limit_exceeded"]


def test_authorize_refuses_a_policy_that_overgrants():
    """A policy granting a capability the spec does not declare is a bug, raised as such."""
    policy = FixedPolicy(Allow(capabilities=frozenset({"a", "admin"}), reason=""))
    with pytest.raises(ConfigurationError) as caught:
        authorize(policy, make_request(spec=make_spec("a")))
    assert caught.value.code == "policy_overgrant"


def test_all_of_needs_a_policy():
    """An empty AllOf would allow everything, so it cannot be built."""
    with pytest.raises(ConfigurationError):
        AllOf()


# --- configuration mistakes raise at construction ----------------------------------------

BAD_CONFIGURATIONS: list[tuple[str, Callable[[], object]]] = [
    ("unknown action", lambda: make_grant(actions=frozenset({"write"}))),
    ("actions as a string", lambda: make_grant(actions="read")),
    ("empty subject", lambda: make_grant(subject="")),
    ("naive expiry", lambda: make_grant(expires_at=datetime(2026, 1, 1))),  # noqa: DTZ001
    ("relative root", lambda: PathScope("data")),
    ("domains as a string", lambda: DomainScope("example.com")),  # type: ignore[arg-type]
    ("domain not a host", lambda: DomainScope(frozenset({"exa mple.com"}))),
    ("ids as a string", lambda: IdScope("work")),  # type: ignore[arg-type]
    ("pointer without slash", lambda: NumberLimit("amount")),
    ("bad pointer escape", lambda: NumberLimit("/a~2")),
    ("minimum above maximum", lambda: NumberLimit("/a", minimum=5, maximum=1)),
    ("empty span", lambda: TimeRangeLimit("/s", "/e", timedelta(0))),
    ("zero calls", lambda: RateLimit(0, timedelta(minutes=1), FixedClock(at=NOW))),
    ("naive now", lambda: make_request(now=datetime(2026, 1, 1))),  # noqa: DTZ001
]


@pytest.mark.parametrize(
    "build", [b for _, b in BAD_CONFIGURATIONS], ids=[n for n, _ in BAD_CONFIGURATIONS]
)
def test_bad_configuration_raises(build):
    """Misconfigured grants, scopes, limits and requests raise ConfigurationError at once."""
    with pytest.raises(ConfigurationError):
        build()


# --- properties --------------------------------------------------------------------------

IDS = st.sampled_from(["mira", "leo", "ana"])
TENANTS = st.sampled_from(["shop", "acme"])
SESSIONS = st.sampled_from([None, "s1", "s2"])
CAPABILITIES = st.sampled_from(["orders:read", "refunds:create"])
SUBJECTS = st.builds(Subject, id=IDS, tenant=TENANTS, session=SESSIONS)
RESOURCES = st.builds(
    Resource,
    kind=st.just("order"),
    id=st.sampled_from(["A-104", "B-205"]),
    action=st.sampled_from(ACTIONS),
    owner=st.none() | IDS,
    exists=st.booleans(),
)
CLAIMS = st.dictionaries(
    st.sampled_from(["principal", "subject", "tenant", "session", "role"]), IDS | TENANTS
)


def grants_near(subject: Subject) -> st.SearchStrategy[Grant]:
    """Grants that are often the subject's own and often near misses (other tenant, id...)."""
    return st.builds(
        Grant,
        subject=st.just(subject.id) | IDS,
        tenant=st.just(subject.tenant) | TENANTS,
        session=st.sampled_from([None, subject.session]) | SESSIONS,
        capability=CAPABILITIES,
        actions=st.frozensets(st.sampled_from(ACTIONS)),
        scope=st.sampled_from([None, None, OwnerScope()]),
        confirm=st.booleans(),
        expires_at=st.sampled_from(
            [None, None, NOW - timedelta(seconds=1), NOW, NOW + timedelta(days=1)]
        ),
    )


def holds_own(grants: list[Grant], subject: Subject, capability: str) -> bool:
    """Say whether a live grant of ``capability`` belongs to exactly this subject."""
    return any(
        g.subject == subject.id
        and g.tenant == subject.tenant
        and g.capability == capability
        and g.session in (None, subject.session)
        and (g.expires_at is None or g.expires_at > NOW)
        for g in grants
    )


@settings(max_examples=200)
@given(data=st.data(), subject=SUBJECTS, claims=CLAIMS)
def test_no_allow_without_a_grant_of_ones_own(data, subject, claims):
    """Allow or Confirm only for capabilities the subject itself holds, whatever args claim."""
    grants = data.draw(st.lists(grants_near(subject), max_size=8), label="grants")
    capabilities = data.draw(st.lists(CAPABILITIES, max_size=2, unique=True), label="caps")
    resources = tuple(data.draw(st.lists(RESOURCES, max_size=2), label="resources"))
    spec = make_spec(*capabilities)
    decision = decide(grants, make_request(subject=subject, spec=spec, resources=resources))
    claimed = decide(
        grants, make_request(subject=subject, spec=spec, resources=resources, arguments=claims)
    )
    assert claimed == decision
    if isinstance(decision, Deny):
        return
    assert decision.capabilities == frozenset(capabilities)
    assert all(holds_own(grants, subject, c) for c in decision.capabilities)


def test_a_policy_that_raises_denies():
    """A broken policy fails closed: Deny with policy_failed, the error text not exposed."""

    class Broken:
        def authorize(self, _request):
            msg = "lookup table missing"
            raise RuntimeError(msg)

    request = AuthzRequest(
        subject=Subject(id="mira", tenant="acme"),
        spec=ToolSpec(
            name="t",
            version="v1",
            description="t",
            input_schema={"type": "object"},
            effect="read",
        ),
        arguments={},
        now=datetime.now(UTC),
    )
    decision = authorize(Broken(), request)
    assert isinstance(decision, Deny)
    assert decision.problem.code == "policy_failed"
    assert "lookup table" not in decision.problem.message
