"""What every command shares: the common options, config loading, the API client, the ledger,
and turning failures into the exit codes of design 5 with a one-line message."""

from __future__ import annotations

import errno
import functools
import inspect
import logging
import os
import re
import shlex
import sys
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeVar, cast

import typer
from rich import box
from rich.table import Table

from .. import logs
from .._run import api_client as api_client  # the commands take these from here
from .._run import open_ledger as open_ledger
from .._run import pass_flow_gate as pass_flow_gate
from ..config_file import DEFAULT_PATH, ENV_CONFIG, load_ledger_place
from ..exit_codes import EXIT_MEANING, exit_code_for
from ..exit_codes import ExitCode as ExitCode  # the commands take it from here
from ..ledger import LedgerError, LedgerLocked
from ..problems import ConfigProblem
from ._output import InertConsole

# What only the commands that talk to the API use is imported where it is used, so that `status`
# and the other ledger-only commands start without the HTTP client, the mapping or the engine.
if TYPE_CHECKING:
    import asyncio

    from ..delivery import RunReport

T = TypeVar("T")

# On a pipe rich would wrap tables at 80 columns; a log file or `| less` reads better unwrapped.
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200
out = InertConsole(highlight=False, width=_WIDTH)
err = InertConsole(stderr=True, highlight=False, soft_wrap=True)


_CONFIG_OPTION = typer.Option(DEFAULT_PATH, "-c", "--config", envvar=ENV_CONFIG, help="The config file.")
_CONFIGS_OPTION = typer.Option(
    [],
    "-c",
    "--config",
    envvar=ENV_CONFIG,
    show_default=str(DEFAULT_PATH),
    help="A config file: one integration. Repeat it to run several integrations in one process.",
)
_CONFIGS_DIR_OPTION = typer.Option(
    None,
    "--configs",
    metavar="DIR",
    help="Every *.toml in DIR (in name order) as one more -c each; combines with -c.",
)
_VERBOSE_OPTION = typer.Option(False, "-v", "--verbose", help="DEBUG logs, and a traceback on unexpected errors.")
_verbose = False


def fail(message: str, code: ExitCode) -> NoReturn:
    err.print(f"error: {logs.mask_secrets(message)}", markup=False)
    raise typer.Exit(int(code))


def command(
    *,
    config: bool = True,
    ledger_only: bool = False,
    log_level: str = "INFO",
    many: bool = False,
) -> Callable[[Callable[..., int | None]], Callable[..., None]]:
    """Adds --log-level, -v (and -c/--config, passed as `cfg: Config`) to a command, and maps its
    failures to exit codes. The command returns its exit code (None means 0). `ledger_only`: the
    command reads or repairs the ledger and nothing else, so `cfg` is the file's [ledger] table
    alone (a LedgerPlace): no source, mapping or credential is loaded or checked. `many`: -c may be
    repeated, and --configs DIR adds every *.toml in DIR (`run`): `cfg` is the first config, `more`
    (a keyword the command takes) the others."""
    level_option = typer.Option(log_level, "--log-level", help="DEBUG, INFO, WARNING or ERROR.")

    def decorate(fn: Callable[..., int | None]) -> Callable[..., None]:
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.name not in ("cfg", "more")]
        extra = [
            inspect.Parameter("log_level", inspect.Parameter.KEYWORD_ONLY, default=level_option, annotation=str),
            inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=_VERBOSE_OPTION, annotation=bool),
        ]
        if config and many:
            extra.insert(
                0,
                inspect.Parameter(
                    "configs_dir",
                    inspect.Parameter.KEYWORD_ONLY,
                    default=_CONFIGS_DIR_OPTION,
                    annotation=Path | None,
                ),
            )
        if config:
            extra.insert(
                0,
                inspect.Parameter(
                    "config_path",
                    inspect.Parameter.KEYWORD_ONLY,
                    default=_CONFIGS_OPTION if many else _CONFIG_OPTION,
                    annotation=list[Path] if many else Path,
                ),
            )

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> None:
            level, verbose = kwargs.pop("log_level"), kwargs.pop("verbose") or _verbose_before_command()
            path = kwargs.pop("config_path", None)
            folder = kwargs.pop("configs_dir", None)
            _configure_logging(level, verbose)
            with _exit_codes():
                if not config:
                    code = fn(**kwargs)
                elif ledger_only:
                    code = fn(cfg=load_ledger_place(path), **kwargs)
                else:
                    from ..config import load_config

                    paths = _config_paths(path, folder) if many else [path]
                    loaded = [load_config(p) for p in paths]
                    cfg = loaded[0]
                    try:
                        code = fn(cfg=cfg, **kwargs, **({"more": loaded[1:]} if many else {}))
                    finally:
                        for each in loaded:
                            each.close_sources()
            raise typer.Exit(int(code or 0))

        wrapper.__signature__ = sig.replace(parameters=own + extra)  # type: ignore[attr-defined]
        # typer resolves the annotations it sees; `cfg` is not a parameter of the command line, and its
        # type may be imported for type checking only (a ledger-only module does not load the full config)
        wrapper.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k not in ("cfg", "more")}
        return wrapper

    return decorate


