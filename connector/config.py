"""Loading `capture-sync.toml` (design 6) into checked settings, listing every problem at once.

Credentials never come from the TOML file: a config file gets copied, committed and pasted into
tickets, so it only names where the secret lives (env or a file). Relative paths (the ledger, the
credential files, source files) are relative to the config file's folder, so a daemon's working
directory does not change what it opens.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from . import env_overrides, logs
from .api.client import check_base_url
from .api.errors import InsecureURLError
from .api.retry import RetryPolicy
from .config_credentials import ENV_API_KEY, ENV_API_SECRET, Credentials, read_credentials
from .config_file import (
    IntegrationSettings,
    LedgerLocation,
    LedgerSettings,
    Section,
    beside,
    integration_settings,
    read_toml,
    section,
    table,
)
from .delivery import REJECTS_MAX_BYTES, DeliverySettings, RejectsFeed, SourceJob
from .loopback import parse_address
from .mapping import Mapping
from .plugins import build_source
from .problems import ConfigProblem
from .schedule import schedule_trigger
from .secret_files import read_secret_file

if TYPE_CHECKING:
    from .alerts import Alert

ENV_BASE_URL = "CAPTURE_BASE_URL"
DEFAULT_SCHEDULE = "every 5m"
_SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

log = logs.get_logger("capture_sync.config")


class RetrySettings(Section):
    max_attempts: int = Field(6, ge=1, le=100)
    max_elapsed_s: float = Field(120.0, gt=0)
    initial_backoff_s: float = Field(0.5, ge=0)
    max_backoff_s: float = Field(30.0, gt=0)

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            max_elapsed_s=self.max_elapsed_s,
            initial_backoff_s=self.initial_backoff_s,
            max_backoff_s=max(self.max_backoff_s, self.initial_backoff_s),
        )


class CaptureSettings(Section):
    base_url: str | None = None
    api_key_file: Path | None = None
    api_secret_file: Path | None = None
    batch_size: int = Field(100, ge=1, le=100)
    concurrency: int = Field(4, ge=1, le=64)
    timeout_s: float = Field(30.0, gt=0)
    allow_insecure_http: bool = False
    rate_window_s: float | None = Field(None, gt=0, le=86_400)  # a hint; unset, the limiter learns the window
    # burst: what the window allows at once, then one as an old one leaves it; smooth: evenly spaced
    rate_shape: Literal["burst", "smooth"] = "burst"
    retry: RetrySettings = RetrySettings.model_validate({})
    require_flow: bool = False  # sync and run refuse a base URL and client no `check --flow` has passed against


class DaemonSettings(Section):
    retry_sweep: str = "every 5m"  # re-sends what an outage left unsettled (never a non-retryable answer's batch)
    # Off by default, as the spec says (4.4 rule 4): a batch refused with a non-retryable 503 waits for
    # an operator's `replay`. Set a schedule ("every 1h") to re-send such batches on it anyway.
    retry_stalled_every: str | None = None
    credentials_check: str = "every 30s"  # while the API refuses the credentials: how often to read them again
    alerts_check: str = "every 15s"  # how often the [[alerts]] conditions are judged (and after every pass)
    # On a PostgreSQL ledger, daemons sharing it lead each integration in turn: a leader's lease runs
    # this long (renewed every third of it); a standby takes over within it after the leader dies.
    lease_s: float = Field(15.0, ge=1, le=3600)
    # `run` serves /metrics, /healthz, /readyz and a status page there ("127.0.0.1:9464"); off when unset.
    # They have no login: an address that is not loopback needs http_public = true.
    http_public: bool = False
    http_address: str | None = None
    # Names the endpoints answer to beside the bound address, localhost and IP addresses (Host header:
    # any other is refused with 421, so that a page cannot read them through a rebound name).
    http_allowed_hosts: tuple[str, ...] = ()
    # Against clients that hold connections open: a request's head, then its body, must arrive within
    # these, and at most this many connections are kept (the oldest idle one makes room for a new one).
    http_header_timeout_s: float = Field(10.0, gt=0)
    http_body_timeout_s: float = Field(30.0, gt=0)
    http_max_connections: int = Field(64, ge=1)
    status_page_contact_data: bool = False  # the status page may show blocked persons' names, emails, phones
    # Each rejected record appended to this file as one JSON line (sync and run), contact data masked
    # unless rejects_contact_data; created 0600, rotated past rejects_max_bytes (FILE.1 .. FILE.3).
    rejects_file: Path | None = None
    rejects_max_bytes: int = Field(REJECTS_MAX_BYTES, ge=4096)
    rejects_contact_data: bool = False
    # A file (0600) holding the bearer token of the HTTP control (POST /control/<command>); unset: no
    # HTTP control at all, the endpoints stay read-only.
    control_token_file: Path | None = None

    @field_validator("http_address")
    @classmethod
    def _listenable(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            parse_address(value, public=bool(info.data.get("http_public")))
        return value


@dataclass(frozen=True)
class SourceConfig:
    name: str
    schedule: str
    job: SourceJob


@dataclass(frozen=True)
class Config(LedgerLocation):
    path: Path
    capture: CaptureSettings
    ledger: LedgerSettings
    daemon: DaemonSettings
    sources: tuple[SourceConfig, ...]
    base_url: str | None
    credentials: Credentials | None
    alerts: tuple[Alert, ...] = ()
    integration: IntegrationSettings = field(default_factory=IntegrationSettings)

    def exposed_files(self) -> list[tuple[Path, int]]:
        """The ledger (with its -wal and -shm) and the credential files that exist and that other
        users may read, with their modes: the ledger holds every contact's payload."""
        ledger = self.ledger_path
        files = (
            []
            if self.ledger.url
            else [ledger, ledger.with_name(ledger.name + "-wal"), ledger.with_name(ledger.name + "-shm")]
        )
        files += [self.ledger_password_file] if self.ledger_password_file else []
        files += [beside(self.path.parent, f) for f in (self.capture.api_key_file, self.capture.api_secret_file) if f]
        exposed = []
        for path in dict.fromkeys(files):
            try:
                mode = stat.S_IMODE(path.stat().st_mode)
            except OSError:
                continue  # absent (no -wal yet) or unreachable: nothing to say about who reads it
            if mode & (stat.S_IRGRP | stat.S_IROTH):
                exposed.append((path, mode))
        return exposed

    def control_token(self) -> str | None:
        """The HTTP control's bearer token from `[daemon] control_token_file`, or None when unset.
        Raises ConfigProblem when the file cannot be read, is empty, or other users may read it."""
        if self.daemon.control_token_file is None:
            return None
        path = beside(self.path.parent, self.daemon.control_token_file)
        where, problems = "daemon.control_token_file", list[str]()
        token = read_secret_file(path, where, problems)
        if token is not None and (mode := stat.S_IMODE(path.stat().st_mode)) & 0o077:
            problems.append(f"{where}: {path} may be read by other users (mode {mode:04o}): chmod 600 {path}")
        if problems:
            raise ConfigProblem([f"{self.path}: {p}" for p in problems])
        logs.register_secret(token)
        return token

    def delivery_settings(self) -> DeliverySettings:
        return DeliverySettings(
            batch_size=self.capture.batch_size,
            concurrency=self.capture.concurrency,
            rate_window_s=self.capture.rate_window_s,
            rate_shape=self.capture.rate_shape,
            rejects=self._rejects_feed(),
        )

    def _rejects_feed(self) -> RejectsFeed | None:
        daemon = self.daemon
        if daemon.rejects_file is None:
            return None
        return RejectsFeed(
            beside(self.path.parent, daemon.rejects_file),
            daemon.rejects_max_bytes,
            daemon.rejects_contact_data,
            {s.name: s.job.mapping.columns() for s in self.sources},
        )

    def api(self) -> tuple[str, Credentials]:
        """What a command that talks to the API needs; raises ConfigProblem naming what is missing."""
        problems = []
        if self.base_url is None:
            problems.append(f"capture.base_url: required (or set env {ENV_BASE_URL})")
        if self.credentials is None:
            problems.append(
                f"credentials are missing: set env {ENV_API_KEY} and {ENV_API_SECRET}, "
                "or capture.api_key_file and capture.api_secret_file"
            )
        if problems:
            raise ConfigProblem([f"{self.path}: {p}" for p in problems])
        assert self.base_url is not None and self.credentials is not None
        return self.base_url, self.credentials

    def reload_credentials(self) -> Credentials | None:
        """The pair where it came from, read again now (the files may hold a rotated secret); None
        when it cannot be read or is incomplete, with the reason logged."""
        problems: list[str] = []
        credentials = read_credentials(
            self.capture.api_key_file, self.capture.api_secret_file, self.path.parent, problems
        )
        if problems:
            log.warning("credentials.unreadable", problems=problems)
        return credentials

    def close_sources(self) -> None:
        """Release what the sources hold (database connections, HTTP clients)."""
        for source in self.sources:
            source.job.source.close()

    def jobs(self, only: str | None = None) -> list[SourceJob]:
        """The configured sources' jobs, or just `only`; raises ConfigProblem for an unknown name."""
        if only is None:
            return [s.job for s in self.sources]
        for s in self.sources:
            if s.name == only:
                return [s.job]
        names = ", ".join(s.name for s in self.sources)
        raise ConfigProblem([f"{self.path}: no source named {only!r} (configured: {names})"])


