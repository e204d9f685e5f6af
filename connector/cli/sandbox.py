"""`capture-sync sandbox`: run the local Capture API, manage its API clients, and list what it holds.

`serve`'s behaviour options pick the sandbox's answer where the spec is silent (spec 2.6 result
objects, 4.3 invalid persons, 4.4 idempotency keys; see connector/sandbox/behaviour.py); its
fault options inject the failures of spec 7 and per-person refusals (connector/sandbox/faults.py),
and `sandbox faults` (sandbox_faults.py) changes them while it runs, with the same options.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import typer
from rich.markup import escape

from ..sandbox import Behaviour, SandboxStore, UnknownClient
from ..sandbox.admin_access import TOKEN_LINE, TokenFileError, default_token_file, new_token, remove_token, write_token
from ..sandbox.behaviour import (
    BulkResultShape,
    IdempotencyScope,
    InvalidPerson,
    PersonKeyScope,
    RateCounting,
    RateLimitUnit,
)
from ..sandbox.process import LISTENING
from ..sandbox.store import DEFAULT_RATE_LIMIT
from ..secret_files import CredentialFilesExist, config_lines, refuse_existing, write_credentials
from ._common import ExitCode, err, fail, out, table
from .sandbox_faults import faults_app
from .sandbox_options import DEFAULT_PORT, fault_options, fault_settings

app = typer.Typer(help="The local Capture API (sandbox): serve it, manage its clients.", no_args_is_help=True)
app.add_typer(faults_app, name="faults")

DEFAULT_DB = Path("capture-sandbox.sqlite3")
DbOption = typer.Option(DEFAULT_DB, "--db", help="The sandbox's SQLite file (created when missing).")


@contextmanager
def _store(db: Path) -> Iterator[SandboxStore]:
    """The sandbox store; a database that cannot be opened or written is one line and exit 2, as for `serve`."""
    try:
        with SandboxStore(db) as store:
            yield store
    except (sqlite3.Error, OSError) as exc:
        fail(
            f"sandbox database {db} cannot be opened for writing ({exc}): check that its folder exists "
            "and that the file and folder are writable, or pick another file with --db",
            ExitCode.USAGE,
        )


@contextmanager
def _client(db: Path) -> Iterator[SandboxStore]:
    """The store for a command about one client: an unknown API key is a usage error naming it."""
    with _store(db) as store:
        try:
            yield store
        except UnknownClient:
            raise typer.BadParameter("no client has this API key", param_hint="API_KEY") from None


@app.command()
@fault_options
def serve(
    host: str = typer.Option(
        "127.0.0.1",
        help="Interface to listen on; any other than loopback is reachable from other machines (warned).",
    ),
    port: int = typer.Option(DEFAULT_PORT, min=0, max=65535, help="Port; 0 picks a free one."),
    db: Path = DbOption,
    rate_window: float = typer.Option(60.0, "--rate-window", min=0.001, help="Rate-limit window, seconds."),
    rate_limit_unit: RateLimitUnit = typer.Option(
        "requests",
        "--rate-limit-unit",
        help="What a client's rate_limit counts per window (spec 8): requests, or persons (a bulk request of "
        "100 costs 100).",
    ),
    rate_counting: RateCounting = typer.Option(
        "sliding",
        "--rate-counting",
        help="How the window counts (spec 8 does not say): sliding (any --rate-window seconds), fixed (reset at "
        "each multiple of the window), or bucket (a token bucket of rate_limit refilled over the window).",
    ),
    retry_after: Literal["yes", "no"] = typer.Option(
        "yes",
        "--retry-after",
        help="Send Retry-After on a 429 (yes), or no rate-limit header at all (no).",
    ),
    bulk_result_shape: BulkResultShape = typer.Option(
        "echo",
        "--bulk-result-shape",
        help="The objects in successful, duplicates and failed (spec 2.6). echo: 0-based request index, "
        "idempotency_key, email, phone, person_id; nested: {result: {id, action}, input} and {input, errors}; "
        "index1: 1-based index and person_id (or error); array_index: index within its own array, listed in "
        "reverse, upper-cased email; bare: person_id (or error) only.",
    ),
    invalid_person: InvalidPerson = typer.Option(
        "failed",
        "--invalid-person",
        help="A bulk person that fails validation (spec 4.3): listed in `failed` while the others are captured, "
        "or reject-request: the whole request gets a 400 and nothing is captured.",
    ),
    idempotency_scope: IdempotencyScope = typer.Option(
        "operation",
        "--idempotency-scope",
        help="Keys per (client, operation), or shared: POST /person's Idempotency-Key and bulk persons' "
        "idempotency_key are one namespace (a key captured by one is a replay or duplicate in the other; spec 4.4).",
    ),
    person_key_scope: PersonKeyScope = typer.Option(
        "client",
        "--person-key-scope",
        help="How long a bulk person's idempotency_key is remembered (spec 2.2): for the client, or request: "
        "within one request only, so a person re-offered in a later request is captured again (check --flow "
        "fails its per-person key scope step).",
    ),
    admin_token_file: Path | None = typer.Option(
        None,
        "--admin-token-file",
        help="Where to write the admin token that `sandbox faults` needs (mode 0600; removed on a clean stop). "
        "Default: $XDG_RUNTIME_DIR/capture-sync/sandbox-admin-PORT.token, else "
        "/tmp/capture-sync-UID/sandbox-admin-PORT.token.",
    ),
    *,
    faults: dict[str, Any],
) -> None:
    """Serve the sandbox until SIGTERM or Ctrl-C; its first line says where it listens.

    That line is `sandbox Capture API listening on BASE_URL`: BASE_URL is the config's capture.base_url. The clients and persons live in --db, so a restart on the same file keeps them.

    The second line names the file holding a fresh admin token: with it `capture-sync sandbox faults set` changes the faults while the sandbox runs (the fault options here are the ones it starts with).

    A database that cannot be opened for writing, or a port in use, is one line on stderr and exit 2.

    Example: capture-sync sandbox serve --port 8765 --db sandbox.sqlite3

    Example (a token bucket of 120 requests refilled over 10 s): capture-sync sandbox serve --rate-window 10 --rate-counting bucket
    """
    # FastAPI and uvicorn load only for the command that serves.
    from ..sandbox.server import SandboxServer, ServeError

    settings = fault_settings(faults)
    behaviour = Behaviour(
        bulk_result_shape,
        invalid_person,
        idempotency_scope,
        person_key_scope,
        rate_limit_unit,
        retry_after == "yes",
        rate_counting,
    )
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    # Blocked before the server thread exists, so it inherits the mask and this thread takes them.
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    token = new_token()
    try:
        with SandboxServer(
            db,
            host=host,
            port=port,
            faults=settings.faults(),
            rate_window_s=rate_window,
            behaviour=behaviour,
            admin_token=token,
        ) as server:
            token_file = (admin_token_file or default_token_file(server.port)).absolute()
            write_token(token_file, token, private_folder=admin_token_file is None)
            try:
                print(f"{LISTENING} {server.base_url}\n{TOKEN_LINE} {token_file}", flush=True)
                signal.sigwait(stop_signals)
            finally:
                remove_token(token_file, token)
    except (ServeError, TokenFileError) as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)  # after a clean stop a late signal stays pending
        fail(str(exc), ExitCode.USAGE)


@app.command("create-client")
def create_client(
    name: str = typer.Option(..., "--name", help="The client's name (one client per integration)."),
    db: Path = DbOption,
    rate_limit: int = typer.Option(DEFAULT_RATE_LIMIT, "--rate-limit", min=1, help="Requests per rate window."),
    default_lead_source: str | None = typer.Option(None, "--default-lead-source"),
    inactive: bool = typer.Option(False, "--inactive", help="Create it inactive (its requests get 401)."),
    write_credentials_to: Path | None = typer.Option(
        None,
        "--write-credentials",
        metavar="DIR",
        help="Write the key and secret to DIR/api_key and DIR/api_secret (mode 0600, DIR made 0700) and print "
        "the two config lines naming them, instead of printing the secret.",
    ),
    force: bool = typer.Option(False, "--force", help="With --write-credentials: replace existing files."),
) -> None:
    """Create an API client. Only a hash of the secret is kept, so it is shown once.

    Without --write-credentials it prints {"api_key", "api_secret"} as JSON. With it, the files are created readable by their owner only, existing files are refused unless --force (checked before the client is created), and stdout is the two lines to put in the config's capture table: `api_key_file = "..."` and `api_secret_file = "..."`.

    Example: capture-sync sandbox create-client --db sandbox.sqlite3 --name "my integration" --write-credentials credentials
    """
    if write_credentials_to is not None and not force:
        try:  # refuse before a client exists whose secret would be lost
            refuse_existing(write_credentials_to)
        except CredentialFilesExist as exc:
            fail(str(exc), ExitCode.USAGE)
    with _store(db) as store:
        key, secret = store.create_client(
            name, rate_limit=rate_limit, default_lead_source=default_lead_source, active=not inactive
        )
    if write_credentials_to is None:
        typer.echo(json.dumps({"api_key": key, "api_secret": secret}))
        return
    try:
        key_file, secret_file = write_credentials(write_credentials_to, key, secret, force=force)
    except (CredentialFilesExist, OSError) as exc:
        fail(f"client {key} was created but its credentials could not be written: {exc}", ExitCode.USAGE)
    err.print(
        f"client {key} created; wrote {key_file} and {secret_file} (mode 0600). "
        "Put these lines under [capture] in your config:",
        markup=False,
    )
    typer.echo(config_lines(key_file, secret_file))


@app.command("regenerate-secret")
def regenerate_secret(
    api_key: str = typer.Argument(..., help="The client's API key."),
    db: Path = DbOption,
) -> None:
    """Replace the client's secret; the old one stops working at once. Prints the new one once."""
    with _client(db) as store:
        secret = store.regenerate_secret(api_key)
    typer.echo(json.dumps({"api_key": api_key, "api_secret": secret}))


