"""RFC 8785 conformance of ``canonical_json`` against cyberphone/json-canonicalization.

R5 digests are taken over the canonical bytes, so they must agree byte for byte with
the reference vectors in ``../shared/data/jcs/testdata`` (read in place, never
copied). The ES6 number vectors are generated here by the README's own algorithm and
checked against the SHA-256 sums it publishes for the first 1,000 / 10,000 / 100,000
lines; the larger files (1M lines and up) would cost seconds to minutes per run and
exercise the same formatter, so they are left to manual runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from pathlib import Path

import pytest

from toolbound.gates.normalize import canonical_json

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "jcs" / "testdata"

if not DATA.is_dir():
    pytest.skip(f"RFC 8785 test data not found at {DATA}", allow_module_level=True)

INPUTS = sorted(DATA.glob("input/*.json"))


def test_vectors_are_present():
    """The reference suite ships its six input files, each with an output and an outhex."""
    assert len(INPUTS) >= 6
    for path in INPUTS:
        assert (DATA / "output" / path.name).is_file()
        assert (DATA / "outhex" / path.with_suffix(".txt").name).is_file()


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.stem)
def test_canonical_form_matches_reference_output(path: Path):
    """Canonicalizing each input yields its reference output, byte for byte."""
    value = json.loads(path.read_bytes())
    assert canonical_json(value) == (DATA / "output" / path.name).read_bytes()


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.stem)
def test_canonical_form_matches_reference_hex(path: Path):
    """The hex rendering of each reference output agrees with our bytes too."""
    value = json.loads(path.read_bytes())
    expected = bytes.fromhex((DATA / "outhex" / path.with_suffix(".txt").name).read_text())
    assert canonical_json(value) == expected


# --- ES6 number serialization (RFC 8785 §3.2.2.3) -------------------------------------

README = DATA / "README.md"


def _static_u64s() -> list[int]:
    text = README.read_text()
    block = re.search(r"staticU64s = new BigUint64Array\(\[(.*?)\]\)", text, re.DOTALL)
    assert block is not None, "README no longer lists staticU64s"
    return [int(h, 16) for h in re.findall(r"0x([0-9a-fA-F]+)n", block.group(1))]


def _published_sums() -> dict[int, str]:
    rows = re.findall(r"\|\s*([0-9a-f]{64})\s*\|\s*(\d+)\s*\|", README.read_text())
    return {int(lines): checksum for checksum, lines in rows}


def _ieee_sequence():
    """Yield the README's IEEE-754 bit patterns: static values, 2000 serial, then SHA-256 noise."""
    yield from _static_u64s()
    for i in range(2000):
        yield 0x0010_0000_0000_0000 + i
    block = bytes(32)
    while True:
        block = hashlib.sha256(block).digest()
        # Node reads the digest as four little-endian doubles; zeros and non-finite
        # values are skipped, as the generator's loop does.
        for (bits,) in struct.iter_unpack("<Q", block):
            value = _as_double(bits)
            if value != 0.0 and math.isfinite(value):
                yield bits


def _as_double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


@pytest.mark.parametrize("lines", [1_000, 10_000, 100_000])
def test_es6_number_vectors_hash_to_published_sums(lines: int):
    """The first N generated lines, each "hex,canonical", hash to the sum the README publishes."""
    expected = _published_sums()[lines]
    sha = hashlib.sha256()
    for count, bits in enumerate(_ieee_sequence(), start=1):
        sha.update(f"{bits:x},".encode() + canonical_json(_as_double(bits)) + b"\n")
        if count == lines:
            break
    assert sha.hexdigest() == expected


@pytest.mark.parametrize(
    ("bits", "expected"),
    [  # the README's sample lines
        ("4340000000000001", b"9007199254740994"),
        ("4340000000000002", b"9007199254740996"),
        ("444b1ae4d6e2ef50", b"1e+21"),
        ("3eb0c6f7a0b5ed8d", b"0.000001"),
        ("3eb0c6f7a0b5ed8c", b"9.999999999999997e-7"),
        ("8000000000000000", b"0"),
        ("0", b"0"),
    ],
)
def test_es6_number_sample_lines(bits: str, expected: bytes):
    """Each sample line in the README serializes as it says."""
    assert canonical_json(_as_double(int(bits, 16))) == expected
