"""quick_init: a frozen value's quicker constructor behaves as the dataclass's own."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from toolbound._frozen import quick_init
from toolbound._model import Attempt, Invocation, Result
from toolbound._outcome import Observed
from toolbound.pipeline.call import Prepared
from toolbound.results.encode import HumanProjection


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plain:
    name: str
    tags: list[str] = field(default_factory=list)
    note: str = "-"
    kind: str = field(default="plain", init=False)


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class _Quick:
    name: str
    tags: list[str] = field(default_factory=list)
    note: str = "-"
    kind: str = field(default="plain", init=False)


@quick_init
@dataclass(frozen=True, slots=True, kw_only=True)
class _Checked:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(self.n)


@quick_init
@dataclass(frozen=True, slots=True)
class _Positional:
    a: int
    b: int = 2


def test_same_signature_as_the_dataclass_init() -> None:
    """Parameters, kinds and defaults are the dataclass's own."""
    plain = inspect.signature(_Plain.__init__).parameters
    quick = inspect.signature(_Quick.__init__).parameters
    assert [(p.name, p.kind) for p in plain.values()] == [(p.name, p.kind) for p in quick.values()]


def test_defaults_factories_and_init_false_fields() -> None:
    """Defaults apply, each factory builds a fresh value, init=False fields get theirs."""
    a, b = _Quick(name="x"), _Quick(name="y", tags=["t"], note="n")
    assert (a.name, a.tags, a.note, a.kind) == ("x", [], "-", "plain")
    assert (b.tags, b.note) == (["t"], "n")
    assert _Quick(name="z").tags is not a.tags
    assert dataclasses.astuple(a) == dataclasses.astuple(_Plain(name="x"))


def test_still_frozen_and_still_checked() -> None:
    """Assignment raises as before; __post_init__ still runs; a missing field is a TypeError."""
    value = _Quick(name="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.name = "y"  # type: ignore[misc]
    with pytest.raises(ValueError, match="-1"):
        _Checked(n=-1)
    with pytest.raises(TypeError, match="name"):
        _Quick()  # type: ignore[call-arg]


def test_positional_fields_and_replace() -> None:
    """A dataclass without kw_only keeps positional parameters; replace() works."""
    assert _Positional(1) == _Positional(a=1, b=2)
    assert dataclasses.replace(_Positional(1), b=5) == _Positional(1, 5)


def test_refuses_what_it_cannot_build() -> None:
    """Only frozen, slotted dataclasses."""

    @dataclass(slots=True)
    class Mutable:
        a: int

    with pytest.raises(TypeError, match="frozen, slotted"):
        quick_init(Mutable)


@pytest.mark.parametrize("cls", [Invocation, Attempt, Result, Observed, Prepared, HumanProjection])
def test_the_hot_values_use_it(cls: type) -> None:
    """The values built on every call have the quicker constructor."""
    init = cls.__dict__["__init__"]
    assert init.__module__ == cls.__module__
    assert any(name.startswith("_set_") for name in init.__code__.co_names)