@app.command("set-active")
def set_active(
    api_key: str = typer.Argument(..., help="The client's API key."),
    active: bool = typer.Option(..., "--active/--inactive", help="Accept or refuse the client's requests."),
    db: Path = DbOption,
) -> None:
    """Activate or deactivate a client (an inactive client's requests get 401)."""
    with _client(db) as store:
        store.set_active(api_key, active)
    typer.echo(f"client {api_key} is now {'active' if active else 'inactive'}")


@app.command("set-rate-limit")
def set_rate_limit(
    api_key: str = typer.Argument(..., help="The client's API key."),
    rate_limit: int = typer.Argument(..., min=1, help="The new rate_limit: requests (or persons) per rate window."),
    db: Path = DbOption,
) -> None:
    """Change a client's rate_limit; a sandbox serving this --db applies it from its next request.

    Example: capture-sync sandbox set-rate-limit ck_... 240 --db sandbox.sqlite3
    """
    with _client(db) as store:
        store.set_rate_limit(api_key, rate_limit)
    typer.echo(f"client {api_key} now has rate_limit {rate_limit}")


@app.command("persons")
def persons(
    db: Path = typer.Option(DEFAULT_DB, "--db", help="The sandbox's SQLite file (as given to `sandbox serve`)."),
    as_json: bool = typer.Option(
        False,
        "--json",
        help='One JSON object {"persons": [...]}: each person\'s id, identity, data (its fields now), lead_source, '
        "created_by, created_at, updated_at (Unix seconds), captures (how many) and last_capture (client, "
        "operation, action, at, person_key and the fields it wrote).",
    ),
) -> None:
    """List the persons the sandbox holds, each with its captures: how many, and the last one's fields.

    What a sync delivered, seen from the CRM's side, without opening the sandbox's SQLite file: a person's fields now, and the fields its last capture wrote (the version that landed last). Works beside a running `sandbox serve` on the same --db. A --db that does not exist is one line and exit 2.

    Example: capture-sync sandbox persons --db sandbox.sqlite3
    """
    if not db.is_file():
        fail(f"no sandbox database at {db}: give the --db that `sandbox serve` uses", ExitCode.USAGE)
    with _store(db) as store:
        people, captures = store.persons(), store.captures()
    listed = _with_captures(people, captures)
    if as_json:
        typer.echo(json.dumps({"persons": listed}, default=str))
        return
    t = table(f"{len(listed)} person(s) in {db}", "person", "identity", "captures", "last capture", "its fields")
    for person in listed:
        last = person["last_capture"] or {}
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["at"])) if last else ""
        t.add_row(
            *map(
                escape,
                (  # the fields are data, not rich markup
                    person["id"],
                    person["identity"],
                    str(person["captures"]),
                    f"{last['action']} {when} by {last['client']}" if last else "",
                    json.dumps(last.get("data"), ensure_ascii=False) if last else "",
                ),
            )
        )
    out.print(t)


def _with_captures(people: list[dict[str, Any]], captures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each person with the count of its captures and the last one (captures come in commit order)."""
    count: dict[str, int] = {}
    last: dict[str, dict[str, Any]] = {}
    for capture in captures:
        count[capture["person_id"]] = count.get(capture["person_id"], 0) + 1
        last[capture["person_id"]] = {
            k: capture[k] for k in ("client", "operation", "action", "at", "person_key", "data")
        }
    return [{**p, "captures": count.get(p["id"], 0), "last_capture": last.get(p["id"])} for p in people]
