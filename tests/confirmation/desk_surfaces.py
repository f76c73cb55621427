"""Every surface that decides parked calls, behind one small driver protocol (R7).

A :class:`Surface` parks a write whose policy asks a person (``park``), lists what an
approver may decide (``pending``), decides (``decide``) and counts what really ran
(``effects``). A refused decision comes back as a :class:`Refused` value carrying the
surface's own form of the refusal: the desk's ``ConfirmationMismatch.code`` for the
library, the problem's ``code`` and HTTP status for the service and MCP endpoints.
What each surface answers in each situation is its :attr:`Surface.refusals` table, so
the differences between surfaces are written in one place and asserted.

The people are the same everywhere: MIRA, whose calls are parked; ANA and OPS,
approvers of her tenant; SELF, an approver whose subject is MIRA's own; EVE, an
approver of another tenant; LEO, of MIRA's tenant but without the approver role.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal, Protocol

from starlette.applications import Starlette
from starlette.testclient import TestClient

from toolbound import (
    CallContext,
    ConfirmationMismatch,
    Grant,
    GrantPolicy,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolSpec,
)
from toolbound.adapters.http import ApiError
from toolbound.config import Principal, hash_key, parse_config
from toolbound.mcp.confirmations import ConfirmationEndpoint
from toolbound.pipeline.confirm import Approver, ConfirmationDesk
from toolbound.service.api import create_app
from toolbound.service.core import Service, Submission
from toolbound.testing import FakeTool

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Iterator, Mapping
    from contextlib import AbstractContextManager
    from pathlib import Path

    from toolbound import FixedClock
    from toolbound.gates.confirm import Confirmation, ConfirmationRequest
    from toolbound.pipeline.confirm import ParkedCalls


# -- the people and the call ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Person:
    """Who acts: a name (and the key ``<name>-key``), a subject, a tenant, roles."""

    name: str
    subject: str
    tenant: str
    roles: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.name}-key"

    def principal(self) -> Principal:
        return Principal(
            name=self.name,
            key_sha256=hash_key(self.key),
            subject=self.subject,
            tenant=self.tenant,
            roles=frozenset(self.roles),
        )

    def approver(self) -> Approver:
        return Approver(name=self.name, subject=self.subject, tenant=self.tenant)


MIRA = Person("mira", "mira", "acme", ("agent",))
ANA = Person("ana", "ana", "acme", ("approver",))
OPS = Person("ops", "ops", "acme", ("approver",))
SELF = Person("self", "mira", "acme", ("agent", "approver"))
EVE = Person("eve", "eve", "globex", ("agent", "approver"))
LEO = Person("leo", "leo", "acme", ("agent", "operator"))
PEOPLE = (MIRA, ANA, OPS, SELF, EVE, LEO)
DECIDERS = (ANA, OPS, SELF, EVE, LEO)

TOOL = "notes.add"
TTL = timedelta(minutes=15)
"""How long a person has to decide, on every surface."""
WRITE = ToolSpec(
    name=TOOL,
    version="v1",
    description="Save a note.",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"saved": {"type": "string"}},
        "required": ["saved"],
        "additionalProperties": False,
    },
    effect="reversible_write",
    capabilities=("notes:write",),
)


def note_tool() -> FakeTool:
    """The write: every call it receives is an effect."""
    return FakeTool(returns=lambda arguments: {"saved": str(arguments["text"])})


def registry_with(tool: FakeTool) -> Registry:
    registry = Registry()
    registry.register(WRITE, tool)
    return registry


# -- what a decision comes to -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parked:
    """A call waiting for a person, as the person is shown it."""

    invocation_id: str
    digest: str


@dataclass(frozen=True, slots=True)
class Decided:
    """The decision was taken; the call ended ``kind`` (observed, rejected, …)."""

    kind: str


@dataclass(frozen=True, slots=True)
class Refused:
    """The decision was refused: the machine code and, over HTTP, the status."""

    code: str
    status: int | None = None


Result = Decided | Refused

Situation = Literal[
    "digest",
    "decided",
    "four_eyes",
    "other_tenant",
    "unknown",
    "raced",
    "not_an_approver",
    "expired",
]
"""Why a decision is refused: another digest; the call was decided already; four eyes;
the approver's tenant is not the call's; no such id; another approver won a race; the
person lacks the approver role; the call's confirmation window closed."""

