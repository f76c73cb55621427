"""The prebuilt encoder writes exactly what the standard encoder writes."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbound._jsontext import compact

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_the_same_text_as_the_standard_encoder(value: object) -> None:
    for sort_keys in (False, True):
        standard = json.JSONEncoder(
            ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"), allow_nan=False
        )
        assert compact(sort_keys=sort_keys)(value) == standard.encode(value)


def test_a_value_json_cannot_hold_is_refused() -> None:
    encode = compact()
    with pytest.raises(TypeError, match="set"):
        encode({"a": {1, 2}})
    with pytest.raises(ValueError, match="float"):
        encode([math.nan])
    with pytest.raises(ValueError, match="float"):
        encode({"x": math.inf})


def test_a_value_that_contains_itself_is_a_value_error_and_leaves_the_encoder_usable() -> None:
    encode = compact()
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError, match="contains itself"):
        encode(cyclic)
    assert encode({"a": [1, "é"]}) == '{"a":[1,"é"]}'
