"""What the reliability tests share: contacts and configs on disk, `capture-sync` runs killed at
random moments (or by a failpoint), the effectively-once figures, and a secret scan of everything
each test leaves behind.

Every test here gets the `rel` kit (test modules do not import conftest). Every API secret made
through `rel.client(...)` is looked for, after the test, in every file under its tmp_path and in
every output it captured; a test that leaks fails in its teardown.

Sizes scale with the environment so that `make soak` runs the same tests longer:
SOAK_RECORDS, SOAK_KILLS (chaos) and SOAK_OUTAGE_S (outage).
"""

from __future__ import annotations

import csv
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from connector.failpoints import ENV as FAILPOINTS_ENV

from .upstream import CONTACT_MAPPING, contact

SCRIPT = Path(sys.executable).with_name("capture-sync")
CLI_TIMEOUT_S = 120
SETTLE_TIMEOUT_S = 600


def scaled(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


@dataclass
class Population:
    """A contacts CSV: how many rows are valid and how many must end `rejected`."""

    path: Path
    valid: int
    invalid: int


@dataclass
class Survived:
    """What a kill loop did: SIGKILLs sent by the test, SIGKILLs by each failpoint, runs started."""

    timer_kills: int = 0
    failpoint_kills: dict[str, int] = field(default_factory=dict)
    rounds: int = 0

    @property
    def kills(self) -> int:
        return self.timer_kills + sum(self.failpoint_kills.values())


@dataclass(frozen=True)
class Figures:
    """The effectively-once figures: valid records, those in the CRM once, lost, doubled."""

    records: int
    captured_once: int
    lost: int
    doubled: int


def write_contacts(path: Path, records: int, rng: random.Random) -> Population:
    """`records` rows; about 10% invalid (no email nor phone, or a malformed email)."""
    rows = [contact(i, rng) for i in range(records)]
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.DictWriter(fh, ["id", "First", "Last", "Email", "Phone"])
        out.writeheader()
        out.writerows(rows)
    valid = sum(row["First"] == "Valid" for row in rows)
    return Population(path, valid, records - valid)


def write_config(
    folder: Path,
    base_url: str,
    contacts: Path,
    *,
    batch_size: int = 20,
    concurrency: int = 3,
    timeout_s: float = 5,
    rate_window_s: float = 60.0,
    max_attempts: int = 12,
    max_elapsed_s: float = 60,
    ledger: str = "ledger.sqlite3",
    mapping: dict[str, str] = CONTACT_MAPPING,
    cursor: str | None = None,
    ledger_url: str | None = None,
) -> Path:
    """A config with one csv source `contacts` (`mapping`: person field -> column; `cursor`: a number
    column to read changed rows by); credentials come from the environment."""
    config = folder / "capture-sync.toml"
    incremental = f'cursor = "{cursor}"\ncursor_type = "number"\n' if cursor else ""
    fields = "".join(f'{name} = "{column}"\n' for name, column in mapping.items())
    config.write_text(
        f"""[capture]
base_url = "{base_url}"
batch_size = {batch_size}
concurrency = {concurrency}
timeout_s = {timeout_s}
rate_window_s = {rate_window_s}

[capture.retry]
max_attempts = {max_attempts}
max_elapsed_s = {max_elapsed_s}
initial_backoff_s = 0.01
max_backoff_s = 0.2

[ledger]
{f'url = "{ledger_url}"' if ledger_url else f'path = "{ledger}"'}

[[sources]]
name = "contacts"
type = "csv"
path = "{contacts}"
primary_key = "id"
{incremental}
[sources.mapping]
{fields}""",
        encoding="utf-8",
    )
    return config


# What lets root read and write any file whatever its mode.
ROOT_POWERS = "-dac_override,-dac_read_search"


def without_root_powers() -> list[str]:
    """A command prefix under which file modes bind: none for a user other than root (they bind
    already); for root, setpriv dropping ROOT_POWERS from the bounding set, so the command runs as
    root, owner of the test's files, that a read-only mode stops. Skips the test when root cannot
    drop them (no setpriv, or no CAP_SETPCAP in a container)."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", f"--bounding-set={ROOT_POWERS}", "--"]
    if not shutil.which("setpriv") or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root, and setpriv cannot drop the capabilities that let root ignore file modes")
    return prefix


Where = Path | str  # a ledger: a SQLite file, or a PostgreSQL URL
INTEGRATION = "capture-sync"  # the stem of write_config's file: the PostgreSQL schema its ledger is in


def rows(ledger: Where, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A query on a ledger another process is writing, on either engine (`?` placeholders)."""
    if isinstance(ledger, str):
        import psycopg

        # the integration's schema: write_config's file is capture-sync.toml, so the integration is its stem
        with psycopg.connect(ledger, autocommit=True, options=f'-c search_path="{INTEGRATION}"') as conn:
            return conn.execute(sql.replace("?", "%s"), params).fetchall()
    db = sqlite3.connect(ledger, timeout=5)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def count(ledger: Where, sql: str) -> int:
    """A `SELECT count(*)` on a ledger another process is writing; 0 before its schema exists."""
    if isinstance(ledger, Path) and not ledger.exists():
        return 0
    try:
        return rows(ledger, sql)[0][0]
    except Exception as exc:  # sqlite3.OperationalError, psycopg.errors.UndefinedTable: no schema yet
        if "no such table" in str(exc) or "does not exist" in str(exc):
            return 0
        raise


# The work a run has done, in its ledger writes: batches written, requests recorded (at settle).
WORK_DONE = "SELECT (SELECT count(*) FROM batches) + (SELECT count(*) FROM attempts)"


class Churn(Protocol):
    """What changes around the connector while the kill loop runs: upstream edits, the API's
    behaviour. Called until the kills are done and nothing is `pending`; then the world stands
    still, so the loop can end on it."""

    def pending(self) -> list[str]:
        """What the churn has yet to show (empty when done)."""
        ...

    def before_run(self, round_no: int) -> None: ...

    def during_run(self, round_no: int) -> None: ...


def kill_during_work(
    proc: subprocess.Popen[bytes], ledger: Where, rng: random.Random, max_work: int, jitter_s: float
) -> None:
    """SIGKILL `proc` after 0 to `max_work` more ledger writes and up to `jitter_s` more, unless it ends first."""
    target = count(ledger, WORK_DONE) + rng.randint(0, max_work)
    while proc.poll() is None and count(ledger, WORK_DONE) < target:
        time.sleep(0.01)
    try:
        proc.wait(timeout=rng.uniform(0.0, jitter_s))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)


