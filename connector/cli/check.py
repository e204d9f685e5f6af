"""`capture-sync check`: GET /info, the first call any integration should make, then the setup checks
a sync makes before sending (every source readable, every mapped column present)."""

import asyncio

from ..config import Config
from ..delivery import preflight
from ._common import ExitCode, api_client, command, err, out, table


@command()
def check(cfg: Config) -> int:
    """Call GET /info and print the client's settings (never the secret), then check each source.

    Each source is opened as a sync would open it (files present, database reachable) and every
    column its mapping names must be among the source's columns: exit 2 listing every problem if
    not. A ledger or credential file that other users can read gets a warning.

    Example: capture-sync check -c capture-sync.toml
    """

    async def info():
        async with api_client(cfg) as client:
            return await client.info()

    data = asyncio.run(info())
    t = table(f"Capture API client at {cfg.base_url}", "setting", "value")
    t.add_row("client name", data.client_name)
    t.add_row("rate limit", f"{data.rate_limit} requests per window")
    t.add_row("default lead source", data.default_lead_source or "(none)")
    t.add_row("custom field mapping", "yes" if data.has_custom_field_mapping else "no")
    out.print(t)
    found = preflight(cfg.jobs())
    sources = table("Sources", "source", "schedule", "check")
    for source in cfg.sources:
        mapping = [p for p in found.config_problems if p.startswith(f"sources.{source.name}.mapping.")]
        reason = found.unavailable.get(source.name)
        verdict = f"FAILED: {reason}" if reason else f"FAILED: {len(mapping)} mapping problem(s)" if mapping else "ok"
        sources.add_row(source.name, source.schedule, verdict)
    out.print(sources)
    for path, mode in cfg.exposed_files():
        err.print(f"warning: {path} is readable by other users (mode {mode:04o}): chmod 600 {path}", markup=False)
    _errors(f"{len(found.config_problems)} mapped column(s) missing; nothing would be sent", found.config_problems)
    _errors(f"{len(found.unavailable)} source(s) cannot be read", list(found.unavailable.values()))
    return ExitCode.USAGE if found.config_problems or found.unavailable else ExitCode.OK


def _errors(title: str, problems: list[str]) -> None:
    if problems:
        err.print(f"error: {title}:", markup=False)
        for problem in problems:
            err.print(f"  - {problem}", markup=False)
