"""Where a running sandbox's admin endpoint is, and the token that opens it: `sandbox serve` writes
a fresh random token when it starts and removes it when it stops cleanly; `sandbox faults` reads it.

The token lives in a file only its owner can read (0600), by default in a folder only its owner can
open (0700): `$XDG_RUNTIME_DIR/capture-sync/`, else `/tmp/capture-sync-<uid>/`, named after the
port, so the faults command finds the token from the sandbox's URL alone. Standard library only:
the command line imports it without loading the server.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

ADMIN_PATH = "/admin/faults"  # beside the Capture API's /api/v1/capture, not part of it
TOKEN_LINE = "sandbox admin token in"  # `sandbox serve`'s second line: TOKEN_LINE + " " + the file


class TokenFileError(Exception):
    """The token file cannot be written or read; the message is one line for the user."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def default_token_file(port: int) -> Path:
    """The token file of the sandbox on `port` of this machine, for this user."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    folder = Path(runtime, "capture-sync") if os.path.isabs(runtime) else Path(f"/tmp/capture-sync-{os.getuid()}")
    return folder / f"sandbox-admin-{port}.token"


def token_file_of(line: str) -> Path | None:
    """The file named by `sandbox serve`'s token line, or None when the line is not that line."""
    head, _, path = line.strip().partition(TOKEN_LINE + " ")
    return Path(path) if not head and path else None


def _private_folder(folder: Path) -> None:
    """Make `folder` (0700) or accept it only when it is a real folder of this user; one that another
    user made first (a shared /tmp) could let them replace the token with one they know."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise TokenFileError(f"{folder} is not a folder of this user: remove it, or pass --admin-token-file PATH")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(folder, 0o700)
    except OSError as exc:
        raise TokenFileError(f"cannot make the folder {folder} for the admin token: {exc.strerror or exc}") from None


def write_token(path: Path, token: str, *, private_folder: bool) -> None:
    """Write `token` to `path` (0600). It is written beside it under a name no one else could have
    made (O_EXCL, O_NOFOLLOW) and renamed over it: a file left by a sandbox killed on this port is
    replaced whole, and a link planted at `path` is replaced, never followed."""
    if private_folder:
        _private_folder(path.parent)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a umask cannot leave the owner unable to read it
            os.write(fd, f"{token}\n".encode("ascii"))
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise TokenFileError(
            f"cannot write the admin token to {path}: {exc.strerror or exc}; pass --admin-token-file PATH"
        ) from None


def read_token(path: Path) -> str:
    """The token in `path`. Raises FileNotFoundError when there is none, TokenFileError when it
    cannot be read or is empty."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise TokenFileError(f"cannot read the admin token in {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, encoding="ascii", errors="replace") as fh:
        token = fh.read(4096).strip()
    if not token:
        raise TokenFileError(f"the admin token file {path} is empty")
    return token


def remove_token(path: Path, token: str) -> None:
    """Remove `path` if it still holds `token` (another sandbox given the same file keeps its own)."""
    with contextlib.suppress(OSError, TokenFileError):
        if read_token(path) == token:
            path.unlink()