# The library's desk refuses with ConfirmationMismatch codes only.
LIBRARY: Mapping[Situation, frozenset[Refused]] = {
    "digest": frozenset({Refused("digest_mismatch")}),
    "decided": frozenset({Refused("not_pending")}),
    "four_eyes": frozenset({Refused("four_eyes")}),
    "other_tenant": frozenset({Refused("not_pending")}),
    "unknown": frozenset({Refused("not_pending")}),
    "raced": frozenset({Refused("not_pending")}),
    "not_an_approver": frozenset(),
    # runtime.approve ends a closed call first (not_pending); the desk itself refuses.
    "expired": frozenset({Refused("not_pending"), Refused("confirmation_expired")}),
}
# Service.decide, the HTTP API and the console: the call is looked up in the tenant's
# journal first, so another tenant's call and no call are both ``not_found``.
SERVICE: Mapping[Situation, frozenset[Refused]] = {
    "digest": frozenset({Refused("digest_mismatch", 409)}),
    "decided": frozenset({Refused("not_pending", 409)}),
    "four_eyes": frozenset({Refused("four_eyes", 403)}),
    "other_tenant": frozenset({Refused("not_found", 404)}),
    "unknown": frozenset({Refused("not_found", 404)}),
    "raced": frozenset({Refused("not_pending", 409)}),
    "not_an_approver": frozenset({Refused("forbidden", 403)}),
    # The desk refuses a decision once the window closed; nobody can decide the call.
    "expired": frozenset({Refused("confirmation_expired", 409)}),
}
# The MCP ConfirmationEndpoint's table (its module docstring): a call no longer pending
# is 404 when seen so before deciding, 409 when decided while this decision was on its way.
MCP_ENDPOINT: Mapping[Situation, frozenset[Refused]] = {
    "digest": frozenset({Refused("digest_mismatch", 409)}),
    "decided": frozenset({Refused("not_pending", 404)}),
    "four_eyes": frozenset({Refused("four_eyes", 403)}),
    "other_tenant": frozenset({Refused("not_pending", 404)}),
    "unknown": frozenset({Refused("not_pending", 404)}),
    "raced": frozenset({Refused("not_pending", 404), Refused("not_pending", 409)}),
    "not_an_approver": frozenset({Refused("forbidden", 403)}),
    # The endpoint ends expired calls before it looks (runtime.pending()).
    "expired": frozenset({Refused("not_pending", 404)}),
}


class Surface(Protocol):
    """One way people decide parked calls."""

    refusals: Mapping[Situation, frozenset[Refused]]
    """What this surface answers in each situation."""
    cannot: Mapping[str, str]
    """Cases that cannot apply to this surface, with the reason."""
    known_bugs: Mapping[str, str]
    """Cases this surface fails today, with what goes wrong (strict xfail)."""

    def park(self, arguments: Mapping[str, object]) -> Parked:
        """MIRA proposes the write with ``arguments``; it waits for a person."""
        ...

    def pending(self, approver: Person) -> set[str]:
        """The ids of the calls ``approver`` is shown as waiting."""
        ...

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        """``approver`` approves or denies the call shown with ``digest``."""
        ...

    def deny_saying(self, invocation_id: str, digest: str, approver: Person, reason: str) -> str:
        """``approver`` denies the call giving ``reason``; what the model is told of it."""
        ...

    def effects(self) -> int:
        """How many times the write ran."""
        ...

    def twin(self) -> AbstractContextManager[Surface]:
        """Another handle deciding the same parked calls, for races."""
        ...

    def desks(self) -> list[ConfirmationDesk]:
        """The confirmation desks this handle decides through."""
        ...

    def close(self) -> None: ...


