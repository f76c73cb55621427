"""Data classes: kinds of private data that need the user's own words to leave.

A destination the user named may receive what the task needs, but not any private
data a third party slipped into the message: "email my notes to bob@corp.example"
asks for notes, not for the passport number an injected instruction appended. Each
class below says which fields and words mark it in tool data, and which words of
the user's ask for it:

======================= ============================================================
``identity_document``   passports, identity cards, driving licences, social security
                        and tax numbers
``payment_card``        card numbers (any digit run passing the Luhn check), CVV
``credential``          passwords, PINs, one-time and security codes, tokens, keys
``health``              diagnoses, medication, prescriptions, allergies
======================= ============================================================

A result's value belongs to a class when the tool declares it
(:attr:`~toolbound.ToolSpec.data_classes`, output pointers such as
``"/passport_number"``), when its field's name says so (``card_number``,
``security_code``), or, in free text, when the text names the class beside digits
("Passport: X1234567", "your security code is 463820": the tokens holding a digit)
or holds a card number. The user asks for a class by naming it in their own words
("send Bob my passport details"). Nothing here knows any tool by name.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, get_args

from toolbound._labels import DataClassName

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DATA_CLASSES",
    "NAMES",
    "DataClassName",
    "asked_classes",
    "field_class",
    "luhn",
    "text_classes",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Class:
    fields: frozenset[str]
    """Words of a field name (its head or any word) that mark the field."""
    text: tuple[str, ...]
    """Phrases that, in free text, mark the digit-bearing tokens beside them."""
    asks: tuple[str, ...]
    """Phrases of the user's that ask for this kind of data."""


def _phrases(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


DATA_CLASSES: Final[Mapping[DataClassName, _Class]] = MappingProxyType(
    {
        "identity_document": _Class(
            fields=frozenset({"passport", "ssn", "licence", "license", "nationalid", "idcard"}),
            text=_phrases("passport, social security, ssn, id card, identity card, licence no, "
                          "license no, driving licence, driver's license, national id"),
            asks=_phrases("passport, identity, id card, id number, ssn, social security, "
                          "licence, license, id document, identity document"),
        ),
        "payment_card": _Class(
            fields=frozenset({"card", "cvv", "cvc", "creditcard", "pan"}),
            text=_phrases("card number, credit card, debit card, visa, mastercard, cvv, cvc"),
            asks=_phrases("card, credit, debit, visa, mastercard, cvv"),
        ),
        "credential": _Class(
            fields=frozenset({"password", "passwd", "passcode", "pin", "otp", "token", "secret",
                              "apikey", "securitycode", "verificationcode", "accesscode"}),
            text=_phrases("password, passcode, pin, security code, verification code, "
                          "one-time code, login code, access code, otp, token, api key"),
            asks=_phrases("password, passcode, pin, code, token, credential, login, otp, "
                          "api key"),
        ),
        "health": _Class(
            fields=frozenset({"diagnosis", "medication", "medications", "prescription",
                              "allergy", "allergies"}),
            text=_phrases("diagnosis, diagnosed, medication, prescription, allergy, allergic"),
            asks=_phrases("health, medical, diagnosis, medication, prescription, allergy, "
                          "doctor"),
        ),
    }
)  # fmt: skip
"""Every data class: the field words and phrases that mark it, the words that ask for it."""

NAMES: Final[tuple[DataClassName, ...]] = get_args(DataClassName)

_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CARD_DIGITS = (13, 19)


def _words(text: str) -> list[str]:
    return [w for w in _SPLIT.split(_CAMEL.sub("_", text).lower()) if w]


def _split(phrases: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Single words (looked up in a set of the text's words) and longer phrases.

    Both as the text is read: lower-case words split at anything not a letter or a
    digit ("driver's license" is "driver s license").
    """
    normal = [" ".join(w for w in _SPLIT.split(p.lower()) if w) for p in phrases]
    return frozenset(p for p in normal if " " not in p), tuple(p for p in normal if " " in p)


_NAMES: Final = {name: _split(kind.text) for name, kind in DATA_CLASSES.items()}
_ASKS: Final = {name: _split(kind.asks) for name, kind in DATA_CLASSES.items()}


def _matching(
    text: str, table: Mapping[DataClassName, tuple[frozenset[str], tuple[str, ...]]]
) -> frozenset[DataClassName]:
    """The classes one of whose words or phrases ``text`` holds (case ignored)."""
    split = [w for w in _SPLIT.split(text.lower()) if w]
    words = set(split)
    spaced = " " + " ".join(split) + " "
    return frozenset(
        name
        for name, (singles, phrases) in table.items()
        if not singles.isdisjoint(words)
        or any(p.partition(" ")[0] in words and f" {p} " in spaced for p in phrases)
    )


@functools.lru_cache(maxsize=4096)
def field_class(pointer: str) -> DataClassName | None:
    """The class a field's own name gives it: ``/0/card_number`` → ``payment_card``."""
    parts = [p for p in pointer.split("/")[1:] if p and not p.isdigit()]
    if not parts:
        return None
    words = _words(parts[-1])
    joined = "".join(words)
    for name, kind in DATA_CLASSES.items():
        if joined in kind.fields or any(w in kind.fields for w in words):
            return name
    return None


def text_classes(text: str) -> frozenset[DataClassName]:
    """The classes a free text names ("Passport: X12…" names ``identity_document``)."""
    return _matching(text, _NAMES)


def asked_classes(text: str) -> frozenset[DataClassName]:
    """The classes the user's ``text`` asks for by name."""
    return _matching(text, _ASKS)


def luhn(digits: str) -> bool:
    """Whether ``digits`` is a card number: 13 to 19 digits passing the Luhn check."""
    if not digits.isdigit() or not _CARD_DIGITS[0] <= len(digits) <= _CARD_DIGITS[1]:
        return False
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = int(char) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n  # noqa: PLR2004 - the digit sum of a doubled digit
    return total % 10 == 0
