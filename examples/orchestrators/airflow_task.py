"""capture-sync as an Airflow task: a DAG with one TaskFlow task that runs `sync` every 15 minutes.

    python airflow_task.py [CONFIG]         # one sync directly, Airflow installed or not
    cp airflow_task.py $AIRFLOW_HOME/dags/  # with CAPTURE_SYNC_CONFIG set for the workers, then
    airflow dags test capture_sync          # one run through Airflow (tried with Airflow 3.3)

An outage (connector.Unsettled, exit 4) fails the try and Airflow retries it later: the ledger
re-sends the same requests with the same keys. Entries that need a person (NeedsAttention, 5),
refused credentials (AuthenticationFailed, 3) and config errors (2) fail the task without retries
(AirflowFailException). The report goes to XCom as the JSON object `sync --json` prints.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta
from typing import Any

import connector

try:
    from airflow.exceptions import AirflowFailException  # type: ignore[import-not-found]

    try:
        from airflow.sdk import dag, task  # type: ignore[import-not-found]  # Airflow 3
    except ImportError:
        from airflow.decorators import dag, task  # type: ignore[import-not-found]  # Airflow 2
except ImportError:  # not installed: `__main__` below runs the sync directly
    dag = None

if dag is not None:

    @dag(schedule=timedelta(minutes=15), start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1)
    def capture_sync() -> None:
        @task(retries=3, retry_delay=timedelta(minutes=5))
        def sync_contacts() -> dict[str, Any]:
            try:
                return connector.sync(os.environ.get("CAPTURE_SYNC_CONFIG", "capture-sync.toml")).to_dict()
            except connector.Unsettled:
                raise  # retried: time cures an outage
            except connector.CaptureSyncError as exc:
                raise AirflowFailException(str(exc)) from exc  # a person must act first

        sync_contacts()

    capture_sync_dag = capture_sync()


if __name__ == "__main__":  # Airflow 3 runs a DAG once only from its DAGs folder (`airflow dags test`)
    config = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CAPTURE_SYNC_CONFIG", "capture-sync.toml")
    print(connector.sync(config).to_dict())
