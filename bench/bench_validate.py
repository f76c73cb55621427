"""Which JSON Schema validator the validation gate uses, decided by measurement (R4).

Runs both candidates in the same process on the same inputs and prints:

1. the official JSON Schema Test Suite (draft 2020-12) pass rates per group — required,
   optional, format — with the suite's remotes served from disk (no network);
2. ECMA-262 ``pattern`` semantics on the two inputs that trip Python's ``re``;
3. compile time (meta-schema check + build) and validation throughput on real tool
   schemas: the BFCL v4 corpus mapped to JSON Schema, plus a hand-written orders schema;
4. the toolbound gate (``CompiledSchema``) against the bare chosen validator.

Ratios are ``jsonschema`` time / ``jsonschema-rs`` time (above 1: jsonschema-rs is faster).

    .venv/bin/python bench/bench_validate.py            # full run, about a minute
    .venv/bin/python bench/bench_validate.py --quick    # a sample, a few seconds
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import jsonschema
import jsonschema_rs
import referencing
from jsonschema.exceptions import best_match
from referencing.jsonschema import DRAFT202012

from toolbound._errors import Rejection
from toolbound.gates.validate import CompiledSchema

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SUITE = DATA / "json-schema-test-suite"
TESTS = SUITE / "tests" / "draft2020-12"
REMOTES = SUITE / "remotes"
REMOTE_BASE = "http://localhost:1234/"
BFCL = DATA / "bfcl"

GROUPS = {
    "required": TESTS,
    "optional": TESTS / "optional",
    "format": TESTS / "optional" / "format",
}

Schema = dict[str, object]
Check = Callable[[object], bool]


# --- the two candidates, each as its documented configuration --------------------------


def remote(uri: str) -> object:
    """Serve the suite's remotes/ folder for http://localhost:1234/ — no network."""
    if not uri.startswith(REMOTE_BASE):
        raise LookupError(uri)
    path = REMOTES / uri.removeprefix(REMOTE_BASE).partition("#")[0]
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True, slots=True)
class Candidate:
    """One validator: how to compile (meta-schema check included) and how to ask."""

    name: str
    version: str
    compile: Callable[[object, bool], object]
    checker: Callable[[object], Check]
    """The bound yes/no method, so that timing adds no wrapper call."""
    explainer: Callable[[object], Callable[[object], object]]
    """The first error (jsonschema-rs) or the best one (jsonschema's best_match)."""

    def is_valid(self, validator: object, instance: object) -> bool:
        """Ask the compiled ``validator`` about ``instance``."""
        return self.checker(validator)(instance)


def _remote_registry() -> jsonschema_rs.Registry:
    """Load the suite's remotes as a registry, for the meta-schemas it names in $schema.

    ``v1/`` is left out: it is written for a future dialect jsonschema-rs does not know.
    """
    resources = [
        (REMOTE_BASE + path.relative_to(REMOTES).as_posix(), remote_path(path))
        for path in sorted(REMOTES.rglob("*.json"))
        if path.relative_to(REMOTES).parts[0] != "v1"
    ]
    return jsonschema_rs.Registry(resources)


def remote_path(path: Path) -> object:
    """Read one JSON file of the suite's remotes."""
    return json.loads(path.read_text(encoding="utf-8"))


REGISTRY = _remote_registry()


def _rs_compile(schema: object, assert_format: bool) -> object:  # noqa: FBT001
    jsonschema_rs.meta.validate(schema, registry=REGISTRY)
    return jsonschema_rs.validator_for(
        schema,
        validate_formats=assert_format,
        retriever=remote,
    )


def _py_compile(schema: object, assert_format: bool) -> object:  # noqa: FBT001
    def retrieve(uri: str) -> referencing.Resource[object]:
        return referencing.Resource.from_contents(remote(uri), default_specification=DRAFT202012)

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(
        schema,
        registry=referencing.Registry(retrieve=retrieve),
        format_checker=cls.FORMAT_CHECKER if assert_format else None,
    )