def _config_paths(given: list[Path], folder: Path | None) -> list[Path]:
    """The -c files, then every *.toml in --configs DIR by name; the default file when neither is given.
    A folder that holds no config is an error rather than a daemon that runs nothing."""
    if folder is None:
        return given or [DEFAULT_PATH]
    if not folder.is_dir():
        raise ConfigProblem([f"--configs {folder}: not a folder: give the folder that holds the config files"])
    found = sorted(folder.glob("*.toml"))
    if not found:
        raise ConfigProblem([f"--configs {folder}: no *.toml file in it: put one config file per integration there"])
    return [*given, *found]


def _verbose_before_command() -> bool:
    """Whether -v was given before the command (`capture-sync -v sync`), to the root group."""
    from typer._click.globals import get_current_context  # typer's vendored click, as connector.cli uses

    ctx = get_current_context(silent=True)
    return ctx is not None and bool(ctx.find_root().params.get("verbose"))


class _CurrentStderr:
    """Whatever sys.stderr is at the moment of writing: while a progress bar is live, rich redirects
    sys.stderr so that log lines print above the bar instead of through it."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def _configure_logging(level: str, verbose: bool) -> None:
    global _verbose
    _verbose = verbose
    try:
        logs.configure("DEBUG" if verbose else level, stream=cast(TextIO, _CurrentStderr()))
    except ValueError:
        fail(f"--log-level {level!r}: use DEBUG, INFO, WARNING or ERROR", ExitCode.USAGE)
    if not verbose:  # one line per HTTP request says nothing the batch events do not
        logging.getLogger("httpx").setLevel(logging.WARNING)


@contextmanager
def _exit_codes() -> Iterator[None]:
    """One line per failure (every problem of a config), with the code of `exit_code_for`: the same
    code the run record holds."""
    try:
        yield
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except ConfigProblem as exc:
        err.print(f"error: the configuration has {len(exc.problems)} problem(s):", markup=False)
        for problem in exc.problems:
            err.print(f"  - {logs.mask_secrets(problem)}", markup=False)
        raise typer.Exit(int(exit_code_for(exc))) from None
    except Exception as exc:
        fail(_one_line(exc), exit_code_for(exc))


def _one_line(exc: Exception) -> str:
    from ..api import CaptureError, Unauthorized  # only once something failed (see the imports above)
    from ..source import SourceError

    if isinstance(exc, LedgerLocked):
        return f"{exc}: {_beside_daemon()}"
    if isinstance(exc, LedgerError):
        return f"ledger: {exc}"
    if isinstance(exc, Unauthorized):
        return f"{exc}: {EXIT_MEANING[ExitCode.AUTH]}"
    if isinstance(exc, CaptureError):
        return f"the Capture API did not answer: {exc}"
    if isinstance(exc, SourceError):
        return f"source: {exc}"
    if _verbose:
        err.print(logs.mask_secrets(traceback.format_exc()), markup=False)
    return f"{type(exc).__name__}: {exc}" + ("" if _verbose else " (run with -v for details)")


def _beside_daemon() -> str:
    """Why a command that needs the ledger to itself is refused while a daemon (or a sync) holds it."""
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    name = f"`{ctx.command_path}`" if ctx is not None else "this command"
    return (
        f"{name} does not run beside it (one process at a time may change a ledger); stop the daemon (SIGTERM: "
        "it finishes what is in hand), run this, then start it again. sync, replay, pause and resume reach a "
        "running daemon instead"
    )


def open_output(path: Path) -> TextIO:
    """An `--output FILE`, 0600 like the ledger (a preview or a report lists people even masked), an
    existing file included; a symlink is refused, not followed (a link planted in a shared folder
    would redirect the report); a file that cannot be written is one line and exit 2."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        reason = "a symbolic link, not followed" if exc.errno == errno.ELOOP else exc.strerror
        fail(f"--output {path}: {reason}", ExitCode.USAGE)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode applies to a new file only
    except OSError as exc:  # another user's file we may write but not chmod
        os.close(fd)
        fail(f"--output {path}: cannot make it private (0600): {exc.strerror}", ExitCode.USAGE)
    return os.fdopen(fd, "w", encoding="utf-8", newline="")