def recorded_exit(ledger: Where, runs_before: int, killed: int) -> int:
    """The exit code the run after the first `runs_before` recorded at its end; `killed` when it
    never got there (the kill cut it short)."""
    found = rows(
        ledger, "SELECT finished_at IS NOT NULL, exit_code FROM runs ORDER BY id LIMIT 1 OFFSET ?", (runs_before,)
    )
    return found[0][1] if found and found[0][0] else killed


def running_claims(sandbox_db: Path) -> int:
    db = sqlite3.connect(sandbox_db, timeout=5)
    try:
        return db.execute("SELECT count(*) FROM idempotency WHERE state = 'running'").fetchone()[0]
    finally:
        db.close()


def ledger_states(ledger: Where) -> dict[str, int]:
    return dict(rows(ledger, "SELECT state, count(*) FROM entries GROUP BY state"))


def figures(store: Any, population: Population) -> Figures:
    """Every valid record has its own email, so one identity must be captured exactly once: lost
    counts the valid records the CRM never captured, doubled every capture beyond the first."""
    with population.path.open(newline="", encoding="utf-8") as fh:
        wanted = {f"email:{row['Email']}" for row in csv.DictReader(fh) if row["First"] == "Valid"}
    captures = Counter(c["identity"] for c in store.captures())
    return Figures(
        records=len(wanted),
        captured_once=sum(1 for identity in wanted if captures[identity] == 1),
        lost=sum(1 for identity in wanted if not captures[identity]),
        doubled=sum(n - 1 for n in captures.values() if n > 1),
    )


