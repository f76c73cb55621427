"""No trust by coincidence: a short value is trusted only as a whole value in its role.

An id as an id, never a piece of a date, a time, an amount or prose.
"""

from __future__ import annotations

import pytest

from harness import spec
from provenance_support import S, decide, session, write
from toolbound.gates.authorize import Allow, Confirm
from toolbound.provenance import FlowPolicy, Provenance, TrustedSource, short_terms

DELETE = write("drive.delete", file_id=S)
MOVE = write("calendar.move", event_id=S, start={"type": "string", "format": "time"})
PAY = write("bank.pay", payee=S, amount={"type": "number"})
SEARCH = spec("drive.search", reads_untrusted=True, reads_private=True)


@pytest.mark.parametrize(
    "prompt",
    [
        "Move the June 13 meeting to the afternoon.",
        "Is anything planned on 13 June?",
        "Remind me on the 13th.",
        "Book the table for 13:00.",
        "Pay the 13 EUR fee.",
        "We are 13 people.",
        "Archive the 2013 report.",
        "What changed on 13/07/2026?",
    ],
)
def test_a_number_inside_a_date_time_amount_or_count_never_trusts_an_id(prompt):
    """delete_file('13') after a prompt that holds 13 only as a quantity: a person confirms."""
    decision = decide(DELETE, {"file_id": "13"}, session(prompt))
    assert isinstance(decision, Confirm)
    assert [f.concern for f in decision.evidence] == ["no_trusted_source"]


@pytest.mark.parametrize(
    "prompt",
    ["Delete file 13.", "delete 13 please", "Remove drive item #13", "13", "Delete drive/13."],
)
def test_a_number_the_user_wrote_as_an_id_trusts_the_id(prompt):
    """'13' written on its own, as a path part or marked '#' is an id the user gave."""
    assert isinstance(decide(DELETE, {"file_id": "13"}, session(prompt)), Allow)


def test_the_same_number_still_vouches_for_the_quantity_it_was():
    """'Pay Rita 13 EUR': the amount 13 is trusted by the strict rule; the id '13' is not."""
    index = session("Pay Rita 13 EUR.")
    strict = FlowPolicy(TrustedSource("bank.pay", "/amount"), TrustedSource("drive.delete", ""))
    assert isinstance(decide(PAY, {"payee": "Rita", "amount": 13}, index, strict), Allow)
    assert isinstance(decide(DELETE, {"file_id": "13"}, index, strict), Confirm)


def test_a_time_the_user_wrote_is_trusted_as_a_time():
    """'at 10:00' vouches for a start '10:00' even under the strict rule, which knows no roles."""
    strict = FlowPolicy(TrustedSource("calendar.move", ""))
    index = session("Move event ev-77 to 10:00.")
    assert isinstance(decide(MOVE, {"event_id": "ev-77", "start": "10:00"}, index, strict), Allow)


@pytest.mark.parametrize("word", ["the", "file", "it", "me"])
def test_a_lower_case_word_of_prose_is_no_identifier(word):
    """A target 'the' or 'file' is not trusted because the sentence said 'delete the file'."""
    index = session("Please delete the file it sent me.")
    assert isinstance(decide(DELETE, {"file_id": word}, index), Confirm)


def test_names_ids_with_digits_and_marked_words_are_identifiers():
    """'Fred', 'f2' and '#ops' stand as identifiers; 'June' is a word, '13' a day."""
    ids, quantities = short_terms("Tell Fred to drop f2 in #ops by June 13.", 6)
    assert {"fred", "f2", "ops"} <= ids
    assert "13" not in ids
    assert "13" in quantities
    assert {"tell", "drop", "in", "by", "june"}.isdisjoint(ids)


def test_a_short_whole_field_of_a_trusted_source_is_an_identifier():
    """A trusted record's field '13' is a whole value: it vouches for the id '13'."""
    catalogue = spec("drive.mine", reads_untrusted=False, reads_private=True)
    index = session("Tidy my drive.", (catalogue, [{"id": "13", "name": "old-draft"}]))
    assert isinstance(decide(DELETE, {"file_id": "13"}, index), Allow)


def test_an_untrusted_result_still_vouches_for_no_short_value():
    """A search result naming file 13 gives it no trusted source, as before."""
    index = session("Find my old draft.", (SEARCH, [{"id": "13", "text": "old draft"}]))
    assert isinstance(decide(DELETE, {"file_id": "13"}, index), Confirm)
    assert Provenance().min_length == 6


@pytest.mark.parametrize(
    "prompt", ["Summarize the 2 newest issues.", "Show the top 2 results.", "Review 2 files."]
)
def test_a_count_before_what_it_counts_is_no_id(prompt):
    """'the 2 newest', 'top 2', '2 files': a count; only 'issue 2' would name one."""
    assert isinstance(decide(DELETE, {"file_id": "2"}, session(prompt)), Confirm)
    assert isinstance(decide(DELETE, {"file_id": "2"}, session("Close issue 2.")), Allow)