RS = Candidate(
    name="jsonschema-rs",
    version=version("jsonschema-rs"),
    compile=_rs_compile,
    checker=lambda v: v.is_valid,
    explainer=lambda v: lambda x: next(v.iter_errors(x), None),
)
PY = Candidate(
    name="jsonschema",
    version=version("jsonschema"),
    compile=_py_compile,
    checker=lambda v: v.is_valid,
    explainer=lambda v: lambda x: best_match(v.iter_errors(x)),
)
CANDIDATES = (RS, PY)


# --- 1. the official test suite ----------------------------------------------------------


def suite_rates(candidate: Candidate) -> dict[str, tuple[int, int]]:
    """Count passed and total per group; a schema that does not compile fails its tests."""
    rates = {}
    for group, folder in GROUPS.items():
        passed = total = 0
        for path in sorted(folder.glob("*.json")):
            for block in json.loads(path.read_text(encoding="utf-8")):
                try:
                    validator = candidate.compile(block["schema"], group == "format")
                except Exception:  # noqa: BLE001 - any refusal counts as failing the case
                    validator = None
                for test in block["tests"]:
                    total += 1
                    try:
                        ok = validator is not None and (
                            candidate.is_valid(validator, test["data"]) == test["valid"]
                        )
                    except Exception:  # noqa: BLE001 - e.g. Python re refusing \p{L}
                        ok = False
                    passed += ok
        rates[group] = (passed, total)
    return rates


# --- 3. realistic tool schemas -----------------------------------------------------------

BFCL_TYPES = {
    "dict": "object",
    "float": "number",
    "double": "number",
    "tuple": "array",
    "list": "array",
    "any": "string",
    "long": "integer",
    "short": "integer",
    "byte": "integer",
}


def to_json_schema(node: object, *, top: bool = False) -> object:
    """Map BFCL's type names to JSON Schema and drop ``optional`` (see data/README.md).

    The top-level object gets ``additionalProperties: false``, as a toolbound tool
    contract would (R4: invented fields are rejected).
    """
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, object] = {}
    for key, value in node.items():
        if key == "optional":
            continue
        if key == "type" and isinstance(value, str):
            out[key] = BFCL_TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in {"items", "additionalProperties"}:
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    if top and out.get("type") == "object":
        out["additionalProperties"] = False
    return out


def answer_value(options: list[object]) -> tuple[bool, object]:
    """First acceptable answer for one argument; ``""`` means it may be omitted."""
    for option in options:
        if option != "":
            return True, expand(option)
    return False, None


