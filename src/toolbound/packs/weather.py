"""A read-only weather tool (seed 000 §6.4): the schema asserts ``format: date``.

The forecast is computed from a hash of city and date, so it is deterministic and
needs no network: a stand-in for a real forecast service with the same contract.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from typing import TYPE_CHECKING

from toolbound._errors import Problem
from toolbound._model import ToolSpec

if TYPE_CHECKING:
    from toolbound._model import JSONObject, JSONValue, NormalizationContext
    from toolbound.execution.tool import ToolContext
    from toolbound.registry import RegisteredTool, Registry

__all__ = ["forecast", "real_date", "register", "spec"]

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_SKIES = ("clear", "cloudy", "rain", "snow", "fog")


def forecast(city: str, date: str) -> JSONObject:
    """The deterministic forecast for ``city`` on ``date``."""
    h = hashlib.sha256(f"{city.casefold()}|{date}".encode()).digest()
    return {
        "city": city,
        "date": date,
        "sky": _SKIES[h[0] % len(_SKIES)],
        "high_c": h[1] % 35 - 5,
        "low_c": h[1] % 35 - 5 - h[2] % 10,
    }


def real_date(arguments: JSONObject, _ctx: NormalizationContext) -> Problem | None:
    """The explicit date check (R17 row 3): holds even where ``format`` is not asserted."""
    text = str(arguments["date"])
    try:
        # fromisoformat alone also takes 20260720 and 2026-W29-1; RFC 3339 does not.
        if not _ISO_DATE.fullmatch(text):
            raise ValueError(text)  # noqa: TRY301 - one path for every malformed date
        dt.date.fromisoformat(text)
    except ValueError:
        return Problem(
            kind="semantic",
            code="invalid_date",
            message=f"{arguments['date']!r} is not a calendar date",
            recoverable=True,
            hint="send a real date as YYYY-MM-DD",
            pointer="/date",
        )
    return None


def spec() -> ToolSpec:
    """``weather.forecast@v1``."""
    return ToolSpec(
        name="weather.forecast",
        version="v1",
        description="The weather forecast for a city on a date (YYYY-MM-DD).",
        input_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1},
                "date": {"type": "string", "format": "date"},
            },
            "required": ["city", "date"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "date": {"type": "string", "format": "date"},
                "sky": {"enum": list(_SKIES)},
                "high_c": {"type": "integer"},
                "low_c": {"type": "integer"},
            },
            "required": ["city", "date", "sky", "high_c", "low_c"],
            "additionalProperties": False,
        },
        effect="read",
        capabilities=("weather:read",),
        semantic_check=real_date,
        timeout=1.0,
        reads_untrusted=False,  # a forecast service's own figures, no third-party text
        reads_private=False,
    )


def register(registry: Registry, *, inline: bool = False) -> RegisteredTool:
    """Register ``weather.forecast@v1``."""

    def weather_forecast(arguments: JSONObject, _ctx: ToolContext) -> JSONValue:
        return forecast(str(arguments["city"]), str(arguments["date"]))

    return registry.register(spec(), weather_forecast, inline=inline)
