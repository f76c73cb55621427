"""API keys are found by their digest, as the configuration's own lookup finds them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbound.identity import Principal, hash_key
from toolbound.service.keys import ApiKeys


def _principal(name: str, key: str | None) -> Principal:
    return Principal(
        name=name,
        key_sha256="" if key is None else hash_key(key),
        subject=name,
        tenant="acme",
        roles=frozenset({"agent"}),
    )


@given(
    keys=st.lists(st.none() | st.sampled_from(["k1", "k2", "k3"]), min_size=0, max_size=6),
    tried=st.sampled_from(["k1", "k2", "k3", "other", ""]),
)
def test_a_key_finds_the_principal_the_configuration_finds(keys, tried):
    """The first principal whose key it is, or none: what ``principal_for`` answers."""
    principals = [_principal(f"p{i}", key) for i, key in enumerate(keys)]
    expected = next((p for p in principals if p.matches(tried)), None)
    assert ApiKeys(principals).principal(tried) is expected


@pytest.mark.parametrize("key", ["", "no-such-key"])
def test_a_principal_without_a_key_is_never_found(key):
    """A principal named by JWTs alone has no key digest: no key, even empty, reaches it."""
    assert ApiKeys([_principal("jwt-only", None)]).principal(key) is None
