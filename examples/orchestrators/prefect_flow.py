"""capture-sync in a Prefect flow: a task that runs one `sync`, retried on an outage only.

    python prefect_flow.py [CONFIG]         # Prefect installed: run the flow (a temporary local
                                            # server if none is configured); else one sync directly
    feed_crm.serve(...) / prefect deploy    # as any flow, with CAPTURE_SYNC_CONFIG set

An outage (connector.Unsettled, exit 4) is retried after five minutes: the ledger re-sends the same
requests with the same keys, so nothing is doubled. Anything else (entries that need a person,
refused credentials, a config error) fails the flow at once.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import connector

try:
    from prefect import flow, task
except ImportError:  # not installed: `__main__` below runs the sync directly
    flow = None

if flow is not None:

    def _outage(_task: Any, _run: Any, state: Any) -> bool:
        """Retry only what time cures: an API that did not take everything."""
        try:
            state.result()
        except connector.Unsettled:
            return True
        except Exception:
            return False
        return False

    @task(name="capture-sync", retries=3, retry_delay_seconds=300, retry_condition_fn=_outage)
    def sync_contacts(config: str) -> dict[str, Any]:
        return connector.sync(config).to_dict()  # a non-zero exit code raises, with the report

    @flow(name="feed-crm", log_prints=True)
    def feed_crm(config: str = "capture-sync.toml") -> dict[str, Any]:
        report = sync_contacts(config)
        print(f"capture-sync run {report['run']}: {report['counts']['captured']} captured")
        return report


if __name__ == "__main__":
    config = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CAPTURE_SYNC_CONFIG", "capture-sync.toml")
    print(connector.sync(config).to_dict() if flow is None else feed_crm(config))
