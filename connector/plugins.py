"""Finding source types: the built-ins, packages registered under the entry-point group
`capture_sync.sources`, and `"package.module:Class"` written in the config, imported from an
installed package or, failing that, from the config's own folder (a plugin kept beside its config)."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from . import logs
from .problems import ConfigProblem, problems_from
from .source import Source

ENTRY_POINT_GROUP = "capture_sync.sources"
BUILTINS = {
    "csv": "sources.csv_files:CsvSource",
    "jsonl": "sources.jsonl_files:JsonlSource",
    "sql": "sources.sql:SqlSource",
    "http": "sources.http_api:HttpSource",
}

log = logs.get_logger("capture_sync.plugins")


@dataclass(frozen=True)
class SourceType:
    """One installed source type, as `capture-sync sources list` shows it."""

    name: str
    origin: str  # "built-in" or the distribution that registered it
    target: str  # "package.module:Class"
    cls: type[Source] | None
    error: str | None = None  # why it could not be loaded


def import_object(target: str, search: Path | None = None) -> Any:
    """`package.module:attr.path` -> the object; raises ImportError or AttributeError. A module that
    is not installed is looked for in `search` (the config's folder) too: that folder goes at the end
    of the import path, so an installed package of the same name always wins."""
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.partition(".")[0]
        if (
            search is None
            or exc.name != top
            or not ((search / f"{top}.py").is_file() or (search / top / "__init__.py").is_file())
        ):
            raise
        if str(search) not in sys.path:
            sys.path.append(str(search))
        obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _as_source(obj: Any, target: str) -> type[Source]:
    if not (isinstance(obj, type) and issubclass(obj, Source)):
        raise TypeError(f"{target} is not a subclass of connector.source.Source")
    return obj


def _load(target: str, search: Path | None = None) -> type[Source]:
    return _as_source(import_object(target, search), target)


def discover() -> list[SourceType]:
    """Every source type, built-ins first; a plugin that fails to load is listed with its error."""
    found = [SourceType(name, "built-in", target, _load(target)) for name, target in BUILTINS.items()]
    taken = set(BUILTINS)
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        origin = ep.dist.name if ep.dist else "unknown package"
        if ep.name in taken:
            log.warning("source type name already taken; plugin ignored", type=ep.name, package=origin)
            continue
        taken.add(ep.name)
        try:
            found.append(SourceType(ep.name, origin, ep.value, _as_source(ep.load(), ep.value)))
        except Exception as exc:  # a broken plugin must not break the others
            found.append(SourceType(ep.name, origin, ep.value, None, f"{type(exc).__name__}: {exc}"))
    return found


def source_types() -> dict[str, type[Source]]:
    """Built-ins and entry points that load, by type name."""
    return {t.name: t.cls for t in discover() if t.cls is not None}


def load_source_type(type_name: str, search: Path | None = None) -> type[Source]:
    """ "csv" | an entry-point name | "package.module:Class" (installed, or in `search`); raises ConfigProblem."""
    if ":" in type_name:
        try:
            return _load(type_name, search)
        except (ImportError, AttributeError, TypeError) as exc:
            raise ConfigProblem([f"cannot load source type {type_name!r}: {exc}"]) from exc
    if type_name in BUILTINS:
        return _load(BUILTINS[type_name])
    for found in discover():
        if found.name == type_name:
            if found.cls is None:
                raise ConfigProblem([f"source type {type_name!r} ({found.origin}) does not load: {found.error}"])
            return found.cls
    known = ", ".join(t.name for t in discover())
    raise ConfigProblem([f'unknown source type {type_name!r} (installed: {known}; or use "package.module:Class")'])


def build_source(name: str, type_name: str, options: dict[str, Any], config_dir: Path | None = None) -> Source:
    """The configured source `name`; every problem names its key, e.g. `sources.signups.path`.
    `config_dir` anchors relative `ConfigPath` options (default: the working directory)."""
    where = f"sources.{name}"
    try:
        cls = load_source_type(type_name, config_dir)
    except ConfigProblem as exc:
        raise ConfigProblem([f"{where}.type: {p}" for p in exc.problems]) from exc
    try:
        context = {"config_dir": str(config_dir)} if config_dir is not None else None
        validated = cls.Options.model_validate(options, context=context)
    except ValidationError as exc:
        raise ConfigProblem(problems_from(exc, where)) from exc
    return cls(name, validated)