def run_until_signal(start: Callable[[asyncio.Event], Awaitable[T]]) -> T:
    """Run an engine coroutine; SIGTERM/SIGINT ask it to finish what is in hand and return."""

    import asyncio

    from ..signals import stop_on_signals

    async def main() -> T:
        stop = asyncio.Event()
        with stop_on_signals(stop):
            return await start(stop)

    return asyncio.run(main())


def table(title: str | None, *columns: str, numeric: tuple[str, ...] = ()) -> Table:
    """A rich table; on a pipe it prints as plain aligned text without colours."""
    t = Table(
        title=title,
        title_justify="left",
        min_width=len(title or ""),
        box=box.SIMPLE if out.is_terminal else None,
        pad_edge=False,
    )
    for name in columns:
        t.add_column(name, justify="right" if name in numeric else "left")
    return t


_DETAIL = re.compile(r"^(.*? is not a valid [\w ]+?): .*?((?: \(from [^)]*\))?)$")


def top_reasons(report: RunReport, n: int = 5) -> list[tuple[str, int]]:
    """The most common rejection reasons, with the validator's detail dropped so that alike ones add up."""
    grouped: Counter[str] = Counter()
    for reason, count in report.rejection_reasons.items():
        grouped[_DETAIL.sub(r"\1\2", reason)] += count
    return grouped.most_common(n)


def print_reasons(report: RunReport) -> None:
    reasons = top_reasons(report)
    if reasons:
        out.print("top rejection reasons:")
        for reason, count in reasons:
            out.print(f"  {count:>5}  {reason}", markup=False)


def print_report(report: RunReport, title: str, config: Path | None = None) -> None:
    """The counts of one sync or replay, then what it set aside and what its exit code means."""
    t = table(title, "", "count", numeric=("count",))
    for name, value in report.counts().items():
        t.add_row(name, str(value))
    t.add_row("unsettled", str(report.unsettled))
    out.print(t)
    print_reasons(report)
    print_outcome(report, config)


def print_outcome(report: RunReport, config: Path | None = None) -> None:
    """What a person should know after a run: rejected records and where to read them, sources not
    read or cut short, an early end, and the exit code's meaning. `config` goes into the commands shown."""
    from ..delivery import exit_meaning  # a report exists: the engine is loaded

    code = report.exit_code
    if report.rejected and report.kind != "dry_run":
        where = f" -c {shlex.quote(str(config))}" if config is not None else ""
        out.print(
            f"{report.rejected} record(s) rejected, never sent: capture-sync ledger list{where} --state rejected",
            markup=False,
        )
    for reason in report.unavailable.values():
        err.print(f"not read: {logs.mask_secrets(reason)}", markup=False)
    for failure in report.source_failures.values():
        err.print(f"source failed: {logs.mask_secrets(failure)}", markup=False)
    if report.halted_by:
        out.print(f"delivery stopped early: {logs.mask_secrets(report.halted_by)}", markup=False)
    if report.stopped and code is not ExitCode.UNSETTLED:
        out.print(f"stopped; run {report.kind} again to continue", markup=False)
    meaning = exit_meaning(report)
    if meaning is not None:
        err.print(f"exit {int(code)}: {meaning}", markup=False)
