"""The e164 transform's fast path answers exactly as `phonenumbers` does, or not at all.

The oracle is `phonenumbers` itself (parse, is_valid_number, E.164), for the whole fast path and
for its first step alone (`express_e164_for`: one pattern per region for the common spellings). The numbers are its own
example numbers of every region and type, mutated (digits changed, dropped, added), written in
every spelling (E.164, international, national, RFC 3966, with spaces, dashes, dots, parentheses,
the `00`/IDD prefix, the country code without `+`, whitespace around, letters, extensions, tabs,
non-ASCII digits), parsed with their own region, another region or none.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import phonenumbers
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from phonenumbers import PhoneNumber, PhoneNumberFormat, PhoneNumberType

from connector.mapping.phones import _SPELLING, _spelled, express_e164_for, fast_e164_for
from connector.mapping.transforms import e164
from connector.mapping.values import ValueProblem

REGIONS = sorted(phonenumbers.SUPPORTED_REGIONS)
TYPES = [
    PhoneNumberType.FIXED_LINE,
    PhoneNumberType.MOBILE,
    PhoneNumberType.TOLL_FREE,
    PhoneNumberType.PREMIUM_RATE,
    PhoneNumberType.SHARED_COST,
    PhoneNumberType.VOIP,
    PhoneNumberType.PERSONAL_NUMBER,
    PhoneNumberType.PAGER,
    PhoneNumberType.UAN,
    PhoneNumberType.VOICEMAIL,
]


@dataclass(frozen=True)
class Seed:
    region: str | None  # None: a non-geographic number (+800, +882, ...)
    number: PhoneNumber


SEEDS = [
    Seed(region, number)
    for region in REGIONS
    for kind in TYPES
    if (number := phonenumbers.example_number_for_type(region, kind)) is not None
] + [
    Seed(None, number)
    for code in sorted(phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS)
    if (number := phonenumbers.example_number_for_non_geo_entity(code)) is not None
]


def oracle(value: str, region: str | None) -> str | Exception | None:
    """phonenumbers' answer: the E.164 text of a valid number, None for a parsed but invalid one,
    the exception for one it cannot parse."""
    try:
        number = phonenumbers.parse(value, region)
    except phonenumbers.NumberParseException as exc:
        return exc
    if not phonenumbers.is_valid_number(number):
        return None
    return phonenumbers.format_number(number, PhoneNumberFormat.E164)


def assert_same(value: str, region: str | None) -> None:
    expected = oracle(value, region)
    fast = fast_e164_for(region)(value)
    if fast is not None:
        assert fast == expected, f"{value!r} with region {region}: fast path {fast}, phonenumbers {expected!r}"
    express = express_e164_for(region)(value)
    if express is not None:
        assert express == expected, f"{value!r} with region {region}: express path {express}, phonenumbers {expected!r}"
    transformed: str | Exception
    try:
        transformed = e164(region)(value)
    except ValueProblem as exc:
        transformed = exc
    if isinstance(expected, str):
        assert transformed == expected
    else:
        assert isinstance(transformed, ValueProblem)
        assert str(transformed).startswith("is not a phone number" if expected else "is not a valid phone number")


def _group(digits: str, rng: random.Random) -> list[str]:
    groups, at = [], 0
    while at < len(digits):
        size = rng.randint(1, 4)
        groups.append(digits[at : at + size])
        at += size
    return groups


def spellings(number: PhoneNumber, region: str | None, rng: random.Random) -> list[str]:
    """One number written the ways exports write it, and the ways they get it wrong."""
    cc = str(number.country_code)
    nsn = phonenumbers.national_significant_number(number)
    e164_text = f"+{cc}{nsn}"
    sep = rng.choice([" ", "-", ".", "", " - ", "  "])
    grouped = sep.join(_group(nsn, rng))
    formatted = [
        phonenumbers.format_number(number, kind)
        for kind in PhoneNumberFormat.__dict__.values()
        if isinstance(kind, int)
    ]
    idd = phonenumbers.PhoneMetadata.metadata_for_region(region or "US").international_prefix or "00"
    idd_digits = "".join(c for c in idd if c.isdigit())[:3] or "00"
    out = [
        e164_text,
        *formatted,
        f"+{cc} {grouped}",
        f"+{cc}{sep}{grouped}",
        f"+{cc} ({nsn[:3]}) {nsn[3:]}",
        f"({nsn[:3]}) {nsn[3:6]}-{nsn[6:]}",
        f"0{grouped}",
        grouped,
        f"{cc}{sep}{grouped}",
        f"00{cc} {grouped}",
        f"011 {cc} {grouped}",
        f"{idd_digits}{cc}{nsn}",
        f"tel:{e164_text}",
        f"  {e164_text}\t",
        f"\u00a0{grouped} ",
        f"++{cc}{nsn}",
        f"+{cc}{nsn} x12",
        f"+{cc}{nsn};ext=7",
        f"{grouped}#",
        f"call {grouped}",
        f"+{cc}\t{nsn}",
        f"+{cc}{nsn}".replace("1", "\u0661"),
        f"+{cc}{nsn}".replace("2", "\uff12"),
        f"+{cc} {nsn[:2]}ABC{nsn[2:]}",
        f"+{cc}{nsn}/x9",
        f"({cc}) {nsn}",
        f"+({cc}) {nsn}",
        f"+{cc}(0){nsn}",
        f"{nsn}.",
        f"-{nsn}-",
    ]
    return out


def mutate(number: PhoneNumber, rng: random.Random) -> PhoneNumber:
    """The same country code, the national number with digits changed, dropped or added (as often
    invalid as not: wrong lengths, unassigned ranges, a leading zero)."""
    digits = list(phonenumbers.national_significant_number(number))
    for _ in range(rng.randint(0, 3)):
        action = rng.choice(["change", "change", "drop", "add"])
        at = rng.randrange(len(digits) + (action == "add"))
        if action == "change" and digits:
            digits[min(at, len(digits) - 1)] = rng.choice("0123456789")
        elif action == "drop" and len(digits) > 1:
            del digits[min(at, len(digits) - 1)]
        elif action == "add":
            digits.insert(at, rng.choice("0123456789"))
    text = "".join(digits)
    mutated = PhoneNumber(country_code=number.country_code, national_number=int(text))
    zeros = len(text) - len(text.lstrip("0"))
    if zeros and text.strip("0"):
        mutated.italian_leading_zero = True
        mutated.number_of_leading_zeros = zeros
    return mutated


def test_every_example_number_in_every_spelling() -> None:
    """Each region's own example numbers, valid by construction: the fast path's main diet."""
    for seed in SEEDS:
        rng = random.Random(f"{seed.region}{seed.number}")
        for value in spellings(seed.number, seed.region, rng):
            assert_same(value, seed.region)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.sampled_from(SEEDS),
    region=st.one_of(st.none(), st.sampled_from(REGIONS)),
    own_region=st.booleans(),
    rng=st.randoms(use_true_random=False),
)
def test_mutated_numbers_in_every_spelling(
    seed: Seed, region: str | None, own_region: bool, rng: random.Random
) -> None:
    number = mutate(seed.number, rng)
    default = seed.region if own_region else region
    for value in spellings(number, default, rng):
        assert_same(value, default)


@settings(max_examples=500, deadline=None)
@given(
    value=st.from_regex(r"\s*(tel:)?[ (]*\+?[0-9 ().\-]{0,22}\s*", fullmatch=True),
    region=st.one_of(st.none(), st.sampled_from(REGIONS)),
)
def test_any_plain_spelling(value: str, region: str | None) -> None:
    """Strings of the fast path's own alphabet, not built from real numbers."""
    assert_same(value, region)


