"""Edit, then approve, over the API (R7, R14): the corrected call in the shown one's place."""

from __future__ import annotations

import json

import pytest
from service_config import KEYS
from service_pack import effects


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def park(client, text: str) -> dict[str, object]:
    body = {"tool": "notes.add", "arguments": json.dumps({"text": text}), "call_id": "c-" + text}
    r = client.post("/v1/proposals", json=body, headers={**auth("agent"), "Idempotency-Key": text})
    assert r.status_code == 202, r.text
    return r.json()


def edit(client, parked, arguments: str, who: str = "ana"):
    return client.post(
        f"/v1/invocations/{parked['invocation_id']}/decision",
        json={"digest": parked["digest"], "decision": "edit", "arguments": arguments},
        headers=auth(who),
    )


def test_an_edit_runs_the_corrected_call_once_and_never_the_shown_one(client):
    """The corrected note is saved; the parked one ends cancelled, naming its replacement."""
    parked = park(client, "buy milk")
    r = edit(client, parked, '{"text": "buy oat milk"}')
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["status"] == "observed"
    assert done["call_id"] == parked["call_id"]  # the model's call id still pairs (R11)
    assert done["invocation_id"] != parked["invocation_id"]
    assert effects() == ["buy oat milk"]
    shown = client.get(f"/v1/invocations/{parked['invocation_id']}", headers=auth("ana")).json()
    assert (shown["status"], shown["decision"], shown["approver"]) == ("cancelled", "edited", "ana")
    assert shown["note"]["replaced_by"] == done["invocation_id"]


def test_the_corrected_call_s_trace_keeps_both_digests_and_the_editor(client):
    """R14: edited_from names the call replaced, the digest shown and who edited it."""
    parked = park(client, "a note")
    done = edit(client, parked, '{"text": "a better note"}').json()
    events = client.get(f"/v1/invocations/{done['invocation_id']}/trace", headers=auth("ana"))
    proposals = [e for e in events.json()["events"] if e["kind"] == "proposal"]
    assert proposals  # proposed, and proposed again with the editor's approval
    for proposal in proposals:
        assert proposal["data"]["edited_from"] == {
            "invocation_id": parked["invocation_id"],
            "digest": parked["digest"],
            "editor": "ana",
        }
    assert done["digest"] != parked["digest"]


def test_a_malformed_edit_is_refused_before_anything_is_decided(client):
    """A duplicate key: 422 with the parse gate's code (R3); the call still waits."""
    parked = park(client, "first")
    r = edit(client, parked, '{"text": "x", "text": "y"}')
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "duplicate_key"
    shown = client.get(f"/v1/invocations/{parked['invocation_id']}", headers=auth("ana")).json()
    assert (shown["status"], shown["decision"]) == ("awaiting_confirmation", None)
    assert effects() == []
    fixed = edit(client, parked, '{"text": "y"}')  # still decidable, by a sound edit
    assert fixed.status_code == 200, fixed.text
    assert effects() == ["y"]


def test_an_edit_the_gates_refuse_runs_nothing(client):
    """Text that parses but breaks the schema: the corrected call is rejected (R4)."""
    parked = park(client, "first")
    done = edit(client, parked, '{"text": ""}').json()
    assert done["status"] == "rejected"
    assert done["problem"]["kind"] == "validation"
    assert effects() == []


def test_four_eyes_hold_for_an_edit(client):
    """Nobody edits, and so approves, a call made for their own subject."""
    parked = park(client, "mine")
    r = edit(client, parked, '{"text": "mine, edited"}', who="self")
    assert r.status_code == 403
    assert r.json()["code"] == "four_eyes"
    assert effects() == []


def test_an_edit_is_the_call_s_one_decision(client):
    """After an edit the shown call is no longer pending: a second decision is refused."""
    parked = park(client, "once")
    assert edit(client, parked, '{"text": "once, edited"}').status_code == 200
    again = client.post(
        f"/v1/invocations/{parked['invocation_id']}/decision",
        json={"digest": parked["digest"], "decision": "approve"},
        headers=auth("ana"),
    )
    assert again.status_code == 409
    assert effects() == ["once, edited"]


@pytest.mark.parametrize(
    "body",
    [
        {"decision": "edit"},
        {"decision": "approve", "arguments": "{}"},
        {"decision": "edit", "arguments": {"text": "an object, not text"}},
    ],
)
def test_arguments_come_with_an_edit_and_only_with_one(client, body):
    """An edit without corrected text, or text with another decision, is 400."""
    parked = park(client, f"shape {len(str(body))}")
    r = client.post(
        f"/v1/invocations/{parked['invocation_id']}/decision",
        json={"digest": parked["digest"], **body},
        headers=auth("ana"),
    )
    assert r.status_code == 400
    assert r.json()["code"] == "bad_request_body"
