"""`capture-sync state`: show, set and reset a source's cursor, every change kept in the ledger's state
history so that it can be put back (each change prints the exact command that undoes it)."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict
from typing import Any

import typer

from ..config import Config
from ..plugins import BUILTINS
from ._common import ExitCode, command, fail, out, table
from ._output import emit_json
from .ledger import open_existing

app = typer.Typer(
    help="A source's cursor (where its next read starts): show it, set it, reset it; the old value is kept.",
    no_args_is_help=True,
)

SHAPES = """\
The built-in sources' states are JSON objects. csv and jsonl without a cursor:
{"file": "export-7.csv", "offset": 18234, "line": 412, "tail": [..], "order": "name"}; with a cursor,
after a whole pass {"cursor": VALUE} (the next pass reads from VALUE, included), inside a pass
{"pass": .., "max": .., "at": ..}. sql: {"cursor": VALUE} after a pass, {"at": {"cursor": .., "key": ..}}
inside one (always without a cursor). http: {"url": PAGE_URL, "index": N}, or {"cursor": VALUE} with
`since`. `state show` prints the current one: edit a copy of it."""

_SOURCE = typer.Option(..., "--source", help="The source's name in the config.")


def _dump(value: Any) -> str:
    return "none (the next read starts from the beginning)" if value is None else json.dumps(value, ensure_ascii=False)


def undo_command(cfg: Config, source: str, old: Any) -> str:
    """The command that puts `old` back."""
    c = f"-c {shlex.quote(str(cfg.path))} --source {shlex.quote(source)}"
    if old is None:
        return f"capture-sync state reset {c}"
    return f"capture-sync state set {c} {shlex.quote(json.dumps(old, ensure_ascii=False))}"


@app.command("show")
@command()
def show(
    cfg: Config,
    source: str | None = typer.Option(None, "--source", help="Only this source."),
    history: bool = typer.Option(
        False, "--history", help="The cursors replaced by state set/reset and full refreshes, newest first."
    ),
    limit: int = typer.Option(20, "--limit", min=1, help="With --history: at most this many changes."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
) -> int:
    """Each source's cursor (where its next read starts), or with --history the values it replaced
    and the command that puts each back.

    Example: capture-sync state show -c capture-sync.toml --source signups --history
    """
    if source is not None:
        cfg.jobs(source)  # an unknown name is a config problem naming the configured ones
    with open_existing(cfg) as ledger:
        changes = ledger.state_history(source, limit) if history else []
        states = {s.source: s for s in ledger.source_states()}
    if history:
        if as_json:
            emit_json({"history": [{**asdict(c), "undo": undo_command(cfg, c.source, c.old)} for c in changes]})
            return 0
        t = table("State history (newest first)", "#", "changed (UTC)", "source", "by", "run", "old value", "new value")
        for c in changes:
            t.add_row(
                str(c.id),
                c.changed_at or "",
                c.source,
                c.action,
                "" if c.run_id is None else str(c.run_id),
                _dump(c.old),
                _dump(c.new),
            )
        out.print(t)
        for c in changes:
            out.print(
                f"put #{c.id}'s old value back: {undo_command(cfg, c.source, c.old)}", markup=False, soft_wrap=True
            )
        return 0
    names = [source] if source else [s.name for s in cfg.sources] + sorted(set(states) - {s.name for s in cfg.sources})
    configured = {s.name for s in cfg.sources}
    rows: list[dict[str, Any]] = [
        {
            "source": n,
            "state": states[n].state if n in states else None,
            "updated_at": states[n].updated_at if n in states else None,
            "configured": n in configured,
        }
        for n in names
    ]
    if as_json:
        emit_json({"states": rows})
        return 0
    t = table("Source states", "source", "updated (UTC)", "state")
    for row in rows:
        t.add_row(
            row["source"] + ("" if row["configured"] else " (not in the config)"),
            row["updated_at"] or "",
            _dump(row["state"]),
        )
    out.print(t)
    return 0


@app.command("set")
@command()
def set_(
    cfg: Config,
    value: str = typer.Argument(..., help="The new state as JSON (quote it for the shell); null removes it."),
    source: str = _SOURCE,
) -> int:
    """Set a source's cursor; the old one is kept in the ledger and the command to put it back is printed.

    Refused while a daemon (or a sync) drives the ledger. The built-in sources' states are JSON
    objects: csv and jsonl without a cursor {"file", "offset", "line", "tail", "order"}; with a
    cursor {"cursor": VALUE} (the next pass reads from VALUE, included); sql {"cursor": VALUE} or
    {"at": {"cursor", "key"}}; http {"url", "index"}. Start from what `state show` prints.

    Example: capture-sync state set -c capture-sync.toml --source signups '{"cursor": "2026-01-01T00:00:00"}'
    """
    try:
        state = json.loads(value)
    except ValueError as exc:
        fail(f"VALUE is not JSON ({exc}); quote it for the shell, e.g. '{{\"cursor\": 42}}'\n{SHAPES}", ExitCode.USAGE)
    problem = _shape_problem(cfg, source, state)
    if problem:
        fail(f"{problem}\n{SHAPES}", ExitCode.USAGE)
    return _change(cfg, source, state, "set")


@app.command("reset")
@command()
def reset(cfg: Config, source: str = _SOURCE) -> int:
    """Forget a source's cursor: its next read starts from the beginning (unchanged records are not sent
    again: the ledger knows their content). The old cursor is kept and the command to put it back printed.

    Example: capture-sync state reset -c capture-sync.toml --source signups
    """
    return _change(cfg, source, None, "reset")


def _shape_problem(cfg: Config, source: str, state: Any) -> str | None:
    """What the source can tell about a state before reading with it: a built-in source's is an object."""
    (job,) = cfg.jobs(source)
    cls = type(job.source)
    builtin = f"{cls.__module__}:{cls.__qualname__}" in BUILTINS.values()
    if builtin and state is not None and not isinstance(state, dict):
        return f"source {source!r} ({cls.__name__}) keeps a JSON object as its state, not {json.dumps(state)}"
    return None


def _change(cfg: Config, source: str, state: Any, action: str) -> int:
    """One change under the ledger's lock, as a run of its own (kind `state`) so that it is attributable."""
    cfg.jobs(source)
    t0 = time.monotonic()
    with open_existing(cfg, exclusive=True) as ledger:  # a daemon's next pass would commit its own cursor over this one
        run_id = ledger.start_run("state", note=f"state {action} --source {source}")
        code = 1
        try:
            old = ledger.change_source_state(source, state, action)
            code = 0
        finally:
            ledger.finish_run(run_id, {}, time.monotonic() - t0, code, [source])
    out.print(f"{source}: state was {_dump(old)}", markup=False, soft_wrap=True)
    out.print(f"{source}: state is now {_dump(state)}", markup=False, soft_wrap=True)
    out.print(f"undo: {undo_command(cfg, source, old)}", markup=False, soft_wrap=True)
    return 0
