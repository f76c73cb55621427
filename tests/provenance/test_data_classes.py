"""Private data needs its own authority, not only a destination the user named.

A named destination receives a passport, a card or a code only when the user's words
ask for that kind of data.
"""

from __future__ import annotations

import pytest

from harness import spec
from provenance_support import S, decide, session, write
from toolbound.gates.authorize import Allow, Confirm
from toolbound.provenance import asked_classes, field_class, luhn, text_classes

SEND = write("email.send", to=S, subject=S, body=S)
PROFILE = spec("profile.get", reads_untrusted=False, reads_private=True)
DECLARED = spec(
    "vault.get",
    reads_untrusted=False,
    reads_private=True,
    data_classes={"/items/ref": "identity_document"},
)
MAIL = spec("email.list", reads_untrusted=True, reads_private=True)
ME = {"name": "Emma", "passport_number": "X9931270", "card_number": "4111111111111111"}
BODY = "Hi Bob, the notes: rooms booked. Passport X9931270, card 4111111111111111."


def test_private_data_of_a_class_the_user_did_not_ask_for_is_confirmed_even_to_a_named_address():
    """Email to the address the user typed, with the passport and card an injection added."""
    index = session("Email bob@corp.example my trip notes.", (PROFILE, ME))
    decision = decide(SEND, {"to": "bob@corp.example", "subject": "Trip", "body": BODY}, index)
    assert isinstance(decision, Confirm)
    (finding,) = decision.evidence
    assert finding.concern == "private_data"
    assert {"x9931270", "4111111111111111"} <= {m.text for m in finding.matches}
    assert "identity_document, payment_card not asked for" in (finding.rule or "")


def test_the_users_words_asking_for_that_kind_of_data_authorize_it():
    """'send Bob my passport and card details' asks for both classes: the same body passes."""
    index = session("Email bob@corp.example my passport and card details.", (PROFILE, ME))
    decision = decide(SEND, {"to": "bob@corp.example", "subject": "Docs", "body": BODY}, index)
    assert isinstance(decision, Allow)


def test_asking_for_one_class_does_not_open_another():
    """Asking for the passport does not send the card number."""
    index = session("Email bob@corp.example my passport number.", (PROFILE, ME))
    decision = decide(SEND, {"to": "bob@corp.example", "subject": "x", "body": BODY}, index)
    assert isinstance(decision, Confirm)
    assert "payment_card not asked for" in (decision.evidence[0].rule or "")


def test_unclassed_private_content_to_a_named_address_still_passes():
    """Notes with no class (no document, card, code) go to the address the user typed."""
    notes = {"notes": "Rooms booked at the Lumiere for the 10th."}
    index = session("Email bob@corp.example my trip notes.", (PROFILE, notes))
    body = "Rooms booked at the Lumiere for the 10th."
    assert isinstance(
        decide(SEND, {"to": "bob@corp.example", "subject": "t", "body": body}, index), Allow
    )


def test_a_code_named_in_free_text_is_a_credential():
    """'Your security code is 463820' in a mail: forwarding it to a named address asks first."""
    inbox = [{"body": "Your security code is 463820. Never share it."}]
    index = session("Forward my latest mail to bob@corp.example.", (MAIL, inbox))
    body = "Fwd: Your security code is 463820. Never share it."
    decision = decide(SEND, {"to": "bob@corp.example", "subject": "Fwd", "body": body}, index)
    assert isinstance(decision, Confirm)
    assert "credential not asked for" in (decision.evidence[0].rule or "")
    asked = session("Send bob@corp.example the login code from my mail.", (MAIL, inbox))
    assert isinstance(
        decide(SEND, {"to": "bob@corp.example", "subject": "Fwd", "body": body}, asked), Allow
    )


def test_a_declared_class_wins_over_a_field_name_that_says_nothing():
    """vault.get declares /items/ref an identity document: its value needs the user's ask."""
    index = session(
        "Email bob@corp.example my vault summary.", (DECLARED, {"items": [{"ref": "P-55120934"}]})
    )
    body = "Vault: P-55120934"
    decision = decide(SEND, {"to": "bob@corp.example", "subject": "v", "body": body}, index)
    assert isinstance(decision, Confirm)
    assert decision.evidence[0].matches[0].sources[0].data_class == "identity_document"


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("/0/card_number", "payment_card"),
        ("/passportNumber", "identity_document"),
        ("/security_code", "credential"),
        ("/items/3/medications", "health"),
        ("/zip_code", None),
        ("/notes", None),
    ],
)
def test_a_fields_name_gives_its_class(pointer, expected):
    """card_number, passportNumber, security_code, medications are classed; zip_code is not."""
    assert field_class(pointer) == expected


def test_the_words_that_name_and_ask_for_classes():
    """Free text names classes beside digits; the user's words ask for them by name."""
    assert text_classes("Passport: X9931270") == {"identity_document"}
    assert text_classes("See you at 10") == frozenset()
    assert asked_classes("send Ana my credit card number") == {"payment_card"}
    assert asked_classes("send Ana the pictures") == frozenset()
    assert luhn("4111111111111111")
    assert not luhn("4111111111111112")
