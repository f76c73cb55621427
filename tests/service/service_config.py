"""The service tests' configuration: one principal per role, grants over the test pack."""

from __future__ import annotations

from toolbound.config import hash_key

DATABASE = "toolbound_tests"

KEYS = {
    "agent": "agent-key",
    "ana": "approver-key",
    "ops": "operator-key",
    "eve": "other-tenant-key",
    "self": "self-approver-key",
}


def config_text(
    store_url: str, *, four_eyes: bool = True, confirm_writes: bool = True, extra: str = ""
) -> str:
    """A service configuration over the test pack, with one principal per role."""
    principals = [
        ("agent", "agent-1", "acme", '["agent"]'),
        ("ana", "ana", "acme", '["approver"]'),
        ("ops", "ops", "acme", '["operator", "approver"]'),
        ("eve", "eve", "globex", '["agent", "approver", "operator"]'),
        ("self", "agent-1", "acme", '["agent", "approver"]'),
    ]
    text = f'[store]\nurl = "{store_url}"\n\n[tools]\npacks = ["service_pack:register"]\n'
    for name, subject, tenant, roles in principals:
        text += (
            f'\n[[principal]]\nname = "{name}"\nkey_sha256 = "{hash_key(KEYS[name])}"\n'
            f'subject = "{subject}"\ntenant = "{tenant}"\nroles = {roles}\n'
        )
    for subject, tenant in (("agent-1", "acme"), ("eve", "globex")):
        text += (
            f'\n[[grant]]\nsubject = "{subject}"\ntenant = "{tenant}"\n'
            'capability = "notes:write"\nactions = ["create"]\n'
            f"confirm = {str(confirm_writes).lower()}\n"
            f'\n[[grant]]\nsubject = "{subject}"\ntenant = "{tenant}"\n'
            'capability = "notes:send"\nactions = ["create"]\nconfirm = true\n'
            f'\n[[grant]]\nsubject = "{subject}"\ntenant = "{tenant}"\n'
            'capability = "notes:read"\nactions = ["read"]\n'
        )
    text += f"\n[service]\nfour_eyes = {'true' if four_eyes else 'false'}\n" + extra
    return text
