"""Where a ledger's control socket lives: `<ledger>.control` beside it, or, when that path is too
long for a Unix socket address (108 bytes with its NUL), a short one in a private folder named by
a hash of the ledger's path. Then `<ledger>.control` is a small file holding the socket's path, so
any command that knows the ledger finds the socket either way."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes, the last one the NUL


def pointer_path(ledger: Path) -> Path:
    """`<ledger>.control`: the socket itself, or a file naming it."""
    return ledger.with_name(ledger.name + ".control")


def socket_path(ledger: Path) -> Path:
    """Where the daemon of `ledger` listens (for the daemon: where to bind)."""
    beside = pointer_path(ledger)
    if len(os.fsencode(beside)) <= SUN_PATH_MAX:
        return beside
    digest = hashlib.sha256(os.fsencode(ledger.resolve())).hexdigest()[:16]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(runtime) if runtime and os.path.isabs(runtime) else Path("/tmp") / f"capture-sync-{os.getuid()}"
    return folder / f"capture-sync-{digest}.sock"


def private_folder(folder: Path) -> None:
    """Make `folder` (0700) or check that it is this user's own, not a link: a socket placed in a
    folder another user controls could be swapped for theirs. Raises OSError saying why not."""
    folder.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise OSError(
            f"{folder} is not a private folder of this user (owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o})"
        )


def find_socket(ledger: Path) -> Path | None:
    """The socket a daemon of `ledger` said it listens on, or None when there is none to try."""
    beside = pointer_path(ledger)
    try:
        info = os.lstat(beside)
    except FileNotFoundError:
        return None
    if stat.S_ISSOCK(info.st_mode):
        return beside
    if stat.S_ISREG(info.st_mode):
        text = beside.read_text(encoding="utf-8").strip()
        return Path(text) if text else None
    return None
