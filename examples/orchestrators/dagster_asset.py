"""capture-sync as a Dagster asset: each materialization is one `sync` (read the sources, deliver
everything the ledger holds), its counts shown as the asset's metadata.

    python dagster_asset.py [CONFIG]        # Dagster installed: materialize the asset in-process;
                                            # else run one sync directly
    dagster dev -f dagster_asset.py         # with CAPTURE_SYNC_CONFIG=/path/to/capture-sync.toml

An outage (connector.Unsettled, exit 4) is retried later: the ledger re-sends the same requests with
the same keys, so nothing is doubled. Entries that need a person (NeedsAttention, 5), refused
credentials (AuthenticationFailed, 3) and config errors (2) fail the run without a retry.
"""

import os
import sys

import connector

try:
    import dagster as dg
except ImportError:  # not installed: `__main__` below runs the sync directly
    dg = None

if dg is not None:

    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=3, delay=300))
    def crm_contacts(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        try:
            report = connector.sync(os.environ.get("CAPTURE_SYNC_CONFIG", "capture-sync.toml"))
        except connector.Unsettled:
            raise  # retried by the policy: time cures an outage
        except connector.CaptureSyncError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from exc  # a person must act first
        context.log.info(f"capture-sync run {report.run_id}: {report.captured} captured, {report.rejected} rejected")
        return dg.MaterializeResult(metadata={**report.counts(), "run": report.run_id})

    defs = dg.Definitions(assets=[crm_contacts])


if __name__ == "__main__":
    config = os.environ["CAPTURE_SYNC_CONFIG"] = (
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CAPTURE_SYNC_CONFIG", "capture-sync.toml")
    )
    if dg is None:
        print(connector.sync(config).to_dict())
    else:
        result = dg.materialize([crm_contacts])
        print(dict(result.asset_materializations_for_node("crm_contacts")[0].metadata))