def check_rejects_files(configs: list[Config]) -> None:
    """One process's configs name distinct `[daemon] rejects_file`s: two integrations' feeds in one file
    would interleave two ledgers' entry ids (raises ConfigProblem naming both configs)."""
    named: dict[Path, Path] = {}
    for config in configs:
        feed = config.daemon.rejects_file
        if feed is None:
            continue
        where = Path(os.path.realpath(beside(config.path.parent, feed)))
        if where in named:
            raise ConfigProblem(
                [
                    f"{named[where]} and {config.path} name the same [daemon] rejects_file ({where}): "
                    "give each integration its own file, e.g. rejects-INTEGRATION.jsonl"
                ]
            )
        named[where] = config.path


def load_config(path: str | Path) -> Config:
    """Read and check the whole file; raises ConfigProblem with every problem, each as `FILE: key: what`."""
    path = Path(path)
    doc = read_toml(path)
    problems: list[str] = []
    overridden = env_overrides.apply(
        doc, os.environ, {"capture": CaptureSettings, "ledger": LedgerSettings, "daemon": DaemonSettings}, problems
    )
    folder = path.parent
    known = ("integration", "capture", "ledger", "daemon", "sources", "alerts")
    for key in sorted(set(doc) - set(known)):
        problems.append(f"{key}: unknown table or key (known: {', '.join(known)})")
    capture_doc = table(doc, "capture", problems)
    for key, env in (("api_key", ENV_API_KEY), ("api_secret", ENV_API_SECRET)):
        if key in capture_doc:
            value = capture_doc.pop(key)
            logs.register_secret(value if isinstance(value, str) else None)
            problems.append(
                f"capture.{key}: credentials are not accepted in the config file; "
                f"set env {env} or point capture.{key}_file at a file readable only by this user"
            )
    capture = section(CaptureSettings, capture_doc, "capture", problems)
    ledger = section(LedgerSettings, table(doc, "ledger", problems), "ledger", problems)
    daemon = section(DaemonSettings, table(doc, "daemon", problems), "daemon", problems)
    integration = integration_settings(doc, path, ledger, problems)
    if daemon is not None:
        _check_schedule(daemon.retry_sweep, "daemon.retry_sweep", problems)
        if daemon.retry_stalled_every is not None:
            _check_schedule(daemon.retry_stalled_every, "daemon.retry_stalled_every", problems)
        _check_schedule(daemon.credentials_check, "daemon.credentials_check", problems)
        _check_schedule(daemon.alerts_check, "daemon.alerts_check", problems)
    base_url = os.environ.get(ENV_BASE_URL) or (capture.base_url if capture else None)
    if base_url is not None and capture is not None:
        try:
            check_base_url(base_url, allow_insecure_http=capture.allow_insecure_http)
        except InsecureURLError as exc:
            where = f"env {ENV_BASE_URL}" if os.environ.get(ENV_BASE_URL) else "capture.base_url"
            problems.append(f"{where}: {exc}")
    credentials = read_credentials(capture.api_key_file, capture.api_secret_file, folder, problems) if capture else None
    sources = _sources(doc.get("sources", []), folder, problems)
    alerts = _alerts(doc.get("alerts"), folder, problems)
    if problems:
        raise ConfigProblem([f"{path}: {env_overrides.annotate(p, overridden)}" for p in problems])
    assert capture is not None and ledger is not None and daemon is not None and integration is not None
    return Config(path, capture, ledger, daemon, tuple(sources), base_url, credentials, alerts, integration)


