"""`make bench-peers` keeps working: the peers harness at a tiny size runs every contender to the
end, and each captures every row exactly once, with and without the rate limit. It needs dlt and
the Singer SDK, which live in .venv-peers only (`make bench-peers` creates it): without that venv
the test is skipped, and `make test` never installs them. Timings are noise at this size and are
not checked; the figures are for `make bench-peers` to report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
RUN = ROOT / "benchmarks" / "peers" / "run.py"
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"


def _peers_installed() -> bool:
    if not PEERS_PYTHON.exists():
        return False
    probe = subprocess.run(
        [str(PEERS_PYTHON), "-c", "import dlt, singer_sdk, httpx, phonenumbers"], capture_output=True
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _peers_installed(), reason="no .venv-peers with dlt and the Singer SDK (`make bench-peers`)")
def test_every_contender_captures_each_row_once_with_and_without_the_rate_limit(tmp_path):
    output = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            str(RUN),
            "--rounds",
            "1",
            "--records",
            "300",
            "--rate-records",
            "200",
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(output.read_text())
    assert set(results["summary"]) == {"capture-sync", "dlt", "singer-sdk", "httpx"}
    for name, s in results["summary"].items():
        assert s["all_exited_0"], name
        assert (s["captured"], s["doubled"]) == (300, 0), name
        limited = s["rate_limited"]["1 s sliding"]
        assert (limited["captured"], limited["doubled"]) == (200, 0), name
        assert s["cpu_us_per_record"] > 0 and s["peak_rss_mb"] > 0, name
    assert len(results["runs"]) == 8
    assert "capture-sync and its peers" in done.stdout