def expand(value: object) -> object:
    """Nested objects in BFCL answers list options per member, like the top level."""
    if isinstance(value, dict):
        out = {}
        for key, options in value.items():
            present, chosen = answer_value(options if isinstance(options, list) else [options])
            if present:
                out[key] = chosen
        return out
    return value


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool schema with an instance it accepts and one with an invented field."""

    name: str
    schema: Schema
    valid: dict[str, object]
    invalid: dict[str, object]


def bfcl_tools() -> Iterator[tuple[str, Schema, dict[str, object] | None]]:
    """Every BFCL function schema, with the ground-truth call when there is one."""
    # Categories with ground truth first, so that a --quick sample has calls to validate.
    paths = sorted(
        BFCL.glob("BFCL_v4_*.json"),
        key=lambda p: (not (BFCL / "possible_answer" / p.name).exists(), p.name),
    )
    for path in paths:
        answers: dict[str, list[dict[str, dict[str, list[object]]]]] = {}
        answer_path = BFCL / "possible_answer" / path.name
        if answer_path.exists():
            for line in answer_path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                answers[row["id"]] = row["ground_truth"]
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            calls = {
                name: args for call in answers.get(row["id"], []) for name, args in call.items()
            }
            for function in row["function"]:
                schema = to_json_schema(function["parameters"], top=True)
                args = calls.get(function["name"])
                instance = None
                if args is not None:
                    instance = {}
                    for key, options in args.items():
                        present, chosen = answer_value(options)
                        if present:
                            instance[key] = chosen
                yield function["name"], schema, instance


ORDERS_CREATE: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "customer", "lines"],
    "properties": {
        "order_id": {"type": "string", "pattern": r"^[A-Z]-\d{3}$"},
        "customer": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "email"],
            "properties": {
                "id": {"type": "string", "format": "uuid"},
                "email": {"type": "string", "format": "email"},
            },
        },
        "deliver_on": {"type": "string", "format": "date"},
        "priority": {"enum": ["low", "normal", "high"]},
        "note": {"anyOf": [{"type": "string", "maxLength": 500}, {"type": "null"}]},
        "lines": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["sku", "quantity"],
                "properties": {
                    "sku": {"type": "string", "pattern": "^[a-z0-9-]{2,32}$"},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 999},
                    "unit_price": {"type": "number", "exclusiveMinimum": 0},
                },
            },
        },
    },
}
ORDERS_VALID = {
    "order_id": "A-104",
    "customer": {"id": "8c1e7d5e-1f5a-4c1b-9a57-3f3f0b6d2a11", "email": "ana@example.com"},
    "deliver_on": "2026-07-20",
    "priority": "high",
    "note": None,
    "lines": [{"sku": f"sku-{i}", "quantity": i + 1, "unit_price": 2.5} for i in range(10)],
}


def realistic_tools(limit: int | None) -> tuple[list[Tool], list[Schema]]:
    """Tools with a valid and an invalid instance, and every distinct schema to compile."""
    tools = [
        Tool(
            name="orders.create (hand-written)",
            schema=ORDERS_CREATE,
            valid=ORDERS_VALID,
            invalid={**ORDERS_VALID, "discount": 50},
        )
    ]
    schemas: dict[str, Schema] = {}
    for name, schema, instance in bfcl_tools():
        if limit is not None and len(tools) > limit:
            break
        key = json.dumps(schema, sort_keys=True)
        try:
            validator = RS.compile(schema, True)  # noqa: FBT003
            PY.compile(schema, True)  # noqa: FBT003
        except Exception:  # noqa: BLE001, S112 - a few BFCL schemas stay invalid after mapping
            continue
        schemas[key] = schema
        if instance is None or not RS.is_valid(validator, instance):
            continue
        tools.append(Tool(name, schema, instance, {**instance, "zz_invented": 1}))
    return tools, list(schemas.values())


def per_call_us(run: Callable[[], object], calls: int, repeat: int) -> float:
    """Best-of-``repeat`` wall time of ``run`` (which makes ``calls`` calls), µs per call."""
    best = min(_elapsed(run) for _ in range(repeat))
    return best / calls * 1e6


def _elapsed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure_compile(schemas: list[Schema], repeat: int) -> dict[str, float]:
    """µs per schema for meta-schema check + build, format assertion on."""
    out = {}
    for candidate in CANDIDATES:

        def run(candidate: Candidate = candidate) -> None:
            for schema in schemas:
                candidate.compile(schema, True)  # noqa: FBT003

        out[candidate.name] = per_call_us(run, len(schemas), repeat)
    return out


def run_calls(calls: list[tuple[Callable[[object], object], object]], loops: int) -> None:
    """Make every call ``loops`` times; the one loop every measurement shares."""
    for _ in range(loops):
        for call, argument in calls:
            call(argument)


def measure_validate(
    tools: list[Tool], *, invalid: bool, loops: int, repeat: int
) -> dict[str, float]:
    """µs per call: ``is_valid`` on valid instances, first/best error on invalid ones."""
    out = {}
    for candidate in CANDIDATES:
        calls = []
        for tool in tools:
            validator = candidate.compile(tool.schema, True)  # noqa: FBT003
            if invalid:
                calls.append((candidate.explainer(validator), tool.invalid))
            else:
                calls.append((candidate.checker(validator), tool.valid))
        out[candidate.name] = per_call_us(
            lambda calls=calls: run_calls(calls, loops), loops * len(calls), repeat
        )
    return out


def _rejected(gate: CompiledSchema) -> Callable[[object], Rejection | None]:
    def call(instance: object) -> Rejection | None:
        try:
            gate.validate(instance)
        except Rejection as rejection:
            return rejection
        return None

    return call


def measure_gate(tools: list[Tool], *, loops: int, repeat: int) -> dict[str, float]:
    """µs per call through CompiledSchema versus the bare jsonschema-rs validator."""
    gates = [(CompiledSchema.compile(tool.schema), tool) for tool in tools]
    runs: dict[str, list[tuple[Callable[[object], object], object]]] = {
        "bare is_valid (valid)": [
            (RS.checker(RS.compile(tool.schema, True)), tool.valid)  # noqa: FBT003
            for tool in tools
        ],
        "gate validate (valid)": [(gate.validate, tool.valid) for gate, tool in gates],
        "gate validate → Rejection (invented field)": [
            (_rejected(gate), tool.invalid) for gate, tool in gates
        ],
    }
    return {
        label: per_call_us(lambda calls=calls: run_calls(calls, loops), loops * len(calls), repeat)
        for label, calls in runs.items()
    }


# --- report ------------------------------------------------------------------------------


def row(label: str, times: dict[str, float]) -> str:
    """Format one line: both candidates' µs per call and their ratio."""
    rs, py = times[RS.name], times[PY.name]
    return f"  {label:<44} {rs:>10.2f} {py:>12.2f} {py / rs:>9.1f}x"


