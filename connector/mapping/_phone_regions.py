"""`phonenumbers`' metadata for one region, compiled once: the patterns and lengths the phone fast path
(`phones`) follows, each taken from `phonenumbers` so that a new release brings its data here too."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from phonenumbers import PhoneMetadata
from phonenumbers.phonemetadata import PhoneNumberDesc

MIN_NSN, MAX_NSN = 2, 17  # phonenumberutil's _MIN/_MAX_LENGTH_FOR_NSN
BACK_REFERENCE = re.compile(r"\\[1-9]|\(\?P=")
NOTHING = "(?!)"  # a pattern that matches nothing


@dataclass(frozen=True, slots=True)
class Region:
    """One region's metadata, compiled once."""

    code: str
    country_code: int
    cc_text: str
    idd: re.Pattern[str] | None
    national_prefix: re.Pattern[str] | None
    prefix_transform: str | None
    general: re.Pattern[str] | None
    lengths: tuple[int, ...]
    local_lengths: frozenset[int]
    leading_digits: re.Pattern[str] | None
    valid: dict[int, re.Pattern[str]]

    def general_match(self, digits: str) -> bool:
        """`_match_national_number` on the general description: its pattern alone."""
        return self.general is not None and self.general.fullmatch(digits) is not None

    def length_verdict(self, digits: str) -> str:
        """`_test_number_length` for an unknown type: possible, too_short, too_long, local, invalid."""
        n = len(digits)
        if n in self.local_lengths:
            return "local"
        if n == self.lengths[0]:
            return "possible"
        if n < self.lengths[0]:
            return "too_short"
        if n > self.lengths[-1]:
            return "too_long"
        return "possible" if n in self.lengths[1:] else "invalid"

    def is_valid(self, nsn: str) -> bool:
        """`_number_type_helper(nsn) != UNKNOWN`: the general description (a possible length, the
        pattern), then any one type's: one pattern per length (`_valid`)."""
        valid = self.valid.get(len(nsn))
        return valid is not None and valid.fullmatch(nsn) is not None

    def any_valid(self) -> str:
        """`is_valid` as one pattern for every length, to be matched at the start of the national
        number and to its end (the lengths the fast path takes only: 2 to 17 digits, not all zeros)."""
        by_length = [
            rf"(?=\d{{{n}}}\Z)(?:{valid.pattern})\Z" for n, valid in self.valid.items() if MIN_NSN <= n <= MAX_NSN
        ]
        return r"(?!0*\Z)(?:" + "|".join(by_length) + ")" if by_length else NOTHING


class Unsure(Exception):
    """A step the fast path does not model: ask phonenumbers."""


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    return re.compile(pattern) if pattern else None


def _valid(general: str | None, lengths: tuple[int, ...], descs: list[PhoneNumberDesc]) -> dict[int, str]:
    """For each possible length, one pattern that matches a number of that length whole when the
    general pattern does and one of the types it can be matches it too (`_is_number_matching_desc`:
    a type without lengths of its own admits every length; a type without a pattern matches
    nothing). The general pattern is a lookahead first, so one match does both (a regular
    expression's call costs about as much as its matching here), and its groups keep their numbers."""
    valid: dict[int, str] = {}
    if not general:
        return valid  # no general pattern: nothing is valid
    for length in lengths:
        patterns = [
            d.national_number_pattern
            for d in descs
            if d.national_number_pattern and (not d.possible_length or length in d.possible_length)
        ]
        if patterns:
            valid[length] = rf"(?=(?:{general})\Z)(?:" + "|".join(f"(?:{p})" for p in patterns) + ")"
    return valid


@cache
def compiled_region(code: str) -> Region | None:
    """The region's compiled metadata; None when phonenumbers has none or it is one the fast path
    does not model (no possible lengths, or a type pattern with a back reference)."""
    meta = PhoneMetadata.metadata_for_region(code, None)
    if meta is None or meta.country_code is None or meta.general_desc is None or not meta.general_desc.possible_length:
        return None
    general = meta.general_desc
    # The order of _number_type_helper; mobile counts only where its pattern differs from fixed
    # line's (where it is the same, fixed line has already answered).
    descs = [
        meta.premium_rate,
        meta.toll_free,
        meta.shared_cost,
        meta.voip,
        meta.personal_number,
        meta.pager,
        meta.uan,
        meta.voicemail,
        meta.fixed_line,
    ]
    if not meta.same_mobile_and_fixed_line_pattern:
        descs.append(meta.mobile)
    present = [d for d in descs if d is not None]
    if any(BACK_REFERENCE.search(d.national_number_pattern or "") for d in present):
        return None  # joined into one alternation, its group numbers would shift
    return Region(
        code=code,
        country_code=meta.country_code,
        cc_text=str(meta.country_code),
        idd=_compile(meta.international_prefix),
        national_prefix=_compile(meta.national_prefix_for_parsing),
        prefix_transform=meta.national_prefix_transform_rule or None,
        general=_compile(general.national_number_pattern),
        lengths=tuple(general.possible_length),
        local_lengths=frozenset(general.possible_length_local_only),
        leading_digits=_compile(meta.leading_digits),
        valid={
            n: re.compile(pattern)
            for n, pattern in _valid(general.national_number_pattern, tuple(general.possible_length), present).items()
        },
    )


def sure_region(code: str) -> Region:
    region = compiled_region(code)
    if region is None:
        raise Unsure
    return region
