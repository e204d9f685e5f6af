"""Masking contact data in reports handed to people (`runs show`), so that a list of rejected rows
can go to whoever owns the data without spreading every address in it. A masked value still lets a
person recognise the row: `A*** L***`, `a***@example.org`, `+1 *** *** **04`. Text (a rejection reason may quote
a value) has every email- or phone-like run masked the same way.

Unlike the logs' `<email>` / `<phone>` placeholders, the shape and the last digits stay: a report is
read to find rows, a log line to find events.
"""

from __future__ import annotations

import re

_EMAIL = re.compile(r"[\w.+%-]+@[\w-]+(?:\.[\w-]+)*", re.UNICODE)
# Seven or more digits with the separators phones are written with; a date (2026-09-09) is no phone.
_PHONE = re.compile(r"(?<![\w-])\+?\(?\d[\d ().-]{5,}\d(?![\w-])")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MIN_PHONE_DIGITS = 7


def mask_email(value: str) -> str:
    """The first character of the local part and the whole domain: `ada@example.org` -> `a***@example.org`."""
    value = value.strip()
    if not value:
        return ""
    local, at, domain = value.rpartition("@")
    if not at:
        return f"{value[:1]}***"
    return f"{local[:1]}***@{domain}"


def mask_name(value: str) -> str:
    """The first character of each word: `Ada Lovelace` -> `A*** L***`."""
    return " ".join(f"{word[:1]}***" for word in value.split())


def mask_phone(value: str) -> str:
    """The country code (when written with `+`) and the last two digits: `+15551230104` -> `+1 *** *** **04`."""
    digits = re.sub(r"\D", "", value)
    if len(digits) < 3:
        return "***" if digits else ""
    prefix, national = "", digits
    if value.strip().startswith("+"):
        code = _country_code(value)
        if code and digits.startswith(code):
            prefix, national = f"+{code} ", digits[len(code) :]
        else:
            prefix = "+"
    masked = "*" * (len(national) - 2) + national[-2:]
    groups = []
    while len(masked) > 4:
        groups.append(masked[:3])
        masked = masked[3:]
    groups.append(masked)
    return prefix + " ".join(groups)


def _country_code(value: str) -> str | None:
    import phonenumbers  # only a report with phones needs it

    try:
        return str(phonenumbers.parse(value, None).country_code)
    except phonenumbers.NumberParseException:
        return None


def mask_text(text: str) -> str:
    """Every email and phone number inside free text (a rejection reason) masked in place."""
    text = _EMAIL.sub(lambda m: mask_email(m.group()), text)
    return _PHONE.sub(_phone_in_text, text)


def _phone_in_text(match: re.Match[str]) -> str:
    found = match.group()
    if _DATE.match(found) or len(re.sub(r"\D", "", found)) < _MIN_PHONE_DIGITS:
        return found
    return mask_phone(found)