def load_source(path: str | Path, name: str) -> SourceConfig:
    """One `[[sources]]` table of the file, built and checked as `load_config` does, and nothing else:
    no credential is read and no [capture] table is needed (`sources preview` sends nothing).
    Raises ConfigProblem, as `FILE: key: what`."""
    path = Path(path)
    raw = read_toml(path).get("sources", [])
    tables = [t for t in raw if isinstance(t, dict) and t.get("name") == name] if isinstance(raw, list) else []
    if not tables:
        names = ", ".join(str(t.get("name")) for t in raw if isinstance(t, dict)) if isinstance(raw, list) else ""
        raise ConfigProblem([f"{path}: no source named {name!r} (configured: {names or 'none'})"])
    problems: list[str] = []
    sources = _sources(tables[:1], path.parent, problems)
    if problems:
        raise ConfigProblem([f"{path}: {p}" for p in problems])
    return sources[0]


def _alerts(raw: Any, folder: Path, problems: list[str]) -> tuple[Alert, ...]:
    """The `[[alerts]]` tables, checked; their module (and its model) loads only for a config that has any."""
    if raw is None:
        return ()
    from .alerts import parse_alerts

    return parse_alerts(raw, folder, problems)


def _check_schedule(text: Any, where: str, problems: list[str]) -> None:
    try:
        schedule_trigger(text)
    except ValueError as exc:
        problems.append(f"{where}: {exc}")


