"""Where the API key and secret come from (env first, then the files the config names), each checked,
and never their values in a problem: credentials never come from the TOML file itself (`config`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from . import logs
from .config_file import beside
from .secret_files import read_secret_file

ENV_API_KEY = "CAPTURE_API_KEY"
ENV_API_SECRET = "CAPTURE_API_SECRET"


@dataclass(frozen=True)
class Credentials:
    """The pair, and where each half was read from ("env CAPTURE_API_KEY" or "file /path"): what a
    person needs to fix a wrong pair, and never the value itself."""

    api_key: str
    api_secret: SecretStr
    key_from: str = "(given)"
    secret_from: str = "(given)"

    def origins(self) -> str:
        return f"key from {self.key_from}, secret from {self.secret_from}"


def _credential(env: str, file: Path | None, folder: Path, key: str, problems: list[str]) -> tuple[str | None, str]:
    """The value and where it came from; env takes precedence over the file."""
    if os.environ.get(env):
        return os.environ[env].strip(), f"env {env}"
    if file is None:
        return None, "nowhere"
    path = beside(folder, file)
    return read_secret_file(path, f"capture.{key}", problems), f"file {path}"


def read_credentials(
    key_file: Path | None, secret_file: Path | None, folder: Path, problems: list[str]
) -> Credentials | None:
    """The pair from env or the files named (env first), each half checked; None with `problems` told."""
    api_key, key_from = _credential(ENV_API_KEY, key_file, folder, "api_key_file", problems)
    secret, secret_from = _credential(ENV_API_SECRET, secret_file, folder, "api_secret_file", problems)
    logs.register_secret(secret)
    unsendable = [
        f"credentials: the {what} from {where} holds a character an HTTP header cannot carry (a line break, a "
        "control or non-ASCII character): write it again as the CRM showed it"
        for what, value, where in (("key", api_key, key_from), ("secret", secret, secret_from))
        if value and not (value.isascii() and value.isprintable())
    ]
    if unsendable:  # each request would fail on it as a connection error, retried to no end
        problems.extend(unsendable)
        return None
    if api_key and secret:
        return Credentials(api_key, SecretStr(secret), key_from, secret_from)
    if api_key or secret:
        missing = (
            f"env {ENV_API_SECRET} or capture.api_secret_file"
            if api_key
            else f"env {ENV_API_KEY} or capture.api_key_file"
        )
        problems.append(f"credentials: the {'secret' if api_key else 'key'} is missing ({missing})")
    return None
