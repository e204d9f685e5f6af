"""The daemon (`capture-sync run`): each source on its schedule, a retry sweep, a clean stop.

Every pass (a source's sync or the sweep's replay) takes one shared lock, so at most one of them
drives the ledger at a time: a replay re-sends open batches, and it must never re-send one that a
sync is still waiting on. APScheduler adds the rest: one instance per job (max_instances=1), and
ticks missed while a pass ran collapse into one catch-up run (coalesce).

Refused credentials at start stop the daemon (exit 3: a setup mistake). Once it has started, a 401
never ends it: the client re-reads the credential files at once (a rotated secret written there is
verified and used); if that does not cure it, the daemon sends nothing, says so once, re-reads the
files on every credentials tick (and at once on SIGHUP), and carries on by itself, re-sending what
was left open under its same keys, as soon as they hold a pair GET /info accepts.

A broken source never stops the daemon: a source's tick is a sync of that source alone, which
checks its setup first, so a source that cannot be read (a missing file, a database down) or that
fails mid-read is reported in one line on each of its ticks while the other sources go on, and it
is read again by itself once fixed. A mistake in the config found at start stops the daemon (exit 2).

An operator steers it while it runs (connector.control): `sync` and `replay` asked over the control
socket are passes like the scheduled ones, under the same lock, and run even while paused (they are
the operator's own). A paused source's ticks read nothing; a pause of all (`*`) holds every tick and
the sweeps too, so nothing new is read or sent, while a pass in hand finishes. What is already in
the ledger settles through the other passes. Pauses are kept in the ledger: a restarted daemon stays
paused. `resume` runs at once a pass of each source it held.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from . import tracing
from .alerts import Alerts
from .api import CaptureError, Unauthorized
from .control import DaemonStopping
from .daemon_commands import OperatorCommands
from .delivery import RunReport, SourceJob, preflight, replay, sync
from .health import CREDENTIALS, SWEEP, DaemonHealth
from .health import STALLED_RETRY as STALLED
from .ledger import LedgerFenced
from .ops import raise_open_files_limit
from .problems import ConfigProblem
from .schedule import schedule_trigger

if TYPE_CHECKING:
    from .api.client import CaptureClient
    from .config import Config
    from .leadership import Leadership
    from .ledger import Ledger
    from .ops import HttpAddress
    from .ops._server import OpsServer

log = structlog.get_logger("capture_sync.daemon")

STOP_WAIT_S = 9.5  # the engine's own grace is shorter; SIGTERM to exit stays within 10 s


class Daemon(OperatorCommands):
    """Runs the configured sources on their schedules until `stop` is set."""

    def __init__(
        self,
        config: Config,
        ledger: Ledger,
        client: CaptureClient,
        stop: asyncio.Event,
        *,
        http: HttpAddress | None = None,
        leadership: Leadership | None = None,
        serves_too: Sequence[Daemon] = (),
    ) -> None:
        """`http`: where to serve /metrics, /healthz, /readyz and the status page (connector.ops);
        `serves_too`: the process's other integrations' daemons, served there as well.
        `leadership`: on a shared PostgreSQL ledger, the lease this daemon leads its integration by
        (it stands by while another daemon holds it); None: it leads alone (the daemon lock)."""
        self.config, self.ledger, self.client, self.stop = config, ledger, client, stop
        self.http, self.serves_too = http, serves_too
        self.leadership = leadership
        self.settings = config.delivery_settings()
        self.exit_code = 0
        self.health = DaemonHealth(
            tuple(s.name for s in config.sources),
            config.path,
            config.daemon.retry_stalled_every,
        )
        client.observers.append(self.health.observe)  # outage and stall times are the requests' own
        self.alerts = Alerts(
            config.alerts, self.health, ledger, config=config.path, sources=[s.name for s in config.sources]
        )
        self._one_at_a_time = asyncio.Lock()
        self._checking = asyncio.Lock()
        self._running: set[asyncio.Task[Any]] = set()
        self.paused: dict[str, float] = {}  # source (or ALL) -> paused since; kept in the ledger (`pause`)
        self._control = None
        self._control_turn = asyncio.Lock()
        if leadership is not None:
            client.send_gate = leadership.gate
            leadership.on_gain, leadership.on_loss, leadership.on_yield = self._gained, self._lost, self._wind_down
            self.health.roles = lambda: {config.integration_name: asdict(leadership.role)}

    async def _pass(
        self,
        name: str,
        start: Callable[[], Awaitable[RunReport]],
        *,
        operator: bool = False,
        sources: Sequence[str] = (),
    ) -> RunReport | None:
        """One pass of a source (`name`) or of the retry sweep, under the one-at-a-time lock. A
        scheduled pass of what is paused is skipped (checked once it holds the lock: a pause taken
        while it waited holds it too); an `operator` pass (a command through the control channel)
        runs paused or not, and its failure is raised to the operator after being logged. `sources`:
        the sources an operator's pass read, each credited with it (default: `name`)."""
        what = f"operator:{name}" if operator else name if name in (SWEEP, STALLED) else f"sync:{name}"
        task = asyncio.current_task()
        assert task is not None
        if self.leadership is not None and not self.leadership.leads:
            if operator:
                raise DaemonStopping(
                    f"this daemon stands by for integration {self.config.integration_name}: "
                    "ask again; the command reaches the daemon that leads it"
                )
            return None
        self._running.add(task)
        term: asyncio.Event | None = None
        try:
            if self.health.auth_failed and not await self.check_credentials("pass"):
                if operator:
                    raise Unauthorized(f"the API refuses the credentials: {self.health.auth_failed}")
                self.health.skipped(name)
                return None  # nothing is sent under refused credentials; said once, when they were refused
            async with self._one_at_a_time:
                term = self._halt  # stopping, standing by, or handing the lease on: no pass starts
                if term.is_set():
                    if operator:
                        raise DaemonStopping(
                            "the daemon is stopping or its lease passed to another: run the command again"
                        )
                    return None
                if not operator and self._held(name):
                    log.info(
                        "pass.held",
                        run=what,
                        paused_since=self._paused_since(name),
                        then=f"resume: capture-sync resume -c {shlex.quote(str(self.config.path))}",
                    )
                    return None
                report = await start()
            for source in sources or [name]:
                self.health.passed(source, report)
            if report.auth_failed:
                self._refused(report.halted_by or "authentication failed", run=what)
            elif report.blocked_total:
                log.warning(
                    "entries are blocked: see `capture-sync ledger list --state blocked`", blocked=report.blocked_total
                )
            return report
        except LedgerFenced as exc:  # the lease passed while this pass ran: nothing more of it is recorded or sent
            log.warning(
                "lease.fenced", run=what, reason=str(exc), then="the next leader resends it under its same keys"
            )
            if self.leadership is not None and term is not None:
                self.leadership.lost(str(exc), term)
            if operator:
                raise DaemonStopping(str(exc)) from None
        except (
            ConfigProblem
        ) as exc:  # the source changed under the daemon (a column gone): fix the config or the source
            log.error("source.misconfigured", run=what, problems=exc.problems)
            if operator:
                raise
        except Exception as exc:  # one failing pass (a missing file, a locked ledger) must not end the daemon
            log.error(
                "pass failed; the next tick tries again",
                run=what,
                error=f"{type(exc).__name__}: {exc}",
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            if operator:
                raise
        finally:
            await self.alerts.check()  # after each pass too: a tick would judge only the last of several passes
            self._running.discard(task)
        return None

    async def sync_source(self, job: SourceJob) -> None:
        await self._pass(
            job.name,
            lambda: sync(self.ledger, self.client, [job], self.settings, stop=self._halt, on_info=self.health.answered),
        )

    def _refused(self, reason: str, **context: Any) -> None:
        if self.health.auth_failed is None:
            log.error(
                "daemon.auth_failed",
                reason=reason,
                **context,
                then="nothing is sent until the credentials work: fix the files (a rotated secret goes into "
                "its file); they are read again on every credentials tick and at once on SIGHUP",
            )
        self.health.refused(reason, self.client.refused_since)

    async def check_credentials(self, trigger: str = "tick") -> bool:
        """Read the credentials again and, when they differ from the pair in use or that pair is
        refused, verify them with GET /info and use them. True when a working pair is in use."""
        async with self._checking:
            pair = await asyncio.to_thread(self.config.reload_credentials)
            if pair is None:
                return self.health.auth_failed is None
            if self.health.auth_failed is None and self.client.uses(pair):
                return True
            if trigger == "pass" and self.client.uses(pair):
                return False  # the refused pair unchanged: verifying it is one more refused request
            try:
                self.health.answered(await self.client.use_credentials(pair))
            except Unauthorized as exc:
                if self.health.auth_failed is None:  # the pair in use still works: keep it
                    log.error(
                        "credentials.refused",
                        trigger=trigger,
                        reason=str(exc),
                        then="the pair in use goes on being used; fix the files",
                    )
                    return True
                self._refused(str(exc), trigger=trigger)
                return False
            except CaptureError as exc:
                log.warning("credentials.unverified", trigger=trigger, reason=str(exc))
                return self.health.auth_failed is None  # an outage says nothing about the pair
            if self.health.auth_failed is not None:
                self.health.accepted()
                log.info("daemon.auth_recovered", trigger=trigger, credentials=pair.origins())
                self._start(self.sweep())  # what the refusal left open goes now, under its same keys
            return True

    async def credentials_tick(self) -> None:
        if self.health.auth_failed:
            await self.check_credentials()

    def _start(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def sweep(self) -> None:
        """Re-send what an outage left unsettled; skips the API call when nothing is left. Batches a
        non-retryable answer stopped are not sent (spec 4.4 rule 4): they wait for `replay`."""
        if self._held(SWEEP) or not await self._counted(self.ledger.sweepable_count):
            return
        await self._pass(
            SWEEP,
            lambda: replay(
                self.ledger,
                self.client,
                self.settings,
                include_stalled=False,
                stop=self._halt,
                on_info=self.health.answered,
            ),
        )

    async def retry_stalled(self) -> None:
        """`[daemon] retry_stalled_every`: the operator's own schedule for re-sending stalled batches."""
        if self._held(STALLED) or not await self._counted(self.ledger.unsettled_count):
            return
        await self._pass(
            STALLED,
            lambda: replay(self.ledger, self.client, self.settings, stop=self._halt, on_info=self.health.answered),
        )

    def _scheduler(self) -> AsyncIOScheduler:
        scheduler = AsyncIOScheduler(job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None})
        now = datetime.now(UTC)
        for source in self.config.sources:
            trigger = schedule_trigger(source.schedule)
            first = {"next_run_time": now} if isinstance(trigger, IntervalTrigger) else {}
            scheduler.add_job(
                self.sync_source, trigger, args=[source.job], id=f"source:{source.name}", name=source.name, **first
            )
        scheduler.add_job(self.sweep, schedule_trigger(self.config.daemon.retry_sweep), id=SWEEP, name=SWEEP)
        if self.config.daemon.retry_stalled_every is not None:
            scheduler.add_job(
                self.retry_stalled,
                schedule_trigger(self.config.daemon.retry_stalled_every),
                id=STALLED,
                name=STALLED,
            )
        scheduler.add_job(
            self.credentials_tick,
            schedule_trigger(self.config.daemon.credentials_check),
            id=CREDENTIALS,
            name=CREDENTIALS,
        )
        if self.config.alerts:  # a tick for what changes between passes: an outage's length, a stale source
            scheduler.add_job(
                self.alerts.check, schedule_trigger(self.config.daemon.alerts_check), id="alerts", name="alerts"
            )
        return scheduler

    async def serve(self) -> int:
        """Until SIGTERM/SIGINT (or failed authentication): 0 on a clean stop, 3 on bad credentials.
        A config problem raises ConfigProblem before anything is read or sent. Every line logged for
        this integration's work (its passes, deliveries, lease, control) carries `integration=`: the
        process may run several, each serving in its own task."""
        structlog.contextvars.bind_contextvars(integration=self.config.integration_name)
        tracing.name_integration(self.config.path.stem)  # its spans too, not the last client made's
        open_files = raise_open_files_limit()  # before any client of the endpoint can take one
        found = await asyncio.to_thread(preflight, self.config.jobs())
        if found.config_problems:
            raise ConfigProblem(found.config_problems)
        self.paused = await asyncio.to_thread(self.ledger.paused)
        if self.paused:
            log.warning(
                "daemon.starts_paused",
                paused=sorted(self.paused),
                then=f"capture-sync resume -c {shlex.quote(str(self.config.path))}",
            )
        if self.leadership is None:  # else while it leads (`_gained`)
            await self._turn_control(True)  # at once: a command asked while GET /info waits finds it
        leading = asyncio.ensure_future(self.leadership.run(self.stop)) if self.leadership is not None else None
        try:
            await self._serve_until_stopped(found.unavailable, open_files)
        finally:
            if leading is not None and self.leadership is not None:
                await self.leadership.close()
                await leading
            await self._turn_control(False)
        log.info("daemon stopped", exit_code=self.exit_code)
        return self.exit_code

    async def _serve_until_stopped(self, unavailable: dict[str, str], open_files: int) -> None:
        """Ask the API, start the schedule and the endpoints, wait for the stop, then wind down."""
        try:  # refused credentials at start are a setup mistake: exit 3
            self.health.answered(await self.client.info(retry=False))
        except Unauthorized:
            raise
        except CaptureError as exc:  # an outage: the passes ask again
            log.warning("api.unreachable", reason=str(exc), then="starting; each pass asks again")
        for path, mode in self.config.exposed_files():
            log.warning("file.readable_by_others", file=str(path), mode=f"{mode:04o}", fix=f"chmod 600 {path}")
        # Not a line per tick, nor a warning per tick skipped or coalesced while a pass runs: both
        # are the intended behaviour. A job's unexpected error is still logged (ERROR).
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        scheduler = self._scheduler()
        self.health.next_run = lambda job: _next_run(scheduler, job)
        await self.alerts.check()  # the ledger's figures (stalled batches left by an earlier run) from the start
        ops = await self._serve_http()
        scheduler.start()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, lambda: self._start(self.check_credentials("SIGHUP")))
        log.info(
            "daemon started",
            sources=[s.name for s in self.config.sources],
            ledger=self.config.ledger_name,
            unavailable=unavailable,  # said now: a source's first tick may be an hour away
            open_files_limit=open_files,
        )
        try:
            await self.stop.wait()
        finally:
            # Pause, let the passes in hand finish, and only then shut down: APScheduler's asyncio
            # executor cancels the jobs still running when it shuts down.
            scheduler.pause()
            http_stopped = asyncio.ensure_future(ops.stop() if ops else asyncio.sleep(0))
            if self._running:
                await asyncio.wait(set(self._running), timeout=STOP_WAIT_S)
            scheduler.shutdown(wait=False)
            await self.alerts.aclose()
            loop.remove_signal_handler(signal.SIGHUP)
            await http_stopped

    async def _serve_http(self) -> OpsServer | None:
        """Start the operations endpoints when asked to; an address it cannot listen on is a config problem."""
        if self.http is None:
            return None
        from .ops import start_ops  # prometheus-client and uvicorn load only when serving

        try:
            return await start_ops(self.http, self.config, self.health, self.client, self, more=self.serves_too)
        except OSError as exc:
            raise ConfigProblem([f"http address {self.http}: cannot listen there: {exc.strerror or exc}"]) from None

    async def once(self) -> RunReport:
        """`run --once`: every source once, then drain the ledger, as a cron job would."""
        self.health.retry_stalled_every = None  # nothing is scheduled: a stall waits for `replay`
        return await sync(self.ledger, self.client, self.config.jobs(), self.settings, stop=self.stop)


def _next_run(scheduler: AsyncIOScheduler, job_id: str) -> float | None:
    job = scheduler.get_job(job_id)
    at = getattr(job, "next_run_time", None)  # a job of a scheduler not started yet has none
    return at.timestamp() if at is not None else None