def main() -> None:
    """Print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sample 100 schemas, fewer loops")
    args = parser.parse_args()
    limit, loops, repeat = (100, 3, 3) if args.quick else (None, 20, 5)

    print(f"candidates: {RS.name} {RS.version} (chosen), {PY.name} {PY.version}")
    print("\n1. JSON Schema Test Suite draft2020-12 (remotes from disk)")
    for candidate in CANDIDATES:
        start = time.perf_counter()
        rates = suite_rates(candidate)
        took = time.perf_counter() - start
        cells = ", ".join(
            f"{group} {passed}/{total} ({100 * passed / total:.1f}%)"
            for group, (passed, total) in rates.items()
        )
        print(f"  {candidate.name:<14} {cells}  [{took:.2f} s]")

    print("\n2. ECMA-262 pattern ^[A-Z]-\\d{3}$ (expected: True, False, False)")
    pattern_schema = {"type": "string", "pattern": r"^[A-Z]-\d{3}$"}
    for candidate in CANDIDATES:
        validator = candidate.compile(pattern_schema, True)  # noqa: FBT003
        verdicts = [candidate.is_valid(validator, s) for s in ("A-104", "A-104\n", "A-١٠٤")]
        print(f"  {candidate.name:<14} 'A-104', 'A-104\\n', 'A-١٠٤' → {verdicts}")

    tools, schemas = realistic_tools(limit)
    sizes = [len(json.dumps(tool.schema)) for tool in tools]
    print(
        f"\n3. Real tool schemas: {len(schemas)} distinct BFCL v4 schemas to compile, "
        f"{len(tools)} tools with a ground-truth call "
        f"(median schema {statistics.median(sizes):.0f} B)"
    )
    print(f"  {'µs per call':<44} {RS.name:>10} {PY.name:>12} {'ratio':>10}")
    print(row("compile (meta-schema check + build)", measure_compile(schemas, repeat)))
    print(
        row(
            "is_valid, valid call",
            measure_validate(tools, invalid=False, loops=loops, repeat=repeat),
        )
    )
    print(
        row(
            "first/best error, invented field",
            measure_validate(tools, invalid=True, loops=loops, repeat=repeat),
        )
    )
    orders = tools[:1]
    print(
        row(
            "orders.create is_valid, valid call",
            measure_validate(orders, invalid=False, loops=loops * 100, repeat=repeat),
        )
    )
    print(
        row(
            "orders.create first/best error",
            measure_validate(orders, invalid=True, loops=loops * 100, repeat=repeat),
        )
    )

    print(f"\n4. The gate (CompiledSchema) over {len(tools)} tools, µs per call")
    gate = measure_gate(tools, loops=loops, repeat=repeat)
    base = gate["bare is_valid (valid)"]
    for label, us in gate.items():
        print(f"  {label:<44} {us:>10.2f}  ({us / base:.2f}x bare)")


if __name__ == "__main__":
    main()
