"""A fast path to E.164 for the spellings most exports hold, exactly `phonenumbers`' answer or none.

`phonenumbers.parse` + `is_valid_number` cost some 20-30 us a number, mostly in work that plain
spellings do not need: regular expressions for extensions, letters, RFC 3966 and Unicode digits run
on every input, and each metadata pattern is looked up by its text for each use. `fast_e164_for` takes
the spellings made only of ASCII digits, one leading `+`, spaces, dashes, dots and parentheses
(optionally `tel:` first and whitespace around), and follows `phonenumbers`' own steps on them:
international prefix (`+` or the default region's, such as 011 or 00), country code, the default
region's code written without `+`, national prefix, possible lengths, then validity by the region's
number patterns. Every rule comes from `phonenumbers`' metadata, compiled once per region at first
use, so a new `phonenumbers` release brings its data here too; nothing is a table of our own.

It answers only when the number is valid and every step is one it models; anything else (another
spelling, a non-geographic code, an invalid number) is None, and the caller asks `phonenumbers`,
so every refusal and its reason are `phonenumbers`' own. tests/mapping/test_phone_fast_path.py
holds each answer to `phonenumbers`' over generated numbers of every region in every spelling.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from phonenumbers import COUNTRY_CODE_TO_REGION_CODE, SUPPORTED_REGIONS, PhoneMetadata

from ._phone_regions import BACK_REFERENCE, MAX_NSN, MIN_NSN, NOTHING, Region, Unsure, compiled_region, sure_region

# `phonenumbers`' limits (phonenumberutil: _MAX_INPUT_STRING_LENGTH, _MAX_LENGTH_COUNTRY_CODE; the NSN's
# lengths are in `_phone_regions`); the property test catches a release that changes them.
MAX_INPUT = 250
MAX_CC_DIGITS = 3
NON_GEO = "001"

# After `strip()` and an optional `tel:`: leading parentheses or spaces (phonenumbers skips
# whatever precedes the first `+` or digit), one optional `+`, then digits and the separators
# phonenumbers treats as punctuation. Tabs or NBSP inside, letters, `x`, `#`, `,`, `;`, `/`,
# non-ASCII digits and a second `+` are all left to phonenumbers.
_SPELLING = re.compile(r"[ (]*(\+?)([0-9 ().\-]*)")
_SEPARATORS = b" ().-"  # deleted from the ASCII bytes: a third of str.translate's cost


def _spelled(value: str) -> tuple[str, str] | None:
    """`_SPELLING`'s sign and digits (its separators deleted) when `value` fits it, else None: without
    the pattern. `value` fits exactly when, its separators deleted from its ASCII bytes, what is left
    is ASCII digits after at most one `+`, and only spaces and parentheses come before that `+`
    (tests/mapping/test_phone_fast_path.py holds the two equal)."""
    try:
        body = value.encode("ascii").translate(None, _SEPARATORS)
    except UnicodeEncodeError:
        return None
    sign = ""
    if body[:1] == b"+":
        if value.lstrip(" (")[:1] != "+":
            return None
        sign, body = "+", body[1:]
    if body and not body.isdigit():
        return None
    return sign, body.decode("ascii")


def _strip_national_prefix(digits: str, region: Region) -> str:
    """`_maybe_strip_national_prefix_carrier_code`'s number: the prefix removed, or rewritten by
    the region's transform rule when its last group took part (Argentina's 15, Guernsey's short
    local numbers), unless that turns a number the general pattern fits into one it does not."""
    if not digits or region.national_prefix is None:
        return digits
    match = region.national_prefix.match(digits)
    if match is None:
        return digits
    groups = match.groups()
    if region.prefix_transform is not None and not groups:
        raise Unsure  # phonenumbers would index a group that is not there
    if region.prefix_transform is None or groups[-1] is None:
        stripped = digits[match.end() :]
    else:
        stripped = region.national_prefix.sub(region.prefix_transform, digits, count=1)
    if region.general_match(digits) and not region.general_match(stripped):
        return digits
    return stripped


def _split_country_code(digits: str) -> tuple[int, str]:
    """`_extract_country_code`: the shortest known code at the start, or none (0)."""
    if not digits or digits[0] == "0":
        return 0, digits
    for size in range(1, min(len(digits), MAX_CC_DIGITS) + 1):
        code = int(digits[:size])
        if code in COUNTRY_CODE_TO_REGION_CODE:
            return code, digits[size:]
    return 0, digits


def _international(digits: str) -> tuple[int, str]:
    """After `+` or an IDD: too short or no known country code is a parse error (or, after `+`,
    phonenumbers' retry without it): left to phonenumbers."""
    if len(digits) <= MIN_NSN:
        raise Unsure
    code, rest = _split_country_code(digits)
    if code == 0:
        raise Unsure
    return code, rest


def _country_and_number(plus: bool, digits: str, default: Region | None) -> tuple[int, str, Region]:
    """`_maybe_extract_country_code` and the metadata parse goes on with."""
    if plus:
        code, rest = _international(digits)
    elif default is None:
        raise Unsure  # a national number with no region: phonenumbers says why
    else:
        code, rest = 0, digits
        if default.idd is not None and (idd := default.idd.match(digits)) and digits[idd.end() : idd.end() + 1] != "0":
            code, rest = _international(digits[idd.end() :])
        elif digits.startswith(default.cc_text):
            stripped = _strip_national_prefix(digits[len(default.cc_text) :], default)
            if (not default.general_match(digits) and default.general_match(stripped)) or default.length_verdict(
                digits
            ) == "too_long":
                code, rest = default.country_code, stripped
        if code == 0:
            return default.country_code, digits, default
    regions = COUNTRY_CODE_TO_REGION_CODE[code]
    if NON_GEO in regions:
        raise Unsure
    return code, rest, sure_region(regions[0])


def _valid_somewhere(code: int, nsn: str) -> bool:
    """`is_valid_number`: the region the number belongs to (the one region of its code, else the
    first whose leading digits or patterns fit), then that region's patterns."""
    regions = COUNTRY_CODE_TO_REGION_CODE[code]
    if len(regions) == 1:
        return sure_region(regions[0]).is_valid(nsn)
    for code_region in regions:
        region = compiled_region(code_region)
        if region is None:
            if PhoneMetadata.metadata_for_region(code_region, None) is not None:
                raise Unsure  # one phonenumbers would consult, that the fast path does not model
            continue
        if region.leading_digits is not None:
            if region.leading_digits.match(nsn):
                return region.is_valid(nsn)
        elif region.is_valid(nsn):
            return True
    return False


def _default(region: str | None) -> Region | None:
    """The default region's metadata (None without one); Unsure for one the fast path does not model."""
    if region is None:
        return None
    if region not in SUPPORTED_REGIONS:
        raise Unsure
    return sure_region(region)


def _valid_pattern(code: int, upto: str) -> str:
    """`_valid_somewhere(code, nsn)` as one pattern, matched at the national number's start: the
    same walk over the code's regions (a region's leading digits decide it, else its patterns or
    the next region's), ending with no match where the walk would give up (`Unsure`) and after
    region `upto` (the default region: the walk goes on to the code's other regions, but compiling
    all of +1's 25 would cost a tenth of a second of every sync's start)."""
    branches: list[tuple[re.Pattern[str] | None, str]] = []
    for code_region in COUNTRY_CODE_TO_REGION_CODE[code]:
        region = compiled_region(code_region)
        if region is not None:
            branches.append((region.leading_digits, region.any_valid()))
        elif PhoneMetadata.metadata_for_region(code_region, None) is not None:
            break
        if code_region == upto:
            break
    walk = NOTHING
    for leading, valid in reversed(branches):
        if leading is None:
            walk = f"(?:{valid}|{walk})"
        else:
            walk = f"(?:(?={leading.pattern}){valid}|(?!{leading.pattern}){walk})"
    return walk


def _not(pattern: re.Pattern[str] | None) -> str:
    """A lookahead that fails where `pattern.match` would succeed (nothing without a pattern)."""
    return f"(?!{pattern.pattern})" if pattern is not None else ""


# Anchors whose meaning changes inside a larger pattern: a region using one has no express path.
_ANCHORED = re.compile(r"\^|\\A|\(\?<[=!]")


@cache
def _express(code: str) -> Callable[[str], str | None] | None:
    """The common spellings of a valid number of the default region's country code in one step each:
    the spelling's digits, then one precompiled pattern that holds `_fast`'s walk for them, so that a
    match is `_fast`'s answer by construction (each condition below is one of its steps, made a
    lookahead). Three shapes: national digits with no prefix of any kind; the country code written
    without `+` before a number the general pattern fits (and the whole does not); `+` and the code.
    None when a pattern cannot be embedded (a back reference, an anchor) or the code has a shorter
    code as its prefix; anything the patterns refuse goes to `_fast`, so they only need to be sure."""
    default = compiled_region(code)
    if default is None:
        return None
    cc = default.cc_text
    # the metadata a code's number is parsed with
    main = compiled_region(COUNTRY_CODE_TO_REGION_CODE[default.country_code][0])
    if (
        main is None
        or default.general is None
        or any(int(cc[:k]) in COUNTRY_CODE_TO_REGION_CODE for k in range(1, len(cc)))
    ):
        return None
    valid = _valid_pattern(default.country_code, default.code)
    general = default.general.pattern
    embedded = [p.pattern for p in (default.idd, default.national_prefix, main.national_prefix) if p] + [valid, general]
    if any(BACK_REFERENCE.search(text) or _ANCHORED.search(text) for text in embedded):
        return None
    # One pattern for the three shapes (the valid numbers' patterns, most of its size, compiled once),
    # matched on the sign and the digits: `+` and the code, then a national number with no prefix to
    # strip (`_international`); else no IDD (`_country_and_number`), and either no code and no national
    # prefix (and `_fast`'s three digits at least), or the code then a number the general pattern fits
    # where the whole does not, with no prefix to strip.
    whole = re.compile(
        rf"(?:\+{cc}{_not(main.national_prefix)}|{_not(default.idd)}(?:(?!{cc}){_not(default.national_prefix)}(?=\d{{3}})"
        rf"|(?!(?:{general})\Z){cc}(?=(?:{general})\Z){_not(default.national_prefix)}{_not(main.national_prefix)})){valid}"
    ).fullmatch
    prefix, spelling = "+" + cc, _spelled

    def express(value: str) -> str | None:
        # `_fast`'s spelling on the value as given: strip() and `tel:` change nothing that matches
        # (the spaces at either end are separators; `t` is not in the spelling's alphabet)
        spelled = spelling(value) if len(value) <= MAX_INPUT else None
        if spelled is None:
            return None
        sign, digits = spelled
        if whole(sign + digits) is None:
            return None
        # the national shape has no code in front (its lookahead), the other two have it
        return "+" + digits if sign or digits.startswith(cc) else prefix + digits

    return express


def express_e164_for(region: str | None) -> Callable[[str], str | None]:
    """`fast_e164_for`'s first step alone (None where it does not answer), for the property tests."""
    return e164_steps(region)[0]


def _fast(value: str, default: Region | None) -> str | None:
    if len(value) > MAX_INPUT:
        return None
    text = value.strip()
    if text[:4].lower() == "tel:":
        text = text[4:]
    spelled = _SPELLING.fullmatch(text)
    if spelled is None:
        return None
    spelling = spelled[2]
    digits = spelling if spelling.isdigit() else spelling.encode("ascii").translate(None, _SEPARATORS).decode("ascii")
    if len(digits) < 3:  # phonenumbers' viability test: at least three digits
        return None
    code, national, metadata = _country_and_number(bool(spelled[1]), digits, default)
    if len(national) < MIN_NSN:
        return None
    stripped = _strip_national_prefix(national, metadata)
    if metadata.length_verdict(stripped) not in ("too_short", "local", "invalid"):
        national = stripped
    if not MIN_NSN <= len(national) <= MAX_NSN or not national.strip("0"):
        return None
    if not _valid_somewhere(code, national):
        return None
    return f"+{code}{national}"


def e164_steps(region: str | None) -> tuple[Callable[[str], str | None], Callable[[str], str | None]]:
    """`fast_e164_for`'s two steps, for a caller that takes them in turn itself (the e164 transform: a
    call per number saved): the express pattern, then `_fast`'s walk. The region's metadata is looked
    up once (a mapping's e164 transform calls them for every record, and the look-up was a tenth of a
    number's cost)."""
    try:
        default = _default(region)
    except Unsure:
        return _none, _none
    express = (_express(default.code) if default is not None else None) or _none

    def walk(value: str) -> str | None:
        try:
            return _fast(value, default)
        except Unsure:
            return None

    return express, walk


def fast_e164_for(region: str | None) -> Callable[[str], str | None]:
    """A function giving the number in E.164 when its argument is a plain spelling of a number
    `phonenumbers` holds valid (parsed with `region` as the default), None when `phonenumbers` must
    answer: `e164_steps` in turn."""
    express, walk = e164_steps(region)

    def fast(value: str) -> str | None:
        answer = express(value)
        return answer if answer is not None else walk(value)

    return fast


def _none(value: str) -> None:
    return None
