"""Writing an API key and secret to two files of mode 0600, for `sandbox create-client
--write-credentials` and `demo`, and creating the ledger's and the sandbox's database files 0600.
A leaf module (standard library only), so all of them can import it.

Each file is created with mode 0600 by `os.open` itself (the umask can only take bits away), so
there is no moment at which another user could read it; a replaced file is written beside the old
one under a temporary name, also 0600, and renamed over it, so a daemon re-reading the files sees
the old pair or the new one, never a half-written file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

KEY_FILE, SECRET_FILE = "api_key", "api_secret"


class CredentialFilesExist(Exception):
    """The files are there already and replacing them was not asked for; the message names them."""


def credential_paths(folder: Path) -> tuple[Path, Path]:
    return folder / KEY_FILE, folder / SECRET_FILE


def refuse_existing(folder: Path) -> None:
    """Raise CredentialFilesExist when either file is there (a dangling link counts)."""
    taken = [str(p) for p in credential_paths(folder) if p.exists() or p.is_symlink()]
    if taken:
        raise CredentialFilesExist(
            f"{' and '.join(taken)} already exist{'s' if len(taken) == 1 else ''}: "
            "pass --force to replace them, or pick another folder"
        )


def write_credentials(folder: Path, api_key: str, api_secret: str, *, force: bool = False) -> tuple[Path, Path]:
    """Write `folder/api_key` and `folder/api_secret` (mode 0600; the folder is made 0700 when
    missing). Without `force`, an existing file is refused before anything is written."""
    paths = credential_paths(folder)
    if not force:
        refuse_existing(folder)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path, value in zip(paths, (api_key, api_secret), strict=True):
        _write_0600(path, value + "\n", replace=force)
    return paths


def create_private(path: Path) -> None:
    """Create a missing file as 0600 before SQLite does (it would follow the umask, and make the
    -wal and -shm files alike); an existing file is left as it is. Raises OSError."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)  # a umask such as 0o277 would leave even the owner unable to write
    finally:
        os.close(fd)


def _write_0600(path: Path, text: str, *, replace: bool) -> None:
    target = path.with_name(f".{path.name}.{os.getpid()}.tmp") if replace else path
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # O_EXCL: never through a planted file
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(target, path)
    except BaseException:
        if replace:
            target.unlink(missing_ok=True)
        raise


def read_secret_file(path: Path, where: str, problems: list[str]) -> str | None:
    """The one value a secret file holds (the API secret, a webhook URL), stripped; None, with a
    problem `where: ...` naming the file (never its content), when it cannot be read or is empty."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        problems.append(f"{where}: cannot read {path}: {exc.strerror or exc}")
        return None
    if not value:
        problems.append(f"{where}: {path} is empty")
        return None
    return value


def config_lines(key_file: Path, secret_file: Path) -> str:
    """The two `[capture]` lines naming the files (absolute, so they hold wherever the config is)."""
    return (
        f"api_key_file = {json.dumps(str(key_file.resolve()))}\n"
        f"api_secret_file = {json.dumps(str(secret_file.resolve()))}"
    )
