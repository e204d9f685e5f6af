"""`make audit`: known vulnerabilities in the packages installed in this environment.

pip-audit asks an advisory service (PyPI's JSON API) about every installed package. Where that
service cannot be reached, or answers "not found" for everything (a mirror without it), pip-audit
still says "No known vulnerabilities found", having audited nothing. This script tells the two
apart: a package pip-audit could not audit is named, and then only the advisories vendored in
tools/advisories.toml (those our floors were raised past) are checked, offline. That is a floor
check, not an audit, and the output says so.

Exit 0: nothing found (read the output to know whether it was a full audit); 1: a vulnerability, or
a package below a vendored fix; 2: pip-audit could not run at all (the floor check still ran).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from packaging.version import Version

ADVISORIES = Path(__file__).with_name("advisories.toml")
PIP_AUDIT = [
    sys.executable,
    "-m",
    "pip_audit",
    "--local",
    "--skip-editable",
    "--format",
    "json",
    "--progress-spinner",
    "off",
]


def vendored() -> list[dict[str, str]]:
    advisories: list[dict[str, str]] = tomllib.loads(ADVISORIES.read_text(encoding="utf-8"))["advisory"]
    return advisories


def below_vendored_fixes() -> list[str]:
    """Installed packages older than a vendored advisory's fix (one not installed is not at risk)."""
    found = []
    for advisory in vendored():
        try:
            installed = version(advisory["package"])
        except PackageNotFoundError:
            continue
        if Version(installed) < Version(advisory["fixed_in"]):
            fix = advisory["fixed_in"]
            found.append(f"{advisory['package']} {installed} < {fix}: {advisory['id']}, {advisory['summary']}")
    return found


def pip_audit() -> dict[str, Any] | None:
    """pip-audit's JSON report, or None (its error printed) when it produced none."""
    run = subprocess.run(PIP_AUDIT, capture_output=True, text=True, check=False)
    try:
        report: dict[str, Any] = json.loads(run.stdout)
    except json.JSONDecodeError:
        print(f"pip-audit could not run (exit {run.returncode}):\n{run.stderr.strip()}", file=sys.stderr)
        return None
    return report


def main() -> int:
    report = pip_audit()
    deps = [d for d in report["dependencies"] if "editable" not in d.get("skip_reason", "")] if report else []
    vulnerable = [d for d in deps if d.get("vulns")]
    skipped = [d for d in deps if "skip_reason" in d]
    for dep in vulnerable:
        for vuln in dep["vulns"]:
            fixed = ", ".join(vuln.get("fix_versions") or ["none yet"])
            print(f"VULNERABLE {dep['name']} {dep['version']}: {vuln['id']} (fixed in {fixed})")
    audited = len(deps) - len(skipped)
    if report is not None and not skipped:
        print(f"pip-audit: {audited} packages audited against the online advisory data, {len(vulnerable)} vulnerable")
        return 1 if vulnerable else 0
    print(
        f"NOT A FULL AUDIT: pip-audit audited {audited} of {len(deps)} packages "
        f"({skipped[0]['skip_reason'] if skipped else 'it did not run'}{', ...' if len(skipped) > 1 else ''}); "
        f"checking offline only the {len(vendored())} advisories in {ADVISORIES.name}",
        file=sys.stderr,
    )
    below = below_vendored_fixes()
    for line in below:
        print(f"BELOW FIX {line}")
    if vulnerable or below:
        return 1
    print(f"none of the {len(vendored())} vendored advisories applies to the installed packages")
    return 2 if report is None else 0


if __name__ == "__main__":
    sys.exit(main())
