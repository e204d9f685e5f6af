"""`[[alerts]]` in the config: one webhook per entry, the conditions it watches and their thresholds.

The webhook URL is a secret in all but name (a Slack incoming webhook URL is the token that lets
anyone post to the channel), so, like the API credentials, it may come from an env variable or a
file, it is masked in every log line from the moment it is read, and no message quotes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import httpx
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, ValidationError, model_validator

from .. import logs
from ..durations import duration_s
from ..loopback import is_loopback
from ..problems import problems_from
from ..redact import hide_path
from ..secret_files import read_secret_file

Condition = Literal["auth", "blocked", "outage", "reject_rate", "stale", "stalled", "ledger"]
CONDITIONS: tuple[Condition, ...] = get_args(Condition)
Format = Literal["json", "slack"]


def parse_duration(value: Any) -> float:
    """`"90s"`, `"10m"`, `"2h"`, `"1d"` (or a plain number of seconds) as seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    seconds = duration_s(value) if isinstance(value, str) else None
    if not seconds:
        raise ValueError('must be a positive duration such as "90s", "10m", "2h" or "1d"')
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]


class AlertSettings(BaseModel):
    """One `[[alerts]]` table as written; the URL itself is resolved by `parse_alerts`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(None, min_length=1, max_length=64)  # names the entry in bodies and logs
    url: SecretStr | None = None
    url_env: str | None = Field(None, min_length=1)
    url_file: Path | None = None
    allow_insecure_http: bool = False  # plain http to a host other than loopback carries the URL in clear
    format: Format = "json"
    conditions: tuple[Condition, ...] = CONDITIONS
    outage_after: Duration = 600.0
    reject_share: float = Field(0.1, ge=0, lt=1)  # fires when a pass rejects more than this share
    reject_min_read: int = Field(10, ge=1)  # passes reading fewer records say nothing either way
    stale_after: Duration = 7200.0
    timeout_s: float = Field(5.0, gt=0, le=60)

    @model_validator(mode="after")
    def _one_url(self) -> AlertSettings:
        given = [k for k in ("url", "url_env", "url_file") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of url, url_env (an env variable) or url_file (a file holding it)")
        if not self.conditions:
            raise ValueError("conditions: name at least one of " + ", ".join(CONDITIONS) + " (or leave it out: all)")
        return self


@dataclass(frozen=True)
class Alert:
    """A checked entry with its webhook URL read: `label` names it in bodies and logs, never the URL."""

    label: str
    settings: AlertSettings
    url: SecretStr


def parse_alerts(raw: Any, folder: Path, problems: list[str]) -> tuple[Alert, ...]:
    """The `alerts` array of tables; each problem is added as `alerts[i].key: what`."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append("alerts: must be an array of tables ([[alerts]])")
        return ()
    out = []
    for i, table in enumerate(raw):
        where = f"alerts[{i}]"
        if not isinstance(table, dict):
            problems.append(f"{where}: must be a table ([[alerts]])")
            continue
        logs.register_secret(table.get("url") if isinstance(table.get("url"), str) else None)
        try:
            settings = AlertSettings.model_validate(table)
        except ValidationError as exc:
            problems.extend(problems_from(exc, where))
            continue
        url = _webhook_url(settings, folder, where, problems)
        if url is not None:
            out.append(Alert(settings.name or where, settings, SecretStr(url)))
    return tuple(out)


def _webhook_url(settings: AlertSettings, folder: Path, where: str, problems: list[str]) -> str | None:
    """The URL from where the entry says, registered as a secret; problems never quote it."""
    if settings.url is not None:
        key, url = "url", settings.url.get_secret_value().strip()
    elif settings.url_env is not None:
        key, url = "url_env", os.environ.get(settings.url_env, "").strip()
        if not url:
            problems.append(f"{where}.url_env: env {settings.url_env} is not set or empty")
            return None
    else:
        assert settings.url_file is not None
        path = settings.url_file if settings.url_file.is_absolute() else folder / settings.url_file
        key, read = "url_file", read_secret_file(path, f"{where}.url_file", problems)
        if read is None:
            return None
        url = read
    logs.register_secret(url)
    hide_path(url)
    why = _unfit(url, settings.allow_insecure_http)
    if why:
        problems.append(f"{where}.{key}: {why}")
        return None
    return url


def _unfit(url: str, allow_insecure_http: bool) -> str | None:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "not a valid URL"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return "must be an http(s) URL with a host"
    if parsed.scheme == "http" and not allow_insecure_http and not is_loopback(parsed.host):
        return (
            "refusing plain http to a host other than loopback (the URL would travel in clear): "
            "use https, or set allow_insecure_http = true"
        )
    return None
