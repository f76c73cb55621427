"""The kit's case format: the bundled cases load, and malformed files are refused clearly."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest
from tool_runtime_conformance.cases import (
    FORMAT,
    CaseFormatError,
    Propose,
    bundled_cases,
    load_document,
    load_path,
)

R17_ROWS = set(
    json.loads(
        resources.files("tool_runtime_conformance").joinpath("case-file.schema.json").read_text()
    )["$defs"]["case"]["properties"]["r17_row"]["enum"]
)

GOOD = {
    "format": FORMAT,
    "title": "a small file",
    "tools": {
        "echo": {
            "description": "Repeat a text.",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object"},
            "effect": "read",
            "capability": "notes:read",
            "returns": {"text": "ok"},
        }
    },
    "subject": {"id": "mira", "tenant": "acme", "session": "s-1"},
    "grants": [{"capability": "notes:read"}],
    "cases": [
        {
            "id": "one",
            "title": "One call",
            "why": "It runs.",
            "requirements": ["R4"],
            "tools": ["echo"],
            "steps": [{"propose": {"call_id": "c1", "tool": "echo", "arguments": "{}"}}],
            "expect": {"calls": {"c1": "ran_once"}, "effects": {"echo": 1}},
        }
    ],
}


def broken(edit) -> str:
    document = copy.deepcopy(GOOD)
    edit(document)
    return json.dumps(document)


def first_case(document):
    return document["cases"][0]


def test_the_bundled_cases_load_and_number_at_least_sixty():
    """Every bundled file is valid format 1, and together they hold at least 60 cases."""
    cases = bundled_cases()
    assert len(cases) >= 60
    assert len({c.id for c in cases}) == len(cases)


def test_every_bundled_case_says_why_in_one_line():
    """Each case carries a one-line why and at least one requirement id."""
    for case in bundled_cases():
        assert case.why.strip(), case.id
        assert "\n" not in case.why, case.id
        assert case.requirements, case.id


def test_every_r17_row_has_a_case():
    """Each row of the R17 failure table is named by at least one case."""
    assert {c.r17_row for c in bundled_cases()} - {None} == R17_ROWS


def test_the_cases_span_r3_to_r11():
    """The cases cover every stage from parsing to the results sent back."""
    covered = {r for c in bundled_cases() for r in c.requirements}
    assert {"R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10", "R11", "R15", "R17"} <= covered


def test_raw_arguments_are_kept_byte_for_byte():
    """A proposal's arguments are the exact bytes of the file, base64 for non-UTF-8 ones."""
    steps = {c.id: c.steps for c in bundled_cases()}
    dup = steps["r3-duplicate-key"][0]
    bad = steps["r3-invalid-utf8"][0]
    assert isinstance(dup, Propose)
    assert dup.arguments == b'{"text": "hello", "text": "rm -rf /"}'
    assert isinstance(bad, Propose)
    assert bad.arguments == b'{"text": "caf\xe9"}'


def test_deltas_are_joined_into_the_arguments():
    """A streamed proposal keeps its deltas; its arguments are their concatenation."""
    (cut,) = next(c for c in bundled_cases() if c.id == "r15-stream-ended-before-the-call").steps
    assert isinstance(cut, Propose)
    assert cut.complete is False
    assert cut.arguments == "".join(cut.deltas).encode()
    assert len(cut.deltas) == 2


def test_a_good_document_loads():
    """The minimal document above is valid, with the file's grants and subject applied."""
    (case,) = load_document(json.dumps(GOOD), source="good.json")
    assert case.grants[0].subject == "mira"
    assert case.tools[0].version == "v1"


BROKEN = {
    "not JSON": ("{", "", "not JSON"),
    "another format": (broken(lambda d: d.update(format=2)), "/format", "1 was expected"),
    "no why": (broken(lambda d: first_case(d).pop("why")), "/cases/0", "'why' is a required"),
    "unknown result": (
        broken(lambda d: first_case(d)["expect"]["calls"].update(c1="ok")),
        "/cases/0/expect/calls/c1",
        "is not one of",
    ),
    "unknown effect class": (
        broken(lambda d: d["tools"]["echo"].update(effect="write")),
        "/tools/echo/effect",
        "is not one of",
    ),
    "two verbs in one step": (
        broken(lambda d: first_case(d)["steps"][0].update(deny={"call_id": "c1"})),
        "/cases/0/steps/0",
        "has too many properties",
    ),
    "a tool the file lacks": (
        broken(lambda d: first_case(d)["tools"].append("fetch")),
        "/cases/0/tools",
        "no tool 'fetch'",
    ),
    "approval of a call never proposed": (
        broken(lambda d: first_case(d)["steps"].append({"approve": {"call_id": "c9"}})),
        "/cases/0/steps/1/approve",
        "call 'c9' is not proposed",
    ),
    "a fault for a tool the case lacks": (
        broken(
            lambda d: first_case(d)["steps"].insert(
                0, {"fault": {"tool": "fetch", "fault": "hang_after_effect"}}
            )
        ),
        "/cases/0/steps/0/fault",
        "which the case does not list",
    ),
    "an expectation for no call": (
        broken(lambda d: first_case(d)["expect"]["calls"].update(c2="refused")),
        "/cases/0/expect/calls",
        "never proposed",
    ),
    "a call id proposed twice": (
        broken(lambda d: first_case(d)["steps"].append(copy.deepcopy(first_case(d)["steps"][0]))),
        "/cases/0/steps/1/propose",
        "proposed twice",
    ),
    "bad base64": (
        broken(
            lambda d: (
                first_case(d)["steps"][0]["propose"].update(arguments_base64="***", arguments=None)
                or first_case(d)["steps"][0]["propose"].pop("arguments")
            )
        ),
        "/cases/0/steps/0/propose/arguments_base64",
        "not base64",
    ),
    "a cut-off call without deltas": (
        broken(lambda d: first_case(d)["steps"][0]["propose"].update(complete=False)),
        "/cases/0/steps/0/propose",
        "cut off only when it arrives as deltas",
    ),
    "duplicate case ids": (
        broken(lambda d: d["cases"].append(copy.deepcopy(first_case(d)))),
        "/cases",
        "appears twice",
    ),
    "both argument forms": (
        broken(lambda d: first_case(d)["steps"][0]["propose"].update(arguments_base64="e30=")),
        "/cases/0/steps/0/propose",
        "is valid under each of",
    ),
}


@pytest.mark.parametrize(("text", "pointer", "words"), BROKEN.values(), ids=BROKEN.keys())
def test_the_loader_refuses_malformed_files_with_a_pointer(text, pointer, words):
    """A malformed file is refused with the file name, the JSON pointer and a sentence."""
    with pytest.raises(CaseFormatError) as caught:
        load_document(text, source="bad.json")
    assert caught.value.source == "bad.json"
    assert any(p == pointer and words in m for p, m in caught.value.problems), caught.value
    assert str(caught.value).startswith("bad.json: not a valid format-1 case file")


def test_a_folder_with_one_id_in_two_files_is_refused(tmp_path):
    """Case ids are unique across the files of a folder."""
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(GOOD))
    with pytest.raises(CaseFormatError, match="appears in two files"):
        load_path(tmp_path)
