"""Intent from the user's words: with no explicit scope, a write's intents must be said.

A write runs unasked only when the user's messages express one of its intents;
explicit scopes still win.
"""

from __future__ import annotations

import pytest

from harness import MIRA, grant, spec
from provenance_support import S, decide, session
from toolbound import AllOf, CallContext, GrantPolicy, Loop, Registry, Runtime
from toolbound.define import define
from toolbound.gates.authorize import Allow, Confirm
from toolbound.loop import ModelTurn
from toolbound.provenance import Provenance, guard_writes
from toolbound.provenance.intents import expresses, stem, stems
from toolbound.testing import call

BOOK_SCHEMA = {"type": "object", "properties": {"hotel": S}, "additionalProperties": False}
BOOK = spec(
    "travel.reserve_hotel",
    input_schema=BOOK_SCHEMA,
    effect="reversible_write",
    intents=("book", "reserve", "reservation"),
)
UNDECLARED = spec("travel.reserve_car", input_schema=BOOK_SCHEMA, effect="reversible_write")
CATALOGUE = spec("travel.hotels", reads_untrusted=False, reads_private=False)
HOTELS = [{"name": "Riverside Inn"}, {"name": "Hotel Lumiere"}]


@pytest.mark.parametrize(
    "prompt",
    [
        "Book the Riverside Inn.",
        "Could you reserve Riverside Inn?",
        "I'd like a booking at Riverside Inn",
        "Make a reservation at the Riverside Inn.",
    ],
)
def test_a_write_whose_intent_the_user_expressed_is_in_scope(prompt):
    """'book', 'booking', 'reserve', 'reservation': the booking tool runs unasked."""
    index = session(prompt, (CATALOGUE, HOTELS))
    assert isinstance(decide(BOOK, {"hotel": "Riverside Inn"}, index), Allow)


def test_a_write_the_user_never_asked_for_is_confirmed_out_of_scope():
    """A question about a hotel, then an injected booking of it: values trusted, the call asked."""
    index = session("What do people say about the Riverside Inn?", (CATALOGUE, HOTELS))
    decision = decide(BOOK, {"hotel": "Riverside Inn"}, index)
    assert isinstance(decision, Confirm)
    (finding,) = decision.evidence
    assert finding.concern == "out_of_scope"
    assert "ask for none of its intents: book, reserve, reservation" in decision.reason


def test_a_write_that_declares_no_intents_is_judged_as_before():
    """No intents declared: the user's words do not narrow it (a deployment opts in per tool)."""
    index = session("What do people say about the Riverside Inn?", (CATALOGUE, HOTELS))
    assert isinstance(decide(UNDECLARED, {"hotel": "Riverside Inn"}, index), Allow)


def test_an_explicit_scope_wins_over_the_users_words():
    """A planner's scope: in it, the tool runs though no intent was said; out of it, asked."""
    said_nothing = session(
        "Summarize the reviews of the Riverside Inn.",
        (CATALOGUE, HOTELS),
        scope={"travel.reserve_hotel"},
    )
    assert isinstance(decide(BOOK, {"hotel": "Riverside Inn"}, said_nothing), Allow)
    said_book = session("Book the Riverside Inn.", (CATALOGUE, HOTELS), scope={"email.send"})
    decision = decide(BOOK, {"hotel": "Riverside Inn"}, said_book)
    assert isinstance(decision, Confirm)
    assert decision.evidence[0].rule == "task_scope"


def test_only_the_users_words_count_not_the_runtimes_or_a_tools():
    """A system prompt or a review saying 'book now' expresses no intent of the user's."""
    index = Provenance()
    index.add_runtime("You can book hotels and reserve tables.")
    index.add_user("Tell me about the Riverside Inn.")
    index.add_result(CATALOGUE, "c1", [{"name": "Riverside Inn", "review": "Book now!"}])
    assert isinstance(decide(BOOK, {"hotel": "Riverside Inn"}, index), Confirm)


def test_the_failure_mode_one_book_opens_the_tool_for_the_whole_task():
    """'Book X, then compare Y': an injected booking of Y is in scope, and Y is the user's word.

    Without the second name the values decide: Y is a record of the listing the
    user's words do not select, so the injected booking of it is asked about.
    """
    named = session(
        "Book Hotel Lumiere, then compare it with the Riverside Inn.", (CATALOGUE, HOTELS)
    )
    assert isinstance(decide(BOOK, {"hotel": "Riverside Inn"}, named), Allow)
    unnamed = session("Book Hotel Lumiere, then summarize the reviews.", (CATALOGUE, HOTELS))
    decision = decide(BOOK, {"hotel": "Riverside Inn"}, unnamed)
    assert isinstance(decision, Confirm)
    assert [f.concern for f in decision.evidence] == ["untrusted_source"]


def scripted(*turns):
    steps = iter(turns)
    return lambda _transcript, _tools: next(steps, ModelTurn(text="Done."))


def test_the_loop_without_phases_narrows_its_tool_set_by_intents():
    """A Loop with one tool set: the booking the user did not ask for waits for a person."""
    registry = Registry()
    registry.register(BOOK, lambda _a, _c: {"text": "booked"})
    context = CallContext(subject=MIRA, tools=registry.toolset())
    policy = guard_writes(registry)
    turn = ModelTurn(proposals=(call("travel.reserve_hotel", {"hotel": "Riverside Inn"}, "p1"),))
    with Runtime(policy=AllOf(GrantPolicy([grant()]), policy)) as runtime:
        asked = Loop(runtime, scripted(turn), context=context).run("Tell me about Riverside Inn.")
        booked = Loop(runtime, scripted(turn), context=context).run("Book Riverside Inn.")
    kinds = [o.kind for s in asked.steps if s.batch for o in s.batch.outcomes]
    assert kinds == ["awaiting_confirmation"]
    assert [o.kind for s in booked.steps if s.batch for o in s.batch.outcomes] == ["observed"]


def test_words_are_compared_by_a_light_stem():
    """booking/booked/books → book; reserves/reserved → reserv; a phrase is consecutive words."""
    assert {stem(w) for w in ("book", "booking", "booked", "books")} == {"book"}
    assert stem("reserved") == stem("reserves") == stem("reserve")
    assert stem("cancelled") == stem("cancel")
    assert expresses([stems("Please send money to Ana")], ["send money"])
    assert not expresses([stems("Send Ana the money list")], ["send money"])


def test_define_takes_intents_and_data_classes_beside_the_function():
    """define(fn, intents=..., data_classes=...) lands both on the spec."""

    def reserve(hotel: str) -> dict[str, str]:
        """Reserve a hotel."""
        return {"hotel": hotel}

    tool = define(
        reserve,
        effect="reversible_write",
        capabilities=("travel:book",),
        intents=("book", "reserve"),
        data_classes={"/guest_passport": "identity_document"},
    )
    assert tool.spec.intents == ("book", "reserve")
    assert dict(tool.spec.data_classes) == {"/guest_passport": "identity_document"}
