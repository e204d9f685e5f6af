"""The config file itself: reading its TOML, and the [ledger] table alone.

Commands that only read or repair the ledger (`status`, `ledger ...`, `runs list`) need nothing but
where the ledger is, so they load it from here: without the mapping, the sources' drivers, the HTTP
client or the delivery engine, they start in a fraction of the time, and a config whose sources or
credentials are broken still lets a person look at the ledger while fixing them.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from . import env_overrides
from .problems import ConfigProblem, problems_from

DEFAULT_PATH = Path("capture-sync.toml")
ENV_CONFIG = "CAPTURE_SYNC_CONFIG"

S = TypeVar("S", bound=BaseModel)


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PG_SCHEMES = ("postgresql://", "postgres://")


class LedgerSettings(Section):
    path: Path = Path("capture-ledger.sqlite3")
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    # postgresql://USER@HOST:PORT/DB: the ledger in a PostgreSQL database instead of the file `path`.
    # Its password never in the URL: PGPASSWORD, `password_file`, or libpq's ~/.pgpass.
    url: str | None = None
    password_file: Path | None = None

    @field_validator("url")
    @classmethod
    def _plain_url(cls, url: str | None) -> str | None:
        """Never echoes the URL: it may carry the password it is refused for."""
        if url is None:
            return None
        if not url.startswith(PG_SCHEMES):
            raise ValueError("must be a PostgreSQL URL, postgresql://USER@HOST:PORT/DB (a SQLite ledger is `path`)")
        parts = urlsplit(url)
        if parts.password is not None or "password=" in parts.query:
            raise ValueError(
                "carries a password: remove it from the URL and give it in the PGPASSWORD environment "
                "variable, `[ledger] password_file`, or libpq's ~/.pgpass"
            )
        return url


# An integration's name is its PostgreSQL schema (quoted there): letters, digits, `_`, `.`, `-`.
INTEGRATION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


class IntegrationSettings(Section):
    """`[integration]`: one config file is one integration (its own API client, sources, schedule).
    Integrations sharing one PostgreSQL database each keep their ledger in a schema of their name,
    so none sees another's entries, cursors, runs or pauses. Unset, the name is the config file's stem."""

    name: str | None = None

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str | None) -> str | None:
        if name is not None and not INTEGRATION_NAME.match(name):
            raise ValueError("must be 1-63 letters, digits, `_`, `.` or `-`, starting with a letter or digit")
        return name


class LedgerLocation:
    """Where a config's ledger is, for both the full config and `LedgerPlace`: a SQLite file beside the
    config file, or a PostgreSQL database (`[ledger] url`), in the schema of the config's integration."""

    path: Path  # the config file
    ledger: LedgerSettings
    integration: IntegrationSettings

    @property
    def integration_name(self) -> str:
        """`[integration] name`, or the config file's stem (checked by `integration_problem`)."""
        return self.integration.name or self.path.stem

    @property
    def ledger_target(self) -> str | Path:
        """What `Ledger(...)` opens: the file's path, or the database's URL (with `integration_name`)."""
        return self.ledger.url or self.ledger_path

    @property
    def ledger_password_file(self) -> Path | None:
        return None if self.ledger.password_file is None else beside(self.path.parent, self.ledger.password_file)

    @property
    def ledger_name(self) -> str:
        """The ledger as messages name it: the file, or postgresql://USER@HOST:PORT/DB."""
        if self.ledger.url is None:
            return str(self.ledger_path)
        from .ledger import pg_name  # psycopg parses it: only a config with a PostgreSQL ledger loads it

        return pg_name(self.ledger.url)

    @property
    def ledger_path(self) -> Path:
        """The ledger's place on this host: the SQLite file itself; for a PostgreSQL ledger, a name beside
        the config file (`<config stem>.pgledger`, never created) that the local control socket goes beside."""
        if self.ledger.url is not None:
            return self.path.with_name(self.path.stem + ".pgledger")
        return beside(self.path.parent, self.ledger.path)


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed file; raises ConfigProblem saying what to do when it is missing or unreadable."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigProblem(
            [
                f"{path}: no such config file (pass -c FILE or set {ENV_CONFIG}; config/capture-sync.example.toml is a start)"
            ]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigProblem([f"{path}: cannot read it: {exc}"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigProblem([f"{path}: not valid TOML: {exc}"]) from None


def beside(folder: Path, path: Path) -> Path:
    """A path from the config file: relative ones are relative to its folder."""
    return path if path.is_absolute() else folder / path


@dataclass(frozen=True)
class LedgerPlace(LedgerLocation):
    """Where a config file's ledger is and how to open it: all a ledger-only command reads."""

    path: Path  # the config file
    ledger: LedgerSettings
    integration: IntegrationSettings = field(default_factory=IntegrationSettings)


def integration_problem(path: Path, settings: IntegrationSettings | None, ledger: LedgerSettings | None) -> str | None:
    """A config file on a PostgreSQL ledger whose stem cannot name its schema (and no
    `[integration] name`): what to do. (A SQLite file holds one integration: the name only labels.)"""
    postgres = ledger is not None and ledger.url is not None
    if postgres and settings is not None and settings.name is None and not INTEGRATION_NAME.match(path.stem):
        return (
            f"integration: the file's name {path.stem!r} cannot name the integration (1-63 letters, digits, "
            "`_`, `.` or `-`): set [integration] name"
        )
    return None


def integration_settings(
    doc: dict[str, Any],
    path: Path,
    ledger: LedgerSettings | None,
    problems: list[str],
) -> IntegrationSettings | None:
    """The `[integration]` table, checked with the name it falls back to."""
    settings = section(IntegrationSettings, table(doc, "integration", problems), "integration", problems)
    problem = integration_problem(path, settings, ledger)
    if problem:
        problems.append(problem)
    return settings


def load_ledger_place(path: str | Path) -> LedgerPlace:
    """The [ledger] table, with its `CAPTURE_SYNC__LEDGER__*` overrides; the rest of the file is
    not checked (`capture-sync check` does that)."""
    path = Path(path)
    doc = read_toml(path)
    problems: list[str] = []
    prefix = f"{env_overrides.PREFIX}LEDGER__"
    environ = {k: v for k, v in os.environ.items() if k.upper().startswith(prefix)}
    overridden = env_overrides.apply(doc, environ, {"ledger": LedgerSettings}, problems)
    settings = section(LedgerSettings, table(doc, "ledger", problems), "ledger", problems)
    integration = integration_settings(doc, path, settings, problems)
    if problems or settings is None or integration is None:
        raise ConfigProblem([f"{path}: {env_overrides.annotate(p, overridden)}" for p in problems])
    return LedgerPlace(path, settings, integration)


def table(doc: dict[str, Any], key: str, problems: list[str]) -> dict[str, Any]:
    """The top-level table `key` of the file (a copy), or {} with a problem when it is not a table."""
    value = doc.get(key, {})
    if not isinstance(value, dict):
        problems.append(f"{key}: must be a table ([{key}])")
        return {}
    return dict(value)


def section(model: type[S], data: dict[str, Any], where: str, problems: list[str]) -> S | None:
    """The table as `model`, or None with each of its problems added to `problems`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems.extend(problems_from(exc, where))
        return None