def assert_effectively_once(store: Any, population: Population, ledger: Where) -> Figures:
    """The CRM holds every valid record once; the ledger says the same (captured or duplicate),
    holds every invalid record as `rejected` with its reasons, and nothing else."""
    result = figures(store, population)
    assert (result.lost, result.doubled) == (0, 0), result
    assert result.captured_once == population.valid and len(store.persons()) == population.valid
    states = ledger_states(ledger)
    assert states.get("captured", 0) + states.get("duplicate", 0) == population.valid, states
    assert states.get("rejected") == population.invalid and set(states) <= {"captured", "duplicate", "rejected"}
    reasons = [r for (r,) in rows(ledger, "SELECT last_error FROM entries WHERE state = 'rejected'")]
    ledger_ids = {r for (r,) in rows(ledger, "SELECT person_id FROM entries WHERE state = 'captured'")}
    assert all(r and "email" in r for r in reasons)
    assert ledger_ids <= {p["id"] for p in store.persons()}
    return result


class SecretScan:
    """The secrets a test made, and the outputs of the processes it ran, for the teardown scan."""

    def __init__(self) -> None:
        self.secrets: list[str] = []
        self.outputs: list[str] = []

    def leaks(self, folders: list[Path], captured: str = "") -> list[str]:
        """Where any secret appears: file paths under `folders`, "output" for a captured text."""
        found = []
        needles = [s.encode() for s in self.secrets if s]
        files = (p for folder in folders for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        for path in sorted(files):
            data = path.read_bytes()
            if any(n in data for n in needles):
                found.append(str(path))
        if any(s in text for s in self.secrets if s for text in [*self.outputs, captured]):
            found.append("output")
        return found


@dataclass
class ReliabilityKit:
    tmp: Path
    scan: SecretScan
    folders: list[Path] = field(default_factory=list)
    contacts = staticmethod(write_contacts)
    config = staticmethod(write_config)
    states = staticmethod(ledger_states)
    count = staticmethod(count)
    figures = staticmethod(figures)
    assert_effectively_once = staticmethod(assert_effectively_once)
    scaled = staticmethod(scaled)

    def client(self, store: Any, name: str = "reliability", **options: Any) -> dict[str, str]:
        """A new sandbox client; returns the environment that hands its credentials to the CLI."""
        key, secret = store.create_client(name, **options)
        self.scan.secrets.append(secret)
        return {**os.environ, "CAPTURE_API_KEY": key, "CAPTURE_API_SECRET": secret}

    def world_folder(self) -> Path:
        """A folder another user can reach (pytest's tmp_path is root's alone); scanned and removed
        after the test like tmp_path."""
        folder = Path(tempfile.mkdtemp(prefix="capture-sync-reliability-"))
        folder.chmod(0o755)
        self.folders.append(folder)
        return folder

    def command(self, *args: str, bound_by_permissions: bool = False) -> list[str]:
        """`capture-sync ARGS`; `bound_by_permissions`: as root, without the capabilities that let root
        ignore file modes (the process stays root, so it still reaches a checkout in a private folder)."""
        return [*(without_root_powers() if bound_by_permissions else []), str(SCRIPT), *args]

    def run(
        self, *args: str, env: dict[str, str], bound_by_permissions: bool = False, cwd: Path | None = None
    ) -> Result:
        """Run a command to its end; its output joins the secret scan."""
        proc = subprocess.run(
            self.command(*args, bound_by_permissions=bound_by_permissions),
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd or self.tmp,
            timeout=CLI_TIMEOUT_S,
        )
        self.scan.outputs += [proc.stdout, proc.stderr]
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def until_settled(
        self,
        config: Path,
        env: dict[str, str],
        rng: random.Random,
        *,
        kills: int,
        failpoints: tuple[str, ...] = (),
        max_hit: int = 3,
        sandbox_db: Path | None = None,
        churn: Churn | None = None,
        max_work: int = 4,
        jitter_s: float = 0.1,
        log_level: str = "WARNING",
        ledger: Where | None = None,
    ) -> Survived:
        """Alternate `sync` and `replay`, killing `kills` runs, until a replay exits 0 after a sync
        has read the source whole since it last changed.

        Every other kill is by a failpoint of `failpoints` (in turn, on its 1st to `max_hit`th
        hit), the others by the test's SIGKILL at a random moment of the run's own work: after 0 to
        `max_work` more ledger writes (batches written, requests recorded), then up to `jitter_s`.
        (A kill timed by the clock alone mostly meets runs with nothing left to do once the work is
        delivered, or processes already past the end of their run, so it cannot promise `kills`
        real kills.) A kill counts only if it cut a run short; one that came after the run recorded
        its end gives that run's recorded exit code. After each kill the sandbox is left to finish
        the requests the dead process had in hand (its `running` claims), as a restarted daemon
        finds them finished. `churn` changes the world before and during each run until the kills
        and the churn are done. Exit 5 fails the test: the engine left entries blocked, or unknown
        after asking alone, that it could not settle by itself."""
        ledger = self.tmp / "ledger.sqlite3" if ledger is None else ledger
        survived = Survived()
        synced = False  # a sync has read the source to its end since the last churn
        with (self.tmp / "runs.log").open("ab") as log:
            for round_no in range(kills * 4 + 40):
                survived.rounds += 1
                kind = "sync" if round_no % 2 == 0 else "replay"
                churning = churn is not None and (survived.kills < kills or bool(churn.pending()))
                if churn is not None and churning:
                    churn.before_run(round_no)
                    synced = False
                run_env, point = env, None
                if survived.kills < kills and failpoints and survived.kills % 2 == 1:
                    point = failpoints[(survived.kills // 2) % len(failpoints)]
                    run_env = {**env, FAILPOINTS_ENV: f"{point}={rng.randint(1, max_hit)}"}
                runs_before = count(ledger, "SELECT count(*) FROM runs")
                log.write(f"== round {round_no}: {kind} {point or ''}\n".encode())
                log.flush()
                proc = subprocess.Popen(
                    self.command(kind, "-c", str(config), "--log-level", log_level),
                    env=run_env,
                    stdout=log,
                    stderr=log,
                    cwd=self.tmp,
                )
                # Churn and kills meet the run itself, not the interpreter's start-up.
                while proc.poll() is None and count(ledger, "SELECT count(*) FROM runs") == runs_before:
                    time.sleep(0.01)
                if churn is not None and churning:
                    churn.during_run(round_no)
                if survived.kills < kills and point is None:
                    kill_during_work(proc, ledger, rng, max_work, jitter_s)
                code = proc.wait(timeout=SETTLE_TIMEOUT_S)
                if code == -signal.SIGKILL and point is None:
                    code = recorded_exit(ledger, runs_before, code)
                log.write(f"== round {round_no}: exit {code}\n".encode())
                if code == -signal.SIGKILL:
                    if point is None:
                        survived.timer_kills += 1
                    else:
                        survived.failpoint_kills[point] = survived.failpoint_kills.get(point, 0) + 1
                    while sandbox_db is not None and running_claims(sandbox_db):
                        time.sleep(0.05)
                    continue
                if code == 5:
                    raise AssertionError(
                        f"{kind} exited 5: the engine left entries blocked, or unknown after asking alone, that "
                        f"it could not settle by itself; ledger {ledger_states(ledger)}; see {self.tmp / 'runs.log'}"
                    )
                assert code in (0, 4), f"{kind} exited {code}; see {self.tmp / 'runs.log'}"
                synced = synced or (kind == "sync" and not churning)
                if survived.kills >= kills and code == 0 and kind == "replay" and synced:
                    return survived
        shown = "" if churn is None else f", churn still to show {churn.pending()}"
        raise AssertionError(
            f"never settled after {survived} (ledger {ledger_states(ledger)}{shown}); see {self.tmp / 'runs.log'}"
        )


@pytest.fixture
def rel(tmp_path: Path, capfd: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> Iterator[ReliabilityKit]:
    assert SCRIPT.exists(), f"the console script {SCRIPT} is not installed: run `pip install -e .`"
    kit = ReliabilityKit(tmp_path, SecretScan())
    yield kit
    out, err = capfd.readouterr()
    if request.config.getoption("capture") != "no":  # give the output back to pytest's report
        sys.stdout.write(out)
        sys.stderr.write(err)
    try:
        leaks = kit.scan.leaks([tmp_path, *kit.folders], out + err)
    finally:
        for folder in kit.folders:
            for path in [folder, *folder.rglob("*")]:
                if path.is_dir():
                    path.chmod(0o755)
            shutil.rmtree(folder)
    assert not leaks, f"an API secret leaked into {leaks}"