class MeetAfterLooking:
    """Parked calls whose ``waiting`` answers only once every racer has looked.

    Put under a surface's desks, it makes racing decisions all pass the desk's checks
    before any records, so that the store's own one-decision guard decides the race.
    """

    def __init__(self, inner: ParkedCalls, meet: threading.Barrier) -> None:
        self.inner, self.meet = inner, meet

    def waiting(self, invocation_id: str) -> ConfirmationRequest | None:
        request = self.inner.waiting(invocation_id)
        self.meet.wait(timeout=10)
        return request

    def all_waiting(self, tenant: str | None) -> list[ConfirmationRequest]:
        return self.inner.all_waiting(tenant)

    def record(self, confirmation: Confirmation) -> None:
        self.inner.record(confirmation)


_call_ids = itertools.count(1)


def _call_id() -> str:
    return f"call-{next(_call_ids)}"


# -- (1) the library Runtime --------------------------------------------------------------


class _ParkingRuntime:
    """A runtime whose policy asks a person for MIRA's writes, holding the parked calls."""

    def __init__(self, clock: FixedClock) -> None:
        self.tool = note_tool()
        self.tools = registry_with(self.tool).toolset()
        grant = Grant(
            subject=MIRA.subject,
            tenant=MIRA.tenant,
            capability="notes:write",
            actions=frozenset({"create", "modify"}),
            confirm=True,
        )
        self.runtime = Runtime(policy=GrantPolicy([grant]), clock=clock, confirmation_ttl=TTL)

    def park(self, arguments: Mapping[str, object]) -> Parked:
        outcome = self.runtime.run(
            Proposal(name=TOOL, arguments=json.dumps(arguments).encode(), proposal_id=_call_id()),
            CallContext(subject=Subject(id=MIRA.subject, tenant=MIRA.tenant), tools=self.tools),
        )
        assert outcome.kind == "awaiting_confirmation", outcome
        return Parked(outcome.invocation_id, outcome.request.digest)

    def effects(self) -> int:
        return len(self.tool.calls)

    @contextmanager
    def twin(self) -> Iterator[_ParkingRuntime]:
        # The runtime is the one holder of its parked calls: threads share it.
        yield self

    def desks(self) -> list[ConfirmationDesk]:
        return [self.runtime.desk]

    def close(self) -> None:
        self.runtime.close()


_NO_ROLES = "the library has no roles: whoever the program lets call the desk decides"


class RuntimeDesk(_ParkingRuntime):
    """``runtime.desk.decide`` with the approver's subject and tenant, then ``runtime.confirm``."""

    refusals = LIBRARY
    cannot: Mapping[str, str] = {"not_an_approver": _NO_ROLES}
    known_bugs: Mapping[str, str] = {}

    def __init__(self, clock: FixedClock) -> None:
        super().__init__(clock)
        # The runtime has no four-eyes option of its own; its desk has the switch.
        self.runtime.desk.four_eyes = True

    def pending(self, approver: Person) -> set[str]:
        return {r.invocation_id for r in self.runtime.desk.pending(approver.approver())}

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        try:
            confirmation = self.runtime.desk.decide(
                invocation_id,
                digest=digest,
                approver=approver.approver(),
                approve=approve,
                at=self.runtime.clock.now(),
            )
            outcome = self.runtime.confirm(confirmation)
        except ConfirmationMismatch as exc:
            return Refused(exc.code)
        return Decided(outcome.kind)

    def deny_saying(self, invocation_id: str, digest: str, approver: Person, reason: str) -> str:
        confirmation = self.runtime.desk.decide(
            invocation_id,
            digest=digest,
            approver=approver.approver(),
            approve=False,
            at=self.runtime.clock.now(),
            reason=reason,
        )
        return self.runtime.confirm(confirmation).message.text


class RuntimeApprove(_ParkingRuntime):
    """``runtime.approve`` / ``runtime.deny``: the library's own person, by name only."""

    refusals = LIBRARY
    cannot: Mapping[str, str] = {
        "four_eyes": "Runtime.approve/deny take an approver's name only: no subject to compare",
        "other_tenant": "Runtime.approve/deny take an approver's name only: every tenant's person",
        "not_an_approver": _NO_ROLES,
    }
    known_bugs: Mapping[str, str] = {}

    def pending(self, approver: Person) -> set[str]:  # noqa: ARG002 - every tenant's person
        return {r.invocation_id for r in self.runtime.pending()}

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        decide = self.runtime.approve if approve else self.runtime.deny
        try:
            outcome = decide(invocation_id, digest=digest, approver=approver.name)
        except ConfirmationMismatch as exc:
            return Refused(exc.code)
        return Decided(outcome.kind)

    def deny_saying(self, invocation_id: str, digest: str, approver: Person, reason: str) -> str:
        outcome = self.runtime.deny(
            invocation_id, digest=digest, approver=approver.name, reason=reason
        )
        return outcome.message.text


