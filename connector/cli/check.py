"""`capture-sync check`: GET /info, the first call any integration should make, then each source's own check."""

import asyncio

from ..config import Config
from ..source import SourceError
from ._common import ExitCode, api_client, command, err, out, table


@command()
def check(cfg: Config) -> int:
    """Call GET /info and print the client's settings (never the secret), then check each source.

    Each source is checked as it would be read (files present, database reachable): exit 2 if not.

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
    sources = table("Sources", "source", "schedule", "check")
    failed = 0
    for source in cfg.sources:
        try:
            source.job.source.check()
            verdict = "ok"
        except SourceError as exc:
            failed += 1
            verdict = f"FAILED: {exc}"
        sources.add_row(source.name, source.schedule, verdict)
    out.print(sources)
    if failed:
        err.print(f"error: {failed} source(s) cannot be read; see the table above", markup=False)
        return ExitCode.USAGE
    return ExitCode.OK
