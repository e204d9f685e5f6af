"""The one phone normalisation every peer runs (imported by the dlt, Singer and httpx peers), so
that what they spend on phones is the same code: `phonenumbers` to E.164 with the US as default
region, as capture-sync's `e164` transform with `region = "US"`. capture-sync refuses a row whose
phone `phonenumbers` holds invalid; the peers send it without a phone (the job's CSV has none)."""

from __future__ import annotations

import phonenumbers


def e164(raw: str) -> str | None:
    """The phone in E.164, or None when `phonenumbers` cannot parse it or does not hold it valid."""
    try:
        number = phonenumbers.parse(raw, "US")
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(number):
        return None
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
