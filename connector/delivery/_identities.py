"""The batch members' own emails and phones, normalised as the matcher compares them with the echoes
in a bulk result (settle.py): emails trimmed and lower-cased, phones as their digits without leading
zeros, so that trunk (0) and international (00) prefixes drop out and a national echo can be a suffix."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic_core import from_json

from ..ledger import Member

MIN_PHONE_SUFFIX = 8  # a national echo of an E.164 number keeps at least this many digits
_NON_DIGITS = re.compile(r"\D")


class Identities:
    """Members' emails and phones, parsed from the payloads once some echo needs them: all of the
    batch's payloads in one call of pydantic-core's compiled parser (a third of `json.loads` on each)."""

    def __init__(self, members: Sequence[Member]) -> None:
        self._members = members
        self._own: list[tuple[str, str]] | None = None
        self._by: dict[tuple[str, str], list[int]] | None = None

    def own(self, pos: int) -> tuple[str, str]:
        """Member `pos`'s email and phone digits, normalised ("" when absent)."""
        if self._own is None:
            self._own = [_identity(person) for person in payloads(self._members)]
        return self._own[pos]

    def matching(self, kind: str, value: str) -> set[int]:
        """Every member the echo fits; phones are indexed by their last digits, enough for a suffix."""
        if self._by is None:
            self._by = {}
            for pos in range(len(self._members)):
                email, phone = self.own(pos)
                for key in (("email", email), ("phone", phone[-MIN_PHONE_SUFFIX:])):
                    if key[1]:
                        self._by.setdefault(key, []).append(pos)
        if kind == "email":
            return set(self._by.get((kind, value), ()))
        tail = self._by.get((kind, value[-MIN_PHONE_SUFFIX:]), ())
        return {pos for pos in tail if same_phone(self.own(pos)[1], value)}


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


def _identity(person: Any) -> tuple[str, str]:
    person = person if isinstance(person, dict) else {}
    email = person.get("email")
    return (email.strip().lower() if isinstance(email, str) else "", digits(person.get("phone")))


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
