"""Config keys from the environment, one naming rule for all: `CAPTURE_SYNC__<SECTION>__<KEY>`, with
`__` between nested keys (`CAPTURE_SYNC__CAPTURE__RETRY__MAX_ATTEMPTS`) and, for a source,
`CAPTURE_SYNC__SOURCES__<NAME>__<KEY>` (the name upper-cased, other characters than letters and
digits as `_`; named `[[alerts]]` likewise). A value is read as a TOML value when it is one (`50`, `true`, `["a", "b"]`,
`"quoted text"`), else as the string it is (`every 1m`). Containers, twelve-factor deployments and
CI set a key without rewriting the file; the file still names every key an override may set.

Credentials never come from here: `CAPTURE_API_KEY` / `CAPTURE_API_SECRET` and the credential files
stay the only ways, so a secret is not spread over two variable names. An override of an unknown
key is an error naming the variable, as a typo in the file is.
"""

from __future__ import annotations

import re
import tomllib
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

PREFIX = "CAPTURE_SYNC__"
CREDENTIALS = {"api_key": "CAPTURE_API_KEY", "api_secret": "CAPTURE_API_SECRET"}


def parse_value(text: str) -> Any:
    """The value as TOML would read it after `key = `, or the text itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply(
    doc: dict[str, Any], environ: Mapping[str, str], sections: Mapping[str, type[BaseModel]], problems: list[str]
) -> dict[str, str]:
    """Set each override in `doc` (the parsed TOML, changed in place); each problem goes to `problems`
    naming its variable. Returns {dotted key: variable} of the keys set, for naming them in later problems."""
    applied: dict[str, str] = {}
    for var in sorted(v for v in environ if v.upper().startswith(PREFIX)):
        parts = [p.lower() for p in var[len(PREFIX) :].split("__")]
        if not all(parts) or len(parts) < 2:
            problems.append(f"env {var}: name a key as {PREFIX}<SECTION>__<KEY>, e.g. {PREFIX}CAPTURE__BATCH_SIZE")
            continue
        try:
            applied[_set(doc, parts, parse_value(environ[var]), sections)] = var
        except _Refused as exc:
            problems.append(f"env {var}: {exc}")
    return applied


class _Refused(Exception):
    """An override that cannot be applied; the message says why."""


def annotate(problem: str, applied: Mapping[str, str]) -> str:
    """`capture.batch_size: ...` -> `capture.batch_size: ... (set by env CAPTURE_SYNC__CAPTURE__BATCH_SIZE)`."""
    for key, var in applied.items():
        if problem.startswith(f"{key}:") or problem.startswith(f"{key}."):
            return f"{problem} (set by env {var})"
    return problem


def _set(doc: dict[str, Any], parts: list[str], value: Any, sections: Mapping[str, type[BaseModel]]) -> str:
    """Set one override; returns the dotted key it set."""
    section, *keys = parts
    if section in ("sources", "alerts"):
        return _set_named(doc, section, keys, value)
    model = sections.get(section)
    if model is None:
        raise _Refused(f"unknown section {section!r} (known: {', '.join([*sections, 'sources', 'alerts'])})")
    if section == "capture" and keys[0] in CREDENTIALS:
        raise _Refused(
            f"credentials are not taken from {PREFIX}* variables; set env {CREDENTIALS[keys[0]]} "
            f"or point capture.{keys[0]}_file at a file readable only by this user"
        )
    _check_known(model, keys, section)
    table = doc.setdefault(section, {})
    if not isinstance(table, dict):
        raise _Refused(f"{section} in the file is not a table")
    return _put(table, keys, value, section)


def _check_known(model: type[BaseModel], keys: list[str], where: str) -> None:
    """`keys` must name a field of `model`, following nested sections (capture.retry)."""
    for i, key in enumerate(keys):
        if key not in model.model_fields:
            raise _Refused(f"unknown key {where}.{key} (known: {', '.join(model.model_fields)})")
        where = f"{where}.{key}"
        if i == len(keys) - 1:
            return
        nested = _model_of(model.model_fields[key].annotation)
        if nested is None:
            raise _Refused(f"{where} is not a table")
        model = nested


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _env_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "_", name.lower())


def _set_named(doc: dict[str, Any], section: str, keys: list[str], value: Any) -> str:
    """A key of a named `[[sources]]` (or `[[alerts]]`) table in the file: its own keys or its
    adapter's options (an unknown one is refused where the file's would be, naming the key; `annotate`
    adds the variable). The names are the file's: an override cannot add a table."""
    if len(keys) < 2:
        raise _Refused(f"name the table and its key: {PREFIX}{section.upper()}__<NAME>__<KEY>")
    wanted, *rest = keys
    found = doc.get(section)
    tables = [t for t in found if isinstance(t, dict)] if isinstance(found, list) else []
    matches = [t for t in tables if isinstance(t.get("name"), str) and _env_name(t["name"]) == wanted]
    if not matches:
        names = ", ".join(str(t["name"]) for t in tables if t.get("name")) or "none"
        raise _Refused(
            f"no {section} entry named like {wanted!r} in the file (named: {names}); an override cannot add one"
        )
    if len(matches) > 1:
        raise _Refused(f"{section} {', '.join(t['name'] for t in matches)} spell alike in a variable name; rename one")
    if rest[0] == "name":
        raise _Refused(f"a {section} entry's name cannot be overridden (a source's is part of every idempotency key)")
    if section == "alerts" and rest[0] == "url":
        raise _Refused("a webhook URL is a secret: set url_env (a variable holding it) or url_file instead")
    return _put(matches[0], rest, value, f"{section}.{matches[0]['name']}")


def _put(table: dict[str, Any], keys: list[str], value: Any, where: str) -> str:
    for key in keys[:-1]:
        where = f"{where}.{key}"
        inner = table.setdefault(key, {})
        if not isinstance(inner, dict):
            raise _Refused(f"{where} in the file is not a table")
        table = inner
    table[keys[-1]] = value
    return f"{where}.{keys[-1]}"
