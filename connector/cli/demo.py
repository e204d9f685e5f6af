"""`capture-sync demo`: the whole job against the embedded sandbox, in one command.

Everything lives in one folder (sandbox database, ledger, config, credential files), so a second
run sees the first one's state and shows that nothing is captured twice.
"""

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .. import delivery
from ..config import ENV_API_KEY, ENV_API_SECRET, ENV_BASE_URL, load_config
from ..progress import progress_for
from ..secret_files import credential_paths, write_credentials
from ._common import (
    ExitCode,
    api_client,
    command,
    fail,
    open_ledger,
    out,
    print_outcome,
    print_reasons,
    run_until_signal,
    table,
)
from .status import print_status

if TYPE_CHECKING:
    from ..sandbox import SandboxStore

# Package data (pyproject.toml), so the demo runs from an installed wheel and in the container image too.
SAMPLE = Path(__file__).with_name("sample-contacts.csv")
CLIENT_NAME = "capture-sync demo"

_CONFIG = """\
# Written by `capture-sync demo`. The sandbox listens on a new free port each run.
# The credentials are in the two files beside this one, never in this file.
[capture]
base_url = {base_url}
api_key_file = "api_key"
api_secret_file = "api_secret"
batch_size = 100

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "sample"
type = "csv"
schedule = "every 5m"
path = {csv}
primary_key = "id"

[sources.mapping]
first_name = "First"
last_name = "Last"
email = {{ field = "Email", transform = "lower" }}
phone = "Phone"
company = "Company"
job_title = "Title"
custom_fields.plan = "Plan"
custom_fields.signed_up = "Signed Up"
"""


def _credentials(store: "SandboxStore", folder: Path) -> None:
    """Reuse the demo client of an earlier run when its files still authenticate, else make one."""
    key_file, secret_file = credential_paths(folder)
    if (
        key_file.exists()
        and secret_file.exists()
        and store.authenticate(key_file.read_text().strip(), secret_file.read_text().strip()) is not None
    ):
        return
    key, secret = store.create_client(CLIENT_NAME)
    write_credentials(folder, key, secret, force=True)  # 0600 from the start; stale files replaced


@command(config=False, log_level="WARNING")  # the summary is the point; --log-level INFO shows each batch
def demo(
    folder: Path = typer.Option(Path("capture-sync-demo"), "--dir", help="Working folder for the demo's files."),
    csv: Path = typer.Option(SAMPLE, "--csv", help="The contacts to sync."),
) -> int:
    """Start the sandbox Capture API, sync the sample contacts into it, print a summary and the status.

    Run it twice: the second run captures nothing new, because the ledger remembers.

    Example: capture-sync demo --dir /tmp/capture-sync-demo
    """
    if not csv.is_file():
        fail(f"--csv {csv}: no such file", ExitCode.USAGE)
    for var in (ENV_BASE_URL, ENV_API_KEY, ENV_API_SECRET):  # the demo never sends real credentials anywhere
        os.environ.pop(var, None)
    from ..sandbox import SandboxServer  # only the demo needs the server (FastAPI, uvicorn)

    folder.mkdir(parents=True, exist_ok=True)
    with SandboxServer(folder / "sandbox.sqlite3") as server:
        _credentials(server.store, folder)
        config_path = folder / "capture-sync.toml"
        config_path.write_text(_CONFIG.format(base_url=json.dumps(server.base_url), csv=json.dumps(str(csv.resolve()))))
        cfg = load_config(config_path)
        out.print(f"sandbox Capture API at {server.base_url}; config {config_path}", markup=False)

        async def go(stop):
            async with api_client(cfg) as client:
                with progress_for(out) as progress:
                    return await delivery.sync(
                        ledger, client, cfg.jobs(), cfg.delivery_settings(), progress=progress, stop=stop
                    )

        with open_ledger(cfg, exclusive=True) as ledger:
            report = run_until_signal(go)
            _summary(report, csv)
            print_outcome(report, config_path)
            out.print()
            print_status(ledger, config_path)
    return report.exit_code


def _summary(report: delivery.RunReport, csv: Path) -> None:
    """What this run did, in the ledger's words (the states `status` counts, design 3): the counts
    come from the run's report, never from the sandbox, so they are what a real CRM run would show."""
    if report.read == 0 and report.sent == 0:
        out.print(
            f"Nothing new to capture: every contact in {csv.name} was delivered by an earlier run "
            "(the ledger remembers each one; nothing was sent twice).",
            markup=False,
        )
        return
    t = table(f"Demo summary: {report.read} contacts read from {csv.name}", "state", "count", "", numeric=("count",))
    for state, count, meaning in (
        (
            "captured",
            report.captured,
            "listed in the API's `successful`: a person created, or merged into one the CRM already had",
        ),
        (
            "duplicate",
            report.duplicate,
            "listed in the API's `duplicates`: the CRM reported an existing person; never sent again",
        ),
        ("rejected", report.rejected, "failed local validation; never sent"),
        ("failed", report.failed, "refused by the API"),
        ("blocked", report.blocked, "the API answered 409; see `capture-sync status`"),
        ("unknown", report.unknown, "the answer could not be placed on them; asked again alone"),
        ("unsettled", report.unsettled, "still to be sent: run `capture-sync replay`"),
        ("unchanged", report.unchanged, "delivered by an earlier run; not sent again"),
    ):
        if count or state in ("captured", "duplicate", "rejected", "failed"):
            t.add_row(state, str(count), meaning)
    out.print(t)
    print_reasons(report)
