"""The one command table that the control socket, the HTTP control and the CLI all dispatch from,
so the three never drift: each command's arguments, what it does, and the JSON it answers.

A handler runs on the daemon's event loop. `sync` and `replay` are passes like the scheduled ones
(they take the daemon's one-at-a-time pass lock); `pause` and `resume` record the pause in the
ledger and take the lock too, so that when `pause` answers, no pass of what it paused is running.
`state` takes no lock: it answers at once, even while a long pass runs. Every answer holds
`exit_code`: the code the work would have given had the command run by itself (a sync's or
replay's RunReport; 0 for pause, resume and state).

`steer` is what a process serving several integrations calls: `dispatch` on the integration's
daemon when it leads, else the request goes through the shared ledger to the daemon that does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..exit_codes import ExitCode, exit_code_for
from ..problems import ConfigProblem

if TYPE_CHECKING:
    from ..delivery import RunReport

Answer = dict[str, Any]

# Where a standby waits for the leader's answer (up to a whole remote `sync`): threads of its own, so
# that outstanding requests never take the default executor's, which run every ledger claim and settle.
# Two at a time; more wait their turn here.
_ASKS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="capture-sync-ask-leader")


class Steered(Protocol):
    """What the table needs of the daemon (connector.scheduler.Daemon)."""

    paused: dict[str, float]  # source (or "*": all) -> paused since (epoch seconds)

    def state(self) -> Answer: ...
    async def sync_now(self, source: str | None) -> RunReport: ...
    async def replay_now(self, include_failed: bool) -> RunReport: ...
    async def pause(self, source: str | None) -> dict[str, float]: ...
    async def resume(self, source: str | None) -> tuple[list[str], dict[str, float]]: ...
    def leader_elsewhere(self) -> Callable[[str, dict[str, Any]], Answer] | None:
        """None while this daemon leads its integration (or runs it alone); else a blocking call that
        asks the daemon leading it, through the shared ledger, and returns its answer."""
        ...


class DaemonStopping(Exception):
    """The request arrived while the daemon stops: nothing was done (exit 4: run it again later)."""


class BadRequest(Exception):
    """A request the table cannot run (an unknown command, an argument it does not take): exit 2."""


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    args: Mapping[str, type]  # argument name -> its JSON type (str or bool); every argument is optional
    run: Callable[[Steered, dict[str, Any]], Awaitable[Answer]]


def _report(report: RunReport) -> Answer:
    from ..delivery.report import report_dict  # the same JSON `sync --json` prints

    return {"exit_code": int(report.exit_code), "report": report_dict(report)}


async def _state(daemon: Steered, args: dict[str, Any]) -> Answer:
    return {"exit_code": 0, **daemon.state()}


async def _sync(daemon: Steered, args: dict[str, Any]) -> Answer:
    return _report(await daemon.sync_now(args.get("source")))


async def _replay(daemon: Steered, args: dict[str, Any]) -> Answer:
    return _report(await daemon.replay_now(bool(args.get("include_failed", False))))


async def _pause(daemon: Steered, args: dict[str, Any]) -> Answer:
    return {"exit_code": 0, "paused": await daemon.pause(args.get("source"))}


async def _resume(daemon: Steered, args: dict[str, Any]) -> Answer:
    resumed, still = await daemon.resume(args.get("source"))
    return {"exit_code": 0, "resumed": resumed, "paused": still}


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("state", "what is paused, and the daemon's health", {}, _state),
        Command("sync", "one pass now over the sources (or --source NAME), paused or not", {"source": str}, _sync),
        Command(
            "replay",
            "re-send now what the ledger holds unsettled, stalled batches included",
            {"include_failed": bool},
            _replay,
        ),
        Command(
            "pause", "stop reading a source (or every source, and the sweep) on its schedule", {"source": str}, _pause
        ),
        Command("resume", "lift a pause (or every pause) and run what was held at once", {"source": str}, _resume),
    )
}


def check_request(name: str, args: Any) -> Command:
    """The command `name`, once `args` are known to be its own; raises BadRequest saying why not."""
    command = COMMANDS.get(name)
    if command is None:
        raise BadRequest(f"no command {name!r} (known: {', '.join(COMMANDS)})")
    if not isinstance(args, dict):
        raise BadRequest("args must be a JSON object")
    for key, value in args.items():
        kind = command.args.get(key)
        if kind is None:
            raise BadRequest(
                f"{name} takes no argument {key!r}"
                + (f" (it takes: {', '.join(command.args)})" if command.args else "")
            )
        if value is not None and not isinstance(value, kind):
            raise BadRequest(f"{name}: {key} must be a {'string' if kind is str else 'boolean'}")
    return command


async def dispatch(daemon: Steered, name: str, args: Any) -> Answer:
    """Run one request; never raises: a failure is an answer with `error` (one line) and its exit code."""
    try:
        command = check_request(name, args)
        return {"ok": True, "command": name, **await command.run(daemon, args)}
    except BadRequest as exc:
        return {"ok": False, "command": name, "error": str(exc), "exit_code": int(ExitCode.USAGE)}
    except DaemonStopping as exc:
        return {"ok": False, "command": name, "error": str(exc), "exit_code": int(ExitCode.UNSETTLED)}
    except ConfigProblem as exc:
        return {"ok": False, "command": name, "error": "; ".join(exc.problems), "exit_code": int(ExitCode.USAGE)}
    except Exception as exc:  # the pass failed: the operator gets the one line the command would print
        return {
            "ok": False,
            "command": name,
            "error": f"{type(exc).__name__}: {exc}",
            "exit_code": int(exit_code_for(exc)),
        }


async def steer(daemon: Steered, name: str, args: Any) -> Answer:
    """Run one request for `daemon`'s integration wherever it is led: on `daemon` when it leads, else
    (it stands by on a shared PostgreSQL ledger) by the daemon that leads it, through the database,
    as `capture-sync pause` from another host reaches it. Never raises, as `dispatch`."""
    ask = daemon.leader_elsewhere()
    if ask is None:
        return await dispatch(daemon, name, args)
    try:
        check_request(name, args)
    except BadRequest as exc:
        return {"ok": False, "command": name, "error": str(exc), "exit_code": int(ExitCode.USAGE)}
    import asyncio  # here, not at the top: `status` imports this table and never runs a loop

    return await asyncio.get_running_loop().run_in_executor(_ASKS, ask, name, args)