def _sources(raw: Any, folder: Path, problems: list[str]) -> list[SourceConfig]:
    if not isinstance(raw, list) or not raw:
        problems.append("sources: at least one [[sources]] table is needed")
        return []
    out: list[SourceConfig] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            problems.append(f"sources[{i}]: must be a table ([[sources]])")
            continue
        options = dict(entry)
        name = options.pop("name", None)
        where = f"sources.{name}" if isinstance(name, str) and name else f"sources[{i}]"
        if not isinstance(name, str) or not _SOURCE_NAME.match(name):
            problems.append(f"{where}.name: required; letters, digits, '_', '.', '-' (up to 64), e.g. \"signups\"")
        elif name in seen:
            problems.append(f"{where}.name: {name!r} is used by another source; names must be unique")
        else:
            seen.add(name)
        type_name = options.pop("type", None)
        schedule = options.pop("schedule", DEFAULT_SCHEDULE)
        mapping_table = options.pop("mapping", None)
        mode = options.pop("mode", "incremental")
        _check_schedule(schedule, f"{where}.schedule", problems)
        if mode not in ("incremental", "snapshot"):
            problems.append(f'{where}.mode: {mode!r} is not a mode: "incremental" (the default) or "snapshot"')
        mapping = source = None
        if not isinstance(mapping_table, dict):
            problems.append(f"{where}.mapping: required table ([sources.mapping]) saying how fields become a person")
        else:
            try:
                mapping = Mapping.from_config(mapping_table, where=f"{where}.mapping", search=folder)
            except ConfigProblem as exc:
                problems.extend(exc.problems)
        if not isinstance(type_name, str) or not type_name:
            problems.append(f'{where}.type: required (csv, jsonl, sql, http or "package.module:Class")')
        else:
            try:
                source = build_source(str(name), type_name, options, config_dir=folder)
            except ConfigProblem as exc:
                problems.extend(p if p.startswith(where) else f"{where}: {p}" for p in exc.problems)
        if source is not None and mapping is not None and isinstance(name, str):
            out.append(SourceConfig(name, schedule, SourceJob(name, source, mapping, snapshot=mode == "snapshot")))
    return out
