"""Turning whatever a source delivers into the value types of a capture input, never raising
anything but ValueProblem, whose message names no value (reasons are aggregated and shown).

Two rules hold for every text value, custom fields (and the text inside their lists and objects)
included:
- Control characters (Unicode category Cc: U+0000-U+001F, U+007F-U+009F) are removed, except tab,
  line feed and carriage return; those stay in free text (`notes`, custom fields) and become a space
  in the one-line fields. A NUL or an escape sequence never reaches the API.
- Text made only of whitespace and invisible characters (a zero-width space, NBSP, a BOM, a
  variation selector, a Hangul filler, ...) is empty, so absent.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
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
    if (isinstance(value, Decimal) and not value.is_finite()) or (
        isinstance(value, float) and not math.isfinite(value)
    ):
        raise ValueProblem("is not a finite number")
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 5551234567.0 from a spreadsheet means 5551234567
    try:
        return str(value)
    except ValueError:  # int beyond the interpreter's digit limit
        raise ValueProblem("is a number too large to use") from None


_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # Cc but tab, LF, CR
_LINE_BREAKS = str.maketrans("\t\n\r", "   ")
# Characters that render as nothing yet are neither whitespace nor Cc/Cf: the combining grapheme
# joiner, Hangul fillers, Khmer inherent vowels, the braille blank, variation selectors.
_BLANKS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0" + "".join(map(chr, range(0xFE00, 0xFE10))))


def as_text(value: Any, *, one_line: bool = False) -> str | None:
    """Text for a string field, with the module's two rules applied (`one_line`: tab and line
    breaks become spaces); None (absent) for null and for empty, blank or invisible text. Its
    plain-text case (a printable ASCII str) is copied inline on the mapper's hot path (`rules.py`,
    `Mapping._direct`): change it there too (tests/mapping/test_rule_values.py holds them equal)."""
    if type(value) is str:  # nearly every value: skip the isinstance ladder
        text = value
    elif value is None:
        return None
    else:
        text = _to_text(value)
    if text.isprintable():  # no control or surrogate character
        if text.isascii():  # nearly every value: no invisible character either
            return text if text.strip() else None
    else:
        text = _CONTROLS.sub("", _check_unicode(text))
        if one_line:
            text = text.translate(_LINE_BREAKS)
    return None if all(_invisible(ch) for ch in text) else text


def _invisible(ch: str) -> bool:
    return ch.isspace() or ch in _BLANKS or unicodedata.category(ch) in ("Cc", "Cf")


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        raise ValueProblem("is a boolean, not text")
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int | float | Decimal):
        return _number_text(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    raise ValueProblem(f"is {_kind(value)}, not text")


def as_json(value: Any) -> Any:
    """A custom field value: any JSON value the API can carry; None (absent) for null and blank text."""
    if type(value) is str:  # nearly every value: skip the ladder below
        return as_text(value)
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
            return _without_controls(value)
        except (TypeError, ValueError, RecursionError):
            raise ValueProblem(f"is {_kind(value)} that is not plain JSON") from None
    return as_text(value)


def _without_controls(value: Any) -> Any:
    """A JSON value with the control rule applied to every string in it, keys included."""
    if isinstance(value, str):
        return value if value.isprintable() else _CONTROLS.sub("", value)
    if isinstance(value, list):
        return [_without_controls(item) for item in value]
    if isinstance(value, dict):
        return {_without_controls(k): _without_controls(v) for k, v in value.items()}
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"
