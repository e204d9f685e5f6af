"""Turning whatever a source delivers into the value types of a capture input, never raising
anything but ValueProblem, whose message names no value (reasons are aggregated and shown)."""

from __future__ import annotations

import json
import math
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID


JSON_SAFE_INT = 2**53


class ValueProblem(Exception):
    """Why a value cannot be used; says nothing of the value itself (it may be PII)."""


def _check_unicode(text: str) -> str:
    if text.isascii():  # no surrogates possible; isascii costs no copy, encode does
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueProblem("contains invalid unicode (a lone surrogate)") from None
    return text


def _number_text(value: int | float | Decimal) -> str:
    if isinstance(value, Decimal) and not value.is_finite() or isinstance(value, float) and not math.isfinite(value):
        raise ValueProblem("is not a finite number")
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 5551234567.0 from a spreadsheet means 5551234567
    try:
        return str(value)
    except ValueError:  # int beyond the interpreter's digit limit
        raise ValueProblem("is a number too large to use") from None


def as_text(value: Any) -> str | None:
    """Text for a string field; None (absent) for null and for empty or blank text."""
    if type(value) is str:  # nearly every value: skip the isinstance ladder
        return _check_unicode(value) if value.strip() else None
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueProblem("is a boolean, not text")
    if isinstance(value, str):
        text = value
    elif isinstance(value, int | float | Decimal):
        text = _number_text(value)
    elif isinstance(value, datetime | date | time):
        text = value.isoformat()
    elif isinstance(value, UUID):
        text = str(value)
    else:
        raise ValueProblem(f"is {_kind(value)}, not text")
    return _check_unicode(text) if text.strip() else None


def as_json(value: Any) -> Any:
    """A custom field value: any JSON value the API can carry; None (absent) for null and blank text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueProblem("is not a finite number")
    if isinstance(value, int) and abs(value) > JSON_SAFE_INT:
        return _number_text(value)  # beyond what a JSON reader keeps exactly: send its digits
    if isinstance(value, int | float):
        return value
    if isinstance(value, list | dict):
        try:
            _check_unicode(json.dumps(value, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError, RecursionError):
            raise ValueProblem(f"is {_kind(value)} that is not plain JSON") from None
        return value
    return as_text(value)


def _kind(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"
