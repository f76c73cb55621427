"""A payment tool whose schema explains itself, and the findings a flow policy records.

The console shows a person the tool's description and each parameter's description
beside the values, and the provenance findings per parameter. The service's grant
policy records no provenance itself, so :func:`record_findings` writes findings made
by the library's own :class:`~toolbound.provenance.labels.Finding` into a parked call
exactly where a flow policy's would be stored (the confirmation request and the human
projection).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from service_pack import effects_file

from toolbound import Registry, ToolSpec
from toolbound.provenance.labels import Finding, Label, Match, Source

if TYPE_CHECKING:
    from toolbound.journal import Journal

GRANTS = "".join(
    f'\n[[grant]]\nsubject = "{subject}"\ntenant = "{tenant}"\n'
    'capability = "payments:send"\nactions = ["create"]\nconfirm = true\n'
    for subject, tenant in (("agent-1", "acme"), ("eve", "globex"))
)
PACKS = (
    'packs = ["service_pack:register"]',
    'packs = ["service_pack:register", "console_pack:register"]',
)

TRANSFER = ToolSpec(
    name="payments.transfer",
    version="v1",
    description="Send money from the user's account. Amounts are in cents.",
    input_schema={
        "type": "object",
        "properties": {
            "recipient": {
                "type": "string",
                "format": "email",
                "description": "Who receives the money: their e-mail address.",
            },
            "amount": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100000,
                "description": "How much, in cents (300 is 3.00).",
            },
            "memo": {"type": "string", "maxLength": 140},
        },
        "required": ["recipient", "amount"],
        "additionalProperties": False,
    },
    effect="irreversible_write",
    capabilities=("payments:send",),
    idempotency="native_key",
)


def register(registry: Registry) -> None:
    def transfer(arguments, ctx):
        with effects_file().open("a") as f:
            f.write(f"transfer:{arguments['recipient']}:{arguments['amount']}\n")
        return {"sent": arguments["amount"]}

    registry.register(TRANSFER, transfer)


def config_with_payments(text: str) -> str:
    """A service configuration from ``service_config.config_text`` with this pack granted."""
    assert PACKS[0] in text
    return text.replace(*PACKS) + GRANTS


EMAIL_LIST = Label(
    origin="tool", tool="email.list", version="v1", invocation_id="3f2a9c0d11", untrusted=True
)
RECIPIENT_FINDING = Finding(
    concern="untrusted_source",
    pointer="/recipient",
    value="mallory@evil.example",
    matches=(
        Match(
            text="mallory@evil.example",
            whole=True,
            sources=(Source(label=EMAIL_LIST, at="/2/body"),),
        ),
    ),
    rule="no-untrusted-recipients",
)
SCOPE_FINDING = Finding(
    concern="out_of_scope", pointer="", value="payments.transfer@v1", rule="task-scope"
)


def record_findings(journal: Journal, invocation_id: str, *findings: Finding) -> None:
    """Store ``findings`` with a parked call, where a flow policy's findings are kept."""
    call = journal.get_call(invocation_id)
    assert call is not None
    found = [f.as_json() for f in findings]
    body = dict(call.body)
    body["confirmation"] = {**dict(body["confirmation"]), "evidence": found}
    body["human"] = {**dict(body["human"]), "evidence": found}
    journal.put_call(replace(call, body=body))
