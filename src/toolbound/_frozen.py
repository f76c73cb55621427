"""A quicker ``__init__`` for the frozen values built on every call.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (its own ``__setattr__`` refuses), which costs more than
the value is worth when a dozen such values are built per call. :func:`quick_init`
gives a frozen, slotted dataclass an ``__init__`` with the same signature, defaults,
factories and ``__post_init__`` that stores each field through its slot's own
descriptor instead: the value stays exactly as frozen (assignment still raises),
and builds in about two thirds of the time.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, cast

__all__ = ["quick_init"]

T = TypeVar("T")

_FACTORY = object()
"""The default of a parameter whose field has a default factory."""


def quick_init(cls: type[T]) -> type[T]:
    """Replace ``cls.__init__`` (a frozen, slotted dataclass) by a slot-setting one."""
    fields = dataclasses.fields(cast("Any", cls))
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        msg = f"{cls.__qualname__} is not a frozen, slotted dataclass"
        raise TypeError(msg)
    if getattr(cls, "__dataclass_fields__", {}).keys() != {f.name for f in fields}:
        msg = f"{cls.__qualname__} has init-only or class variables; keep its own __init__"
        raise TypeError(msg)
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        namespace[f"_set_{f.name}"] = _slot(cls, f.name)
        value = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            param = f"{f.name}=_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            param = f"{f.name}=_FACTORY"
            value = f"_factory_{f.name}() if {f.name} is _FACTORY else {f.name}"
        else:
            param = f.name
        if not f.init:
            body.append(f"    _set_{f.name}(self, {_initial(f)})")
            continue
        (keyword if f.kw_only else positional).append(param)
        body.append(f"    _set_{f.name}(self, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, namespace)  # noqa: S102 - the source is built from the class's own fields
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _slot(cls: type, name: str) -> Any:  # noqa: ANN401 - a slot descriptor's setter
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name].__set__
    msg = f"{cls.__qualname__} has no slot for {name}"
    raise TypeError(msg)


def _initial(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return f"_default_{f.name}"
    if f.default_factory is not dataclasses.MISSING:
        return f"_factory_{f.name}()"
    msg = f"field {f.name} is not initialized and has no default"
    raise TypeError(msg)