# -- (2) the Service in process -----------------------------------------------------------


def service_config_text() -> str:
    """A SQLite store beside the file, four eyes on, MIRA's writes confirmed by a person."""
    text = '[store]\nurl = "sqlite:///desk.db"\n'
    for p in PEOPLE:
        text += (
            f'\n[[principal]]\nname = "{p.name}"\nkey_sha256 = "{hash_key(p.key)}"\n'
            f'subject = "{p.subject}"\ntenant = "{p.tenant}"\nroles = {json.dumps(p.roles)}\n'
        )
    for subject, tenant in ((MIRA.subject, MIRA.tenant), (EVE.subject, EVE.tenant)):
        text += (
            f'\n[[grant]]\nsubject = "{subject}"\ntenant = "{tenant}"\n'
            'capability = "notes:write"\nactions = ["create", "modify"]\nconfirm = true\n'
        )
    return text + "\n[service]\nfour_eyes = true\n"


def open_service(folder: Path, clock: FixedClock, tool: FakeTool) -> Service:
    """A Service over the SQLite store in ``folder``; every instance shares it."""
    path = folder / "toolbound.toml"
    if not path.exists():
        path.write_text(service_config_text())
    config = parse_config(path.read_text(), source=path)
    return Service(config, registry=registry_with(tool), clock=clock, confirmation_ttl=TTL)


class InProcessService:
    """``Service.submit`` and ``Service.decide``, awaited in process."""

    refusals = SERVICE
    cannot: Mapping[str, str] = {}
    known_bugs: Mapping[str, str] = {}

    def __init__(self, folder: Path, clock: FixedClock, tool: FakeTool | None = None) -> None:
        self.folder, self.clock = folder, clock
        self.tool = tool if tool is not None else note_tool()
        self.service = open_service(folder, clock, self.tool)

    def park(self, arguments: Mapping[str, object]) -> Parked:
        submission = Submission(
            tool=TOOL, arguments=json.dumps(arguments).encode(), call_id=_call_id()
        )
        status, text, _ = asyncio.run(self.service.submit(MIRA.principal(), submission))
        answer = json.loads(text)
        assert (status, answer["status"]) == (202, "awaiting_confirmation"), answer
        return Parked(answer["invocation_id"], answer["digest"])

    def pending(self, approver: Person) -> set[str]:
        return {r.invocation_id for r in self.service.desk.pending(approver.approver())}

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        try:
            answer = asyncio.run(
                self.service.decide(
                    approver.principal(),
                    invocation_id,
                    digest=digest,
                    decision="approve" if approve else "deny",
                )
            )
        except ApiError as error:
            return Refused(error.code, error.status)
        return Decided(str(answer["status"]))

    def deny_saying(self, invocation_id: str, digest: str, approver: Person, reason: str) -> str:
        asyncio.run(
            self.service.decide(
                approver.principal(), invocation_id, digest=digest, decision="deny", reason=reason
            )
        )
        # What the agent reads back for the call, from the journal.
        return str(
            self.service.get(MIRA.principal(), invocation_id).body["response"]["message"]["content"]
        )  # type: ignore[index]

    def effects(self) -> int:
        return len(self.tool.calls)

    def desks(self) -> list[ConfirmationDesk]:
        return [self.service.desk]

    @contextmanager
    def twin(self) -> Iterator[InProcessService]:
        # A second service process: its own runtime and connections, the same store.
        other = InProcessService(self.folder, self.clock, self.tool)
        try:
            yield other
        finally:
            other.close()

    def close(self) -> None:
        self.service.close()


# -- (3) the service's HTTP API -----------------------------------------------------------


def _bearer(person: Person) -> dict[str, str]:
    return {"Authorization": f"Bearer {person.key}"}


def _refused(response) -> Refused:
    assert response.headers["content-type"] == "application/problem+json", response.text
    return Refused(response.json()["code"], response.status_code)


