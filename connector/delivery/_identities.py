"""The batch members' own emails and phones, normalised as the matcher compares them with the echoes
in a bulk result (settle.py): emails trimmed and lower-cased, phones as their digits without leading
zeros, so that trunk (0) and international (00) prefixes drop out and a national echo can be a suffix."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic_core import SchemaValidator, core_schema, from_json

from ..ledger import Member

MIN_PHONE_SUFFIX = 8  # a national echo of an E.164 number keeps at least this many digits
_NON_DIGITS = re.compile(r"\D")
_FIELDS = ("email", "phone")
# A batch's payloads as a JSON array of objects, of which only the two fields the matcher reads are
# built as Python objects (the rest is parsed and skipped: a third of parsing them whole). A payload
# that is not an object fails it, and the batch is parsed whole instead (`payloads`).
_CONTACTS = SchemaValidator(
    core_schema.list_schema(
        core_schema.typed_dict_schema(
            {name: core_schema.typed_dict_field(core_schema.any_schema(), required=False) for name in _FIELDS},
            extra_behavior="ignore",
        )
    )
)


class Identities:
    """Members' emails and phones, read from the payloads once some echo needs them: all of the
    batch's payloads in one call of pydantic-core's compiled parser, each normalised when first asked."""

    def __init__(self, members: Sequence[Member]) -> None:
        self._members = members
        self._raw: list[dict[str, Any]] | None = None
        self._own: list[tuple[str, str] | None] = [None] * len(members)
        self._by: dict[tuple[str, str], list[int]] | None = None

    def spelled(self, pos: int) -> dict[str, Any]:
        """Member `pos`'s email and phone fields as its payload spells them (absent when it has none):
        an echo spelled the same is the member's own whatever the normalising, so it is compared first."""
        if self._raw is None:
            self._raw = contacts(self._members)
        return self._raw[pos]

    def normalised(self, pos: int) -> tuple[str, str]:
        """Member `pos`'s email and phone digits, normalised ("" when absent)."""
        own = self._own[pos]
        if own is None:
            spelled = self.spelled(pos)
            email = spelled.get("email")
            own = (email.strip().lower() if isinstance(email, str) else "", digits(spelled.get("phone")))
            self._own[pos] = own
        return own

    def matching(self, kind: str, value: str) -> set[int]:
        """Every member the echo fits; phones are indexed by their last digits, enough for a suffix."""
        if self._by is None:
            self._by = {}
            for pos in range(len(self._members)):
                email, phone = self.normalised(pos)
                for key in (("email", email), ("phone", phone[-MIN_PHONE_SUFFIX:])):
                    if key[1]:
                        self._by.setdefault(key, []).append(pos)
        if kind == "email":
            return set(self._by.get((kind, value), ()))
        tail = self._by.get((kind, value[-MIN_PHONE_SUFFIX:]), ())
        return {pos for pos in tail if same_phone(self.normalised(pos)[1], value)}


def contacts(members: Sequence[Member]) -> list[dict[str, Any]]:
    """Each member's email and phone fields, as `payloads` would find them in its parsed payload."""
    try:
        parsed = _CONTACTS.validate_json("[" + ",".join(m.payload for m in members) + "]")
    except ValueError:  # pydantic-core's ValidationError among them
        parsed = None
    if isinstance(parsed, list) and len(parsed) == len(members):
        return parsed
    return [{k: p[k] for k in _FIELDS if k in p} if isinstance(p, dict) else {} for p in payloads(members)]


def payloads(members: Sequence[Member]) -> list[Any]:
    """Each member's payload, parsed. The ledger's payloads are JSON texts of one value each, so
    joined by commas they are one array; should one not be (a hand-edited ledger), each is parsed
    alone, and `json.loads` names the one at fault."""
    try:
        parsed = from_json("[" + ",".join(m.payload for m in members) + "]")
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or len(parsed) != len(members):
        return [json.loads(m.payload) for m in members]
    return parsed


def digits(value: Any) -> str:
    """Digits without leading zeros, so trunk (0) and international (00) prefixes drop out. An E.164
    spelling (ASCII digits after a "+") skips the regular expression: it has nothing else to drop."""
    if not isinstance(value, str):
        return ""
    tail = value[1:] if value[:1] == "+" else value
    if tail.isascii() and tail.isdecimal():
        return tail.lstrip("0")
    return _NON_DIGITS.sub("", value).lstrip("0")


def same_phone(mine: str, echo: str) -> bool:
    """Same digits, or one ends in the other (a national echo) with enough digits to mean it."""
    if not mine or not echo:
        return False
    return mine == echo or (
        min(len(mine), len(echo)) >= MIN_PHONE_SUFFIX and (mine.endswith(echo) or echo.endswith(mine))
    )
