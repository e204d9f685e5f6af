"""`capture-sync sandbox serve` as a child process: for tests and benchmarks that need to kill and
restart the server (same port, same database) or keep it off their own interpreter."""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .admin_access import ADMIN_PATH, read_token, token_file_of

# `sandbox serve`'s first line is LISTENING + " " + the base URL, the line's last word; its second
# names the admin token file (admin_access.TOKEN_LINE).
LISTENING = "sandbox Capture API listening on"


def base_url_of(line: str) -> str | None:
    """The base URL in `sandbox serve`'s first line, or None when the line is not that line."""
    head, _, url = line.strip().rpartition(" ")
    return url if head == LISTENING and url.startswith(("http://", "https://")) else None


def _capture_sync_command() -> list[str]:
    script = Path(sys.executable).with_name("capture-sync")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from connector.cli import main; main()"]


@dataclass
class SandboxProcess:
    """A running `capture-sync sandbox serve`; its stderr goes to `log`. `admin_token_file` holds the
    token of its admin endpoint (`sandbox faults --admin-token-file`)."""

    proc: subprocess.Popen[str]
    base_url: str
    db: Path
    port: int
    log: Path
    admin_token_file: Path
    exit_code: int | None = None

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int:
        """Send `sig` (SIGTERM: a clean stop, exit code 0) and wait for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.exit_code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exit_code = self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.exit_code

    @property
    def origin(self) -> str:
        """http://HOST:PORT, where the admin endpoint is (the base URL less the API's path)."""
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc}"

    def kill(self) -> int:
        """SIGKILL: the server dies wherever it is, as in a crash."""
        return self.stop(signal.SIGKILL)

    def set_faults(self, **changes: Any) -> dict[str, Any]:
        """Change the running sandbox's faults (those named; fields of FaultSettings, as
        `sandbox faults set`); returns every fault now in force."""
        return self._admin("PATCH", changes)

    def clear_faults(self) -> dict[str, Any]:
        return self._admin("DELETE")

    def _admin(self, method: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import httpx  # for the callers that change faults only

        token = read_token(self.admin_token_file)
        answer = httpx.request(
            method, self.origin + ADMIN_PATH, json=body, headers={"Authorization": f"Bearer {token}"}, trust_env=False
        )
        answer.raise_for_status()
        faults: dict[str, Any] = answer.json()["data"]["faults"]
        return faults


def spawn_sandbox(db: Path, log: Path, port: int = 0, timeout_s: float = 30.0, **flags: Any) -> SandboxProcess:
    """Run `capture-sync sandbox serve --db DB --port PORT --flag value...`; returns once it serves.

    `flags` become options: p_commit_drop=0.2 -> `--p-commit-drop 0.2`, True a bare flag; None values are left out.
    """
    args = [*_capture_sync_command(), "sandbox", "serve", "--db", str(db), "--port", str(port)]
    for name, value in flags.items():
        if value is True:  # a flag of its own: refuse_credentials=True -> `--refuse-credentials`
            args.append(f"--{name.replace('_', '-')}")
        elif value is not None:
            args += [f"--{name.replace('_', '-')}", str(value)]
    with log.open("a") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout_s)
    line = proc.stdout.readline().strip() if ready else ""
    base_url = base_url_of(line)
    # The token line comes in the same flush as the first line, so it is there when that one is.
    token_file = token_file_of(proc.stdout.readline()) if base_url is not None else None
    if base_url is None or token_file is None:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"sandbox serve did not start (first line {line!r}); its log {log}:\n{log.read_text()}")
    port_used = int(base_url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    return SandboxProcess(proc, base_url, db, port_used, log, token_file)