class HttpApi:
    """``POST /v1/proposals``, ``GET /v1/confirmations``, ``POST …/{id}/decision``."""

    refusals = SERVICE
    cannot: Mapping[str, str] = {}
    known_bugs: Mapping[str, str] = {}

    def __init__(self, folder: Path, clock: FixedClock, tool: FakeTool | None = None) -> None:
        self.folder, self.clock = folder, clock
        self.tool = tool if tool is not None else note_tool()
        # The app's lifespan closes the service when the client closes.
        self.service = open_service(folder, clock, self.tool)
        self.client = TestClient(create_app(self.service))
        self.client.__enter__()

    def park(self, arguments: Mapping[str, object]) -> Parked:
        call_id = _call_id()
        r = self.client.post(
            "/v1/proposals",
            json={"tool": TOOL, "arguments": json.dumps(arguments), "call_id": call_id},
            headers={**_bearer(MIRA), "Idempotency-Key": call_id},
        )
        assert r.status_code == 202, r.text
        return Parked(r.json()["invocation_id"], r.json()["digest"])

    def pending(self, approver: Person) -> set[str]:
        r = self.client.get("/v1/confirmations", headers=_bearer(approver))
        assert r.status_code == 200, r.text
        return {c["invocation_id"] for c in r.json()["confirmations"]}

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        r = self.client.post(
            f"/v1/invocations/{invocation_id}/decision",
            json={"digest": digest, "decision": "approve" if approve else "deny"},
            headers=_bearer(approver),
        )
        if r.status_code != 200:
            return _refused(r)
        return Decided(r.json()["status"])

    def deny_saying(self, invocation_id: str, digest: str, approver: Person, reason: str) -> str:
        r = self.client.post(
            f"/v1/invocations/{invocation_id}/decision",
            json={"digest": digest, "decision": "deny", "reason": reason},
            headers=_bearer(approver),
        )
        assert r.status_code == 200, r.text
        return self.told(invocation_id)

    def told(self, invocation_id: str) -> str:
        """What the agent reads back for the call: its answer's model message."""
        r = self.client.get(f"/v1/invocations/{invocation_id}", headers=_bearer(MIRA))
        assert r.status_code == 200, r.text
        return str(r.json()["response"]["message"]["content"])

    def effects(self) -> int:
        return len(self.tool.calls)

    def desks(self) -> list[ConfirmationDesk]:
        return [self.service.desk]

    @contextmanager
    def twin(self) -> Iterator[HttpApi]:
        other = HttpApi(self.folder, self.clock, self.tool)
        try:
            yield other
        finally:
            other.close()

    def close(self) -> None:
        self.client.__exit__(None, None, None)


# -- (4) the console's approve / deny forms -----------------------------------------------

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_LISTED = re.compile(r'data-invocation="([0-9a-f]+)"')
_ERROR_CODE = re.compile(r'<code id="error-code">([^<]+)</code>')
_ENDED = re.compile(r"The call ended (\w+) ")


class Console(HttpApi):
    """The console's forms, one logged-in browser per approver; calls parked over the API."""

    refusals = SERVICE
    known_bugs: Mapping[str, str] = {}

    def __init__(self, folder: Path, clock: FixedClock, tool: FakeTool | None = None) -> None:
        super().__init__(folder, clock, tool)
        # Logged in before any decision, so that racing decisions race only on deciding.
        self.browsers = {
            p.name: self._log_in(TestClient(self.client.app, follow_redirects=False), p)
            for p in DECIDERS
        }

    @staticmethod
    def _log_in(browser: TestClient, person: Person) -> tuple[TestClient, str]:
        csrf = _CSRF.search(browser.get("/console/login").text)
        assert csrf is not None
        r = browser.post("/console/login", data={"key": person.key, "csrf": csrf.group(1)})
        assert r.status_code == 303, r.text
        token = _CSRF.search(browser.get("/console/pending").text)
        assert token is not None
        return browser, token.group(1)

    def pending(self, approver: Person) -> set[str]:
        browser, _ = self.browsers[approver.name]
        r = browser.get("/console/pending")
        assert r.status_code == 200, r.text
        return set(_LISTED.findall(r.text))

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        browser, csrf = self.browsers[approver.name]
        r = browser.post(
            f"/console/invocations/{invocation_id}/decision",
            data={"csrf": csrf, "digest": digest, "decision": "approve" if approve else "deny"},
        )
        if r.status_code != 303:
            code = _ERROR_CODE.search(r.text)
            assert code is not None, r.text
            return Refused(code.group(1), r.status_code)
        ended = _ENDED.search(browser.get(r.headers["location"]).text)
        assert ended is not None
        return Decided(ended.group(1))

    def deny_saying(self, invocation_id: str, digest: str, approver: Person, reason: str) -> str:
        browser, csrf = self.browsers[approver.name]
        r = browser.post(
            f"/console/invocations/{invocation_id}/decision",
            data={"csrf": csrf, "digest": digest, "decision": "deny", "reason": reason},
        )
        assert r.status_code == 303, r.text
        return self.told(invocation_id)

    @contextmanager
    def twin(self) -> Iterator[Console]:
        other = Console(self.folder, self.clock, self.tool)
        try:
            yield other
        finally:
            other.close()

    def close(self) -> None:
        for browser, _ in self.browsers.values():
            browser.close()
        super().close()


