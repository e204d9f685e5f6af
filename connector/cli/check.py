"""`capture-sync check`: GET /info, the first call any integration should make."""

import asyncio

from ..config import Config
from ._common import api_client, command, out, table


@command()
def check(cfg: Config) -> int:
    """Call GET /info and print the client's settings (never the secret).

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
    return 0
