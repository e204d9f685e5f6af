"""`capture-sync sources preview`: what a source yields, as read, and what a mapping makes of it.

For a plugin author checking a source before any config, API or ledger exists: the source is
built from `--type` and `--option KEY=VALUE` pairs (or taken from a config by name), read from the
start, and each item printed as it comes; nothing is sent, stored or committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..delivery import Checker, position
from ..delivery import Slip as BrokenRule
from ..mapping import Mapping, Rejection
from ..plugins import build_source
from ..problems import ConfigProblem
from ..source import BadRecord, Passed, Record, Source

PREVIEW_NAME = "preview"  # the name a source built from --type gets (its problems are renamed --option)


def parse_pairs(pairs: list[str], flag: str) -> dict[str, Any]:
    """`KEY=VALUE` pairs as a dict; a value starting with `[` or `{` is JSON (a list or table option),
    any other is text, which the options model converts (numbers, booleans). Raises ConfigProblem."""
    parsed: dict[str, Any] = {}
    problems = []
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            problems.append(f"{flag} {pair!r}: write KEY=VALUE")
            continue
        if value.lstrip()[:1] in ("[", "{"):
            try:
                parsed[key.strip()] = json.loads(value)
                continue
            except ValueError as exc:
                problems.append(f"{flag} {key}: not valid JSON ({exc})")
                continue
        parsed[key.strip()] = value
    if problems:
        raise ConfigProblem(problems)
    return parsed


def source_from_options(type_name: str, options: list[str]) -> Source:
    """A source of type `type_name` from `--option` pairs, relative paths from the working directory;
    its problems name the flags the user wrote."""
    try:
        return build_source(PREVIEW_NAME, type_name, parse_pairs(options, "--option"))
    except ConfigProblem as exc:
        prefix = f"sources.{PREVIEW_NAME}."
        renamed = [p.replace(f"{prefix}type:", "--type:").replace(prefix, "--option ") for p in exc.problems]
        raise ConfigProblem(renamed) from exc


def mapping_from_pairs(pairs: list[str]) -> Mapping:
    """`--map FIELD=COLUMN` pairs as a mapping table (`custom_fields.NAME=COLUMN` too)."""
    table: dict[str, Any] = {}
    for field, column in parse_pairs(pairs, "--map").items():
        if field.startswith("custom_fields."):
            table.setdefault("custom_fields", {})[field.removeprefix("custom_fields.")] = column
        else:
            table[field] = column
    return Mapping.from_config(table, where="--map")


@dataclass
class Slip:
    """The read ended badly after `index` items: an exception, or an item of no known kind."""

    index: int
    message: str


def read_items(source: Source, limit: int) -> tuple[list[Record | BadRecord], bool, Slip | None]:
    """The first `limit` items of a read from the start, whether more follow, and what ended the read
    early (the items before it are kept, as a sync keeps them)."""
    items: list[Record | BadRecord] = []
    stream: Iterator[Any] = iter(())
    checker = Checker()  # the rules a sync applies to what a source yields
    try:
        stream = iter(source.read(None))
        for n, item in enumerate(stream, 1):
            try:
                item = checker.check(item)
            except BrokenRule as rule:
                return items, False, Slip(len(items), f"{position(n, item)}: {rule}")
            if isinstance(item, Passed):  # below a cursor: none comes in a read from the start
                continue
            items.append(item)
            if len(items) > limit:
                break
    except Exception as exc:  # a plugin's failure, said with its place, as a sync says it
        return items, False, Slip(len(items), f"read() raised {type(exc).__name__}: {exc}")
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        source.close()
    return items[:limit], len(items) > limit, None


def as_dict(index: int, item: Record | BadRecord, mapping: Mapping | None) -> dict[str, Any]:
    """One item for `--json`, and what the mapping makes of it."""
    if isinstance(item, BadRecord):
        return {
            "index": index,
            "kind": "bad_record",
            "id": item.id,
            "where": item.where,
            "reason": item.reason,
            "raw": item.raw,
            "state": item.state,
        }
    shown: dict[str, Any] = {
        "index": index,
        "kind": "record",
        "id": item.id,
        "where": item.where,
        "order": item.order,
        "data": item.data,
        "state": item.state,
    }
    if mapping is not None:
        person, notes = mapping.map_noting(dict(item.data))
        if isinstance(person, Rejection):
            shown["rejected"] = person.reasons
        else:
            shown["person"] = person.model_dump(mode="json", exclude_none=True)
            shown["notes"] = list(notes)
    return shown


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def text_lines(shown: dict[str, Any]) -> Iterator[str]:
    """One item for people: its id and position, then its fields, state and mapping, indented."""
    where = f"  ({shown['where']})" if shown["where"] else ""
    if shown["kind"] == "bad_record":
        yield f"{shown['index']:>3}. bad record {shown['id'] or ''}{where}".rstrip()
        yield f"     reason: {shown['reason']}"
        if shown["raw"] is not None:
            yield f"     raw:    {_json(shown['raw'])}"
    else:
        order = "" if shown["order"] is None else f"  order {_json(shown['order'])}"
        yield f"{shown['index']:>3}. {shown['id']}{where}{order}"
        yield f"     data:   {_json(shown['data'])}"
    yield f"     state:  {_json(shown['state'])}"
    if "person" in shown:
        yield f"     person: {_json(shown['person'])}"
        yield from (f"     note:   {note}" for note in shown["notes"])
    for reason in shown.get("rejected", ()):
        yield f"     rejected: {reason}"


def print_preview(
    items: list[Record | BadRecord], mapping: Mapping | None, as_json: bool, echo: Callable[[str], None]
) -> dict[str, int]:
    """Print each item; returns the counts (records, bad, mapped, rejected)."""
    counts = dict.fromkeys(("records", "bad_records", "mapped", "rejected"), 0)
    for index, item in enumerate(items, 1):
        shown = as_dict(index, item, mapping)
        counts["records" if shown["kind"] == "record" else "bad_records"] += 1
        counts["mapped"] += "person" in shown
        counts["rejected"] += "rejected" in shown
        if as_json:
            echo(_json(shown))
        else:
            for line in text_lines(shown):
                echo(line)
    return counts