# -- (5) the MCP ConfirmationEndpoint -----------------------------------------------------


class McpEndpoint:
    """``GET /confirmations`` and ``POST /confirmations/{id}`` over a runtime holding calls."""

    refusals = MCP_ENDPOINT
    cannot: Mapping[str, str] = {}
    known_bugs: Mapping[str, str] = {}

    def __init__(
        self, held: _ParkingRuntime, endpoint: ConfirmationEndpoint, *, owner: bool
    ) -> None:
        self.held, self.endpoint, self.owner = held, endpoint, owner
        self.client = TestClient(Starlette(routes=endpoint.routes()))

    @classmethod
    def open(cls, clock: FixedClock) -> McpEndpoint:
        held = _ParkingRuntime(clock)
        principals = {p.key: p.principal() for p in PEOPLE}
        endpoint = ConfirmationEndpoint(held.runtime, principals.get, four_eyes=True)
        return cls(held, endpoint, owner=True)

    def park(self, arguments: Mapping[str, object]) -> Parked:
        return self.held.park(arguments)

    def pending(self, approver: Person) -> set[str]:
        r = self.client.get("/confirmations", headers=_bearer(approver))
        assert r.status_code == 200, r.text
        return {c["invocation_id"] for c in r.json()["confirmations"]}

    def decide(self, invocation_id: str, digest: str, approver: Person, *, approve: bool) -> Result:
        r = self.client.post(
            f"/confirmations/{invocation_id}",
            json={"digest": digest, "decision": "approve" if approve else "deny"},
            headers=_bearer(approver),
        )
        if r.status_code != 200:
            return _refused(r)
        return Decided(r.json()["status"])

    def deny_saying(self, invocation_id: str, digest: str, approver: Person, reason: str) -> str:
        r = self.client.post(
            f"/confirmations/{invocation_id}",
            json={"digest": digest, "decision": "deny", "reason": reason},
            headers=_bearer(approver),
        )
        assert r.status_code == 200, r.text
        return str(r.json()["message"]["content"])

    def effects(self) -> int:
        return self.held.effects()

    @contextmanager
    def twin(self) -> Iterator[McpEndpoint]:
        # Another HTTP client on the same endpoint and runtime.
        other = McpEndpoint(self.held, self.endpoint, owner=False)
        try:
            yield other
        finally:
            other.close()

    def desks(self) -> list[ConfirmationDesk]:
        # The endpoint's own desk (four eyes on) over the runtime's held calls.
        return [self.endpoint.desk]

    def close(self) -> None:
        self.client.close()
        if self.owner:
            self.held.close()


SURFACES: Mapping[str, Callable[[Path, FixedClock], Surface]] = {
    "runtime-desk": lambda _folder, clock: RuntimeDesk(clock),
    "runtime-approve": lambda _folder, clock: RuntimeApprove(clock),
    "service": InProcessService,
    "http-api": HttpApi,
    "console": Console,
    "mcp-endpoint": lambda _folder, clock: McpEndpoint.open(clock),
}
