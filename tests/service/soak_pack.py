"""A tool pack for the replica soak: slow writes whose effects live outside toolbound.

The tools have the service pack's names, capabilities and grants. Each real side
effect is one file in the directory named by ``TOOLBOUND_SOAK_EFFECTS``, created
before the tool returns and named after the note's text, so a test counts double
executions from the effects themselves, not from toolbound's records. The same
directory answers the reconciliation query (did this note's effect happen?).

A note's text says how it runs:

* ``w-N-BEFORE-AFTER``: sleep BEFORE ms, make the effect, sleep AFTER ms, return
  (a kill lands before the effect, or after it and before the ledger commits);
* ``gate-STAGE-NAME``: stop at STAGE — ``check`` (the target check, after any
  decision and before the ledger's intent), ``before`` (the tool started, no effect
  yet), ``after`` (effect made, tool not returned) or ``commit`` (the read-back: the
  ledger has recorded the commit, the journal not yet) — write ``NAME.reached`` in the
  directory named by ``TOOLBOUND_SOAK_GATES`` and wait there for ``NAME.open``, so a
  test kills the process exactly at that boundary.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from toolbound import Registry, ToolOutput, ToolSpec
from toolbound._model import ReadBack
from toolbound.execution.reconcile import RemoteCommitted, RemoteNotCommitted

EFFECTS_ENV = "TOOLBOUND_SOAK_EFFECTS"
GATES_ENV = "TOOLBOUND_SOAK_GATES"
_GATE_WAIT = 120.0  # seconds a gate holds before it lets the call go on by itself
_SEP = "~"


def effects_dir() -> Path:
    return Path(os.environ[EFFECTS_ENV])


def effect_counts(directory: Path) -> dict[str, int]:
    """How many times each note's effect happened, by its text."""
    counts: dict[str, int] = {}
    for path in directory.iterdir():
        text = path.name.split(_SEP, 1)[0]
        counts[text] = counts.get(text, 0) + 1
    return counts


def _effect(text: str, invocation_id: str) -> None:
    # One new file per execution: two executions of one note are two files.
    name = f"{text}{_SEP}{os.getpid()}{_SEP}{time.monotonic_ns()}"
    (effects_dir() / name).write_text(invocation_id)


def _happened(text: str) -> bool:
    return any(p.name.split(_SEP, 1)[0] == text for p in effects_dir().iterdir())


def gate(text: str, stage: str) -> None:
    """Hold a ``gate-STAGE-NAME`` note at ``stage`` until the test opens it."""
    parts = text.split("-", 2)
    if len(parts) != 3 or parts[0] != "gate" or parts[1] != stage:
        return
    gates = Path(os.environ[GATES_ENV])
    (gates / f"{parts[2]}.reached").write_text(str(os.getpid()))
    deadline = time.monotonic() + _GATE_WAIT
    while not (gates / f"{parts[2]}.open").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def _delays(text: str) -> tuple[float, float]:
    parts = text.split("-")
    if len(parts) == 4 and parts[0] == "w":
        return int(parts[2]) / 1000, int(parts[3]) / 1000
    return 0.0, 0.0


def register(registry: Registry) -> None:
    def write(arguments, ctx, prefix: str = ""):
        text = arguments["text"]
        before, after = _delays(text)
        time.sleep(before)
        gate(text, "before")
        _effect(prefix + text, ctx.invocation.invocation_id)
        gate(text, "after")
        time.sleep(after)
        return text

    def add(arguments, ctx):
        return ToolOutput({"saved": write(arguments, ctx)}, external_resource_id="note")

    def send(arguments, ctx):
        return {"sent": write(arguments, ctx, prefix="send:")}

    def check(invocation):
        gate(str(invocation.arguments["text"]), "check")

    def read_back(invocation, value):
        gate(str(invocation.arguments["text"]), "commit")
        return ReadBack(matches=True, observed=value)

    def query(prefix: str):
        def ask(call):
            text = prefix + str(call.arguments["text"])
            if _happened(text):
                value = {"saved": call.arguments["text"]} if not prefix else None
                return RemoteCommitted(value=value, evidence={"effect": text})
            return RemoteNotCommitted(evidence={"no_effect": text})

        return ask

    def shout(arguments, ctx):
        return {"text": arguments["text"].upper()}

    text_in = {
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200}},
        "required": ["text"],
        "additionalProperties": False,
    }
    registry.register(
        ToolSpec(
            name="notes.add",
            version="v1",
            description="Save a note.",
            input_schema=text_in,
            output_schema={
                "type": "object",
                "properties": {"saved": {"type": "string"}},
                "required": ["saved"],
                "additionalProperties": False,
            },
            effect="reversible_write",
            capabilities=("notes:write",),
            idempotency="native_key",
            target_check=check,
            read_back=read_back,
            query=query(""),
            timeout=60.0,
        ),
        add,
    )
    registry.register(
        ToolSpec(
            name="notes.send",
            version="v1",
            description="Send a note to someone.",
            input_schema=text_in,
            effect="irreversible_write",
            capabilities=("notes:send",),
            idempotency="native_key",
            target_check=check,
            read_back=read_back,
            query=query("send:"),
            timeout=60.0,
        ),
        send,
    )
    registry.register(
        ToolSpec(
            name="notes.shout",
            version="v1",
            description="Upper-case a text.",
            input_schema=text_in,
            effect="read",
            capabilities=("notes:read",),
        ),
        shout,
        inline=True,
    )