# The spellings of the benchmarks (benchmarks/csv_read.py, benchmarks/peers/contacts.py).
COMMON = [
    "+14155550123",
    "(415) 555-0123",
    "415.555.0123",
    "+1 415 555 0123",
    "1-415-555-0123",
    "4155550123",
    " 415 555 0123 ",
    "tel:+1-415-555-0123",
]


@pytest.mark.parametrize("value", COMMON)
def test_the_common_spellings_take_the_fast_path(value: str) -> None:
    assert fast_e164_for("US")(value) == "+14155550123"
    if not value.startswith("tel:"):
        assert express_e164_for("US")(value) == "+14155550123"
    assert e164("US")(value) == "+14155550123"


@pytest.mark.parametrize(
    ("value", "region", "expected"),
    [
        ("020 7946 0018", "GB", "+442079460018"),
        ("0044 20 7946 0018", "GB", "+442079460018"),
        ("011 44 20 7946 0018", "US", "+442079460018"),
        ("+44 (0)20 7946 0018", None, "+442079460018"),
        ("06 12 34 56 78", "FR", "+33612345678"),
        ("8 (912) 345-67-89", "RU", "+79123456789"),
        ("011 15-2345-6789", "AR", "+5491123456789"),  # a national prefix rewritten by a transform rule
        ("(11) 91234-5678", "BR", "+5511912345678"),
        ("03-1234-5678", "JP", "+81312345678"),
        ("+1 416 555 0123", "US", "+14165550123"),  # Canada, found by the +1 regions' patterns
    ],
)
def test_national_and_international_spellings_of_many_regions(value: str, region: str | None, expected: str) -> None:
    assert fast_e164_for(region)(value) == expected
    assert_same(value, region)


@pytest.mark.parametrize(
    ("value", "region"),
    [
        ("555-0100", "US"),  # possible but not valid: phonenumbers says why
        ("415 555 0123", None),  # national, no region
        ("+800 1234 5678", None),  # non-geographic
        ("+1 415 555 0123 ext. 7", "US"),
        ("4l5 555 0123", "US"),
        ("+0 415 555 0123", "US"),
        ("12", "US"),
        ("", "US"),
        ("+", None),
        ("9" * 300, "US"),
    ],
)
def test_what_the_fast_path_leaves_to_phonenumbers(value: str, region: str | None) -> None:
    assert fast_e164_for(region)(value) is None
    assert_same(value, region)


def _spelled_by_the_pattern(value: str) -> tuple[str, str] | None:
    """The express step's spelling as it was first written: `_SPELLING`'s groups, separators deleted."""
    spelled = _SPELLING.fullmatch(value)
    if spelled is None:
        return None
    sign, digits = spelled.groups()
    return sign, digits.replace(" ", "").replace("(", "").replace(")", "").replace(".", "").replace("-", "")


SPELLING_CHARS = [*" ().-+0123456789", "\t", "x", "\u0665", "\u00a0", "tel:", "++", "(+", ")+", ".+"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(SPELLING_CHARS), max_size=16).map("".join) | st.text(max_size=20))
def test_the_spelling_without_the_pattern_is_the_patterns(value: str) -> None:
    assert _spelled(value) == _spelled_by_the_pattern(value), value
