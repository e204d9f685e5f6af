"""`capture-sync check`: GET /info, the first call any integration should make, then the setup checks
a sync makes before sending (every source readable, every mapped column present). `--flow` runs the
spec's synthetic test flow instead (connector/flow) and records a pass in the ledger."""

from __future__ import annotations

import asyncio
import json
import sys

import typer

from ..config import Config
from ..delivery import Preflight, preflight
from ..flow import TITLES, FlowReport, Recorder, run_flow
from ._common import ExitCode, api_client, command, err, fail, open_ledger, out, table
from ._output import emit_json

_FLOW_HELP = (
    "Run the spec's synthetic test flow instead: sends a few synthetic test persons (first name "
    "'capture-sync flow', addresses at example.com), so it asks first on a terminal and needs --yes otherwise."
)


@command()
def check(
    cfg: Config,
    flow: bool = typer.Option(False, "--flow", help=_FLOW_HELP),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --flow: send the test persons without asking."),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON object for machines (the client's settings and each source's check, "
        "or with --flow every step), and nothing else on stdout.",
    ),
) -> int:
    """Call GET /info and print the client's settings (never the secret), then check each source.

    Each source is opened as a sync would open it (files present, database reachable) and every
    column its mapping names must be among the source's columns: exit 2 listing every problem if
    not. A ledger or credential file that other users can read gets a warning. Where the key and the
    secret were read from (env or which file) is printed; their values never are.

    --flow runs the spec's synthetic test flow against the configured base URL and credentials (a
    disposable test client): GET /info; POST /person and the same request again (a replay);
    POST /persons/bulk with one invalid person, and again; how the invalid person is reported; what
    places each result object; whether a per-person key is remembered in a later request; every
    envelope. It creates a few test persons: it asks on a terminal, and needs --yes otherwise (exit 2
    without). A pass is recorded in the ledger for this base URL and client name (sync and run warn
    until one is, or refuse with capture.require_flow). Exit 0 when every step passed, 3 when the
    credentials are refused, 7 when a step failed on what the server answered, 4 when it did not answer.

    Example: capture-sync check -c capture-sync.toml

    Example: capture-sync check -c capture-sync.toml --flow --yes
    """
    if flow:
        return _flow(cfg, yes, as_json)
    if yes:
        fail("--yes goes with --flow", ExitCode.USAGE)

    async def info():
        async with api_client(cfg) as client:
            return await client.info()

    data = asyncio.run(info())
    found = preflight(cfg.jobs())
    verdicts = {source.name: _verdict(source.name, found) for source in cfg.sources}
    code = ExitCode.USAGE if found.config_problems or found.unavailable else ExitCode.OK
    exposed = cfg.exposed_files()
    if as_json:
        assert cfg.credentials is not None  # api_client needed them
        emit_json(
            {
                "base_url": cfg.base_url,
                "client": data.model_dump(),
                "credentials": {"key_from": cfg.credentials.key_from, "secret_from": cfg.credentials.secret_from},
                "sources": [{"name": s.name, "schedule": s.schedule, "check": verdicts[s.name]} for s in cfg.sources],
                "config_problems": found.config_problems,
                "unavailable": found.unavailable,
                "readable_by_others": [{"path": str(path), "mode": f"{mode:04o}"} for path, mode in exposed],
                "exit_code": int(code),
            }
        )
        return code
    t = table(f"Capture API client at {cfg.base_url}", "setting", "value")
    t.add_row("client name", data.client_name)
    t.add_row("rate limit", f"{data.rate_limit} requests per window")
    t.add_row("default lead source", data.default_lead_source or "(none)")
    t.add_row("custom field mapping", "yes" if data.has_custom_field_mapping else "no")
    out.print(t)
    _credentials_line(cfg)
    sources = table("Sources", "source", "schedule", "check")
    for source in cfg.sources:
        sources.add_row(source.name, source.schedule, verdicts[source.name])
    out.print(sources)
    for path, mode in exposed:
        err.print(f"warning: {path} is readable by other users (mode {mode:04o}): chmod 600 {path}", markup=False)
    _errors(f"{len(found.config_problems)} mapped column(s) missing; nothing would be sent", found.config_problems)
    _errors(f"{len(found.unavailable)} source(s) cannot be read", list(found.unavailable.values()))
    return code


def _verdict(name: str, found: Preflight) -> str:
    mapping = [p for p in found.config_problems if p.startswith(f"sources.{name}.mapping.")]
    reason = found.unavailable.get(name)
    return f"FAILED: {reason}" if reason else f"FAILED: {len(mapping)} mapping problem(s)" if mapping else "ok"


def _credentials_line(cfg: Config) -> None:
    if cfg.credentials is not None:
        out.print(f"credentials: {cfg.credentials.origins()} (values never shown)", markup=False)


def _flow(cfg: Config, yes: bool, as_json: bool) -> int:
    base_url, creds = cfg.api()
    if not yes:
        if not sys.stdin.isatty():
            fail(
                "check --flow sends synthetic test persons: confirm with --yes (no terminal to ask on); nothing was sent",
                ExitCode.USAGE,
            )
        if not typer.confirm(
            f"Send a few synthetic test persons to {base_url} ({creds.origins()})? Use a disposable test client.",
            err=True,
        ):
            fail("not confirmed; nothing was sent", ExitCode.USAGE)
    with open_ledger(cfg) as ledger:
        recorder = Recorder()

        async def flow() -> FlowReport:
            async with api_client(cfg, transport=recorder) as client:
                return await run_flow(client, recorder)

        report = asyncio.run(flow())
        recorded = report.passed and report.client_name is not None
        if recorded:
            assert report.client_name is not None
            ledger.record_flow_pass(base_url, report.client_name, report.summary())
    code = report.exit_code
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "base_url": base_url,
                    "client_name": report.client_name,
                    "credentials": {"key_from": creds.key_from, "secret_from": creds.secret_from},
                    "passed": report.passed,
                    "exit_code": int(code),
                    "recorded": recorded,
                    "steps": [s.as_dict() for s in report.steps],
                }
            )
        )
        return code
    out.print(f"Synthetic test flow against {base_url}", markup=False)
    _credentials_line(cfg)
    for n, step in enumerate(report.steps, 1):
        verdict = "PASS" if step.passed else "FAIL" if step.ran else "SKIP"
        out.print(
            f"{verdict}  {n}. {step.name}: {TITLES[step.name]}\n        {step.seen}", markup=False, soft_wrap=True
        )
        for line in step.details:
            out.print(f"          - {line}", markup=False, soft_wrap=True)
    if recorded:
        out.print(f"every step passed; recorded in {cfg.ledger_name} for client {report.client_name!r}", markup=False)
    else:
        failed = ", ".join(s.name for s in report.steps if not s.passed and s.ran)
        err.print(f"exit {int(code)}: the flow failed at {failed}; nothing was recorded", markup=False)
    return code


def _errors(title: str, problems: list[str]) -> None:
    if problems:
        err.print(f"error: {title}:", markup=False)
        for problem in problems:
            err.print(f"  - {problem}", markup=False)
