"""Durations as the config spells them ("90s", "10m", "2h", "1d"): one grammar for every key that
takes one (a source's `lookback`, an alert's thresholds)."""

from __future__ import annotations

import re

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str) -> float | None:
    """The seconds `text` says, or None when it is not a duration."""
    match = _DURATION.fullmatch(text.strip())
    return None if match is None else float(match[1]) * _UNIT_S[match[2].lower()]
