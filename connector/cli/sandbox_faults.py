"""`capture-sync sandbox faults show|set|clear`: a running sandbox's faults, changed without a restart,
so an outage can be rehearsed against a daemon that keeps running (connector/sandbox/admin.py).

The commands talk to the sandbox's admin endpoint on this machine only, with the token `sandbox
serve` wrote when it started (found from the URL's port, or given with --admin-token-file). Exit
codes as design 5 has them for the API: 2 a usage error (no token file, a URL off this machine,
faults the sandbox refuses), 3 the token refused, 4 the sandbox did not answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

import typer

from ..loopback import is_loopback
from ..sandbox.admin_access import ADMIN_PATH, TokenFileError, default_token_file, read_token
from ..sandbox.fault_settings import FaultSettings
from ._common import ExitCode, fail
from .sandbox_options import DEFAULT_PORT, fault_options

if TYPE_CHECKING:
    import httpx

faults_app = typer.Typer(
    help="A running sandbox's faults: show, set or clear them without a restart, to rehearse an outage.\n\n"
    "The sandbox keeps its clients and persons, and a daemon syncing to it keeps running: it meets the faults "
    "from its next request. Only this machine is answered, with the token `sandbox serve` wrote.\n\n"
    "Example: capture-sync sandbox faults set --url http://127.0.0.1:8765 --p-retryable-503 1",
    no_args_is_help=True,
)

_URL = typer.Option(
    f"http://127.0.0.1:{DEFAULT_PORT}",
    "--url",
    help="The sandbox: the base URL `sandbox serve` printed, or just http://127.0.0.1:PORT (this machine only).",
)
_TOKEN_FILE = typer.Option(
    None,
    "--admin-token-file",
    help="The admin token file `sandbox serve` wrote (its second line names it). Default: the one of the URL's "
    "port, $XDG_RUNTIME_DIR/capture-sync/sandbox-admin-PORT.token, else "
    "/tmp/capture-sync-UID/sandbox-admin-PORT.token.",
)
_JSON = typer.Option(
    False,
    "--json",
    help="Print the faults in force as one JSON object (every fault, by its field name).",
)


class _Sandbox:
    """The admin endpoint of the sandbox at `url`, and the token that opens it."""

    def __init__(self, url: str, token_file: Path | None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            fail(f"--url {url!r} is not a sandbox URL: give it as `sandbox serve` printed it", ExitCode.USAGE)
        if not is_loopback(parts.hostname):
            fail(
                f"--url {url!r} is not on this machine: the admin endpoint answers loopback clients only, so run "
                "this command where the sandbox runs, with its 127.0.0.1 URL",
                ExitCode.USAGE,
            )
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.token_file = token_file or default_token_file(self.port)

    def _token(self) -> str:
        try:
            return read_token(self.token_file)
        except FileNotFoundError:
            fail(
                f"no admin token at {self.token_file}: no sandbox started by this user serves on port {self.port}, "
                f"or it was started with --admin-token-file; start one with `capture-sync sandbox serve --port "
                f"{self.port}`, or pass the file its second line names with --admin-token-file",
                ExitCode.USAGE,
            )
        except TokenFileError as exc:
            fail(str(exc), ExitCode.USAGE)

    def call(self, method: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """The faults in force after the request; any refusal ends the command with its exit code."""
        import httpx  # only for the faults commands, not for every `sandbox` command

        token = self._token()
        try:
            response = httpx.request(
                method,
                self.origin + ADMIN_PATH,
                json=body,
                headers={"Authorization": f"Bearer {token}"},
                timeout=10.0,
                trust_env=False,  # a proxy from the environment must not see the token
            )
        except httpx.HTTPError as exc:
            fail(
                f"the sandbox at {self.origin} did not answer ({type(exc).__name__}): is it running? "
                f"Start it with `capture-sync sandbox serve --port {self.port}`",
                ExitCode.UNSETTLED,
            )
        if response.status_code == 200:
            faults: dict[str, Any] = response.json()["data"]["faults"]
            return faults
        self._refused(response)

    def _refused(self, response: httpx.Response) -> NoReturn:
        try:
            message = str(response.json()["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {response.status_code}"
        if response.status_code == 401:
            fail(
                f"the sandbox at {self.origin} refused the admin token in {self.token_file} ({message}): pass the "
                "file its `sandbox serve` second line names with --admin-token-file",
                ExitCode.AUTH,
            )
        if response.status_code in (400, 403):
            fail(f"the sandbox at {self.origin} refused: {message}", ExitCode.USAGE)
        if response.status_code in (404, 405):
            fail(f"{self.origin} has no sandbox admin endpoint: is it a `capture-sync sandbox serve`?", ExitCode.USAGE)
        fail(f"the sandbox at {self.origin} answered {message}", ExitCode.UNEXPECTED)


def _flags(faults: dict[str, Any]) -> str:
    """The faults that differ from none, as the options that set them (so they can be pasted back)."""
    default = FaultSettings().model_dump()
    words = []
    for name, value in faults.items():
        if value != default.get(name):
            flag = "--" + name.replace("_", "-")
            words.append(flag if value is True else f"{flag} {value}")
    return " ".join(words)


def _print(origin: str, faults: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(faults))
        return
    flags = _flags(faults)
    typer.echo(f"faults of the sandbox at {origin}: {flags}" if flags else f"the sandbox at {origin} injects no faults")


@faults_app.command("show")
def show(url: str = _URL, admin_token_file: Path | None = _TOKEN_FILE, as_json: bool = _JSON) -> None:
    """Print the faults a running sandbox injects now.

    Example: capture-sync sandbox faults show --url http://127.0.0.1:8765
    """
    sandbox = _Sandbox(url, admin_token_file)
    _print(sandbox.origin, sandbox.call("GET"), as_json)


@faults_app.command("set")
@fault_options
def set_faults(
    url: str = _URL, admin_token_file: Path | None = _TOKEN_FILE, as_json: bool = _JSON, *, faults: dict[str, Any]
) -> None:
    """Change a running sandbox's faults: the options given change, the others stay; then print them all.

    The fault options are those of `sandbox serve`. The change applies to the requests that start after it, at once, while the sandbox keeps its clients and persons. Faults the sandbox refuses (a share above 1, the 503 and 429 shares adding up above 1) change nothing: exit 2. A refused admin token is exit 3; a sandbox that does not answer, exit 4.

    Example: capture-sync sandbox faults set --url http://127.0.0.1:8765 --p-fatal-503 1
    """
    if not faults:
        fail(
            "give at least one fault option (`capture-sync sandbox faults set --help` lists them), or clear them all "
            "with `capture-sync sandbox faults clear`",
            ExitCode.USAGE,
        )
    sandbox = _Sandbox(url, admin_token_file)
    _print(sandbox.origin, sandbox.call("PATCH", faults), as_json)


@faults_app.command("clear")
def clear(url: str = _URL, admin_token_file: Path | None = _TOKEN_FILE, as_json: bool = _JSON) -> None:
    """Remove every fault of a running sandbox: it answers normally again, its clients and persons kept.

    Example: capture-sync sandbox faults clear --url http://127.0.0.1:8765
    """
    sandbox = _Sandbox(url, admin_token_file)
    _print(sandbox.origin, sandbox.call("DELETE"), as_json)
