"""`capture-sync sources`: the installed source types and their options (`list`), a new plugin
package (`new`), and what a source reads, mapped or not (`preview`): an author's loop with no API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from pydantic.fields import FieldInfo

from ..config_file import DEFAULT_PATH, ENV_CONFIG
from ..plugins import SourceType, discover
from ..source import SourceError
from ._common import ExitCode, command, fail

app = typer.Typer(help="Source types: the built-ins and installed plugins.", no_args_is_help=True)


def _option_line(name: str, field: FieldInfo) -> str:
    default = (
        "required"
        if field.is_required()
        else f"default {json.dumps(field.get_default(call_default_factory=True), default=str)}"
    )
    return f"    {name:<16} {default:<24} {field.description or ''}".rstrip()


def _describe(found: SourceType) -> list[str]:
    head = f"{found.name}  ({found.origin}, {found.target})"
    if found.cls is None:
        return [head, f"    does not load: {found.error}"]
    summary = (found.cls.__doc__ or "").strip().splitlines()
    lines = [head] + ([f"    {summary[0]}"] if summary else [])
    return lines + [_option_line(n, f) for n, f in found.cls.Options.model_fields.items()]


def _as_dict(found: SourceType) -> dict[str, Any]:
    """One source type for `--json`: what `_describe` prints, as fields."""
    options = (
        {}
        if found.cls is None
        else {
            name: {
                "required": field.is_required(),
                "default": None if field.is_required() else field.get_default(call_default_factory=True),
                "description": field.description,
            }
            for name, field in found.cls.Options.model_fields.items()
        }
    )
    lines = (found.cls.__doc__ or "").strip().splitlines() if found.cls else []
    return {
        "name": found.name,
        "origin": found.origin,
        "builtin": found.origin == "built-in",
        "target": found.target,
        "loads": found.cls is not None,
        "error": found.error,
        "summary": lines[0] if lines else None,
        "description": "\n".join(lines) or None,
        "options": options,
        "options_schema": _schema(found),
    }


def _schema(found: SourceType) -> dict[str, Any] | None:
    """The options model as JSON Schema (None when the type does not load or its model has no schema)."""
    if found.cls is None:
        return None
    try:
        return found.cls.Options.model_json_schema()
    except Exception:  # a plugin's field type pydantic cannot describe: the rest of the listing stands
        return None


@app.command("list")
def list_sources(
    as_json: bool = typer.Option(
        False,
        "--json",
        help='One JSON object {"sources": [...]} on stdout: each type\'s name, origin (built-in, or the '
        "package whose entry point registers it), description and options as JSON Schema (options_schema).",
    ),
) -> None:
    """Show each installed source type (built-in or plugin) with its options."""
    if as_json:
        typer.echo(json.dumps({"sources": [_as_dict(found) for found in discover()]}, default=str))
        return
    blocks = ["\n".join(_describe(found)) for found in discover()]
    typer.echo("\n\n".join(blocks))


@app.command("new")
@command(config=False)
def new(
    name: str = typer.Argument(
        ..., help="The source type name: lower-case letters, digits and '_' (e.g. spreadsheet)."
    ),
    folder: Path | None = typer.Option(
        None, "--dir", help="Where to write the package (default ./capture-sync-NAME); absent or empty."
    ),
) -> int:
    """Write a new source plugin package for type NAME, ready to install and test.

    It holds a pyproject.toml registering NAME under the entry point group capture_sync.sources, an options model on connector.incremental.CursorOptions, a read() over read_incremental with a sample data file, a README, and tests on the plugin kit (connector.testing.SourceContract) with every hook implemented, which pass as generated once the package is installed beside capture-sync. An invalid NAME or an existing non-empty folder is one line and exit 2.

    Example: capture-sync sources new spreadsheet --dir ./my-plugin
    """
    from ..scaffold import PluginName, ScaffoldError, new_plugin

    try:
        written_to, files = new_plugin(name, folder)
    except ScaffoldError as exc:
        fail(str(exc), ExitCode.USAGE)
    plugin = PluginName(name)
    typer.echo(f"wrote {len(files)} files to {written_to}: the package {plugin.dist}, source type {name!r}")
    typer.echo(f"next: pip install -e '{written_to}[test]' (capture-sync's pip), then pytest {written_to}")
    typer.echo(
        f"      capture-sync sources preview --type {name} --option path={written_to / 'sample' / 'contacts.json'}"
    )
    return 0


@app.command("preview")
@command(config=False)
def preview(
    source: str | None = typer.Option(None, "--source", help="A source of the config (-c), by name."),
    config_file: Path = typer.Option(
        DEFAULT_PATH, "-c", "--config", envvar=ENV_CONFIG, help="The config file, with --source."
    ),
    type_name: str | None = typer.Option(None, "--type", help="A source type (as `type` in a config), with no config."),
    option: list[str] = typer.Option([], "--option", metavar="KEY=VALUE", help="An option of --type; repeat it."),
    limit: int = typer.Option(10, "--limit", min=1, help="How many records to print."),
    mapped: bool = typer.Option(
        False, "--mapped", help="Also show what the mapping makes of each record and what it rejects."
    ),
    map_pairs: list[str] = typer.Option(
        [],
        "--map",
        metavar="FIELD=COLUMN",
        help="A mapping rule (person field = source field); repeat it. Implies --mapped.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="One JSON object per line per record: index, kind (record or bad_record), id, where, data or "
        "reason and raw, state, and with --mapped person and notes, or rejected.",
    ),
) -> int:
    """Print the first records a source reads, as read, and what a mapping makes of them.

    The source is a configured one (--source NAME -c FILE: its type, options and mapping; neither credentials nor the capture table are read) or a type with its options (--type T --option KEY=VALUE ...: no config needed; relative paths from the working directory). Each record is shown with its id, where, data and state; a bad record with its reason. With --mapped (the config's mapping, or --map FIELD=COLUMN pairs) each record also shows the person it maps to, or why it is rejected. Nothing is sent and no ledger is opened. A source whose check() fails is one line and exit 2; a read that raises or yields something else than a Record or a BadRecord is one line and exit 6, after the records before it.

    Example: capture-sync sources preview --type csv --option path=contacts.csv --option primary_key=id --map email=Email --map name=Name
    """
    from ._preview import mapping_from_pairs, print_preview, read_items, source_from_options

    if (source is None) == (type_name is None):
        fail("give --source NAME (a source of the config) or --type TYPE with --option KEY=VALUE pairs", ExitCode.USAGE)
    if source is not None:
        if option:
            fail("--option goes with --type: a configured source's options are in its config", ExitCode.USAGE)
        from ..config import load_source

        configured = load_source(config_file, source)
        reader, mapping = configured.job.source, configured.job.mapping
    else:
        assert type_name is not None
        if mapped and not map_pairs:
            fail("--mapped with --type needs --map FIELD=COLUMN pairs (e.g. --map email=Email)", ExitCode.USAGE)
        reader, mapping = source_from_options(type_name, option), None
    if map_pairs:
        mapping = mapping_from_pairs(map_pairs)
    name = source or type_name
    try:
        reader.check()
    except SourceError as exc:
        reader.close()
        fail(f"source {name}: {exc}", ExitCode.USAGE)
    items, more, slip = read_items(reader, limit)
    counts = print_preview(items, mapping if mapped or map_pairs else None, as_json, typer.echo)
    if slip is not None:
        fail(f"source {name}: after {slip.index} item(s): {slip.message}", ExitCode.SOURCE_FAILED)
    if not as_json:
        mapped_counts = f", {counts['mapped']} mapped, {counts['rejected']} rejected" if mapped or map_pairs else ""
        tail = f"; the first {limit} shown (--limit for more)" if more else ""
        typer.echo(f"{counts['records']} record(s), {counts['bad_records']} bad record(s){mapped_counts}{tail}")
    return 0
