"""A whole `capture-sync sync` of the peers' contacts, its CPU per record, for one checkout or two
compared in alternating runs: on a shared machine absolute figures move 20-40 % from run to run,
so a change is judged against its base in the same sitting, never against last week's table.

    .venv/bin/python benchmarks/sync_ab.py --records 30000 --rounds 3
    .venv/bin/python benchmarks/sync_ab.py --base ../base-checkout      # base and this tree, alternated
    .venv/bin/python benchmarks/sync_ab.py --profile sync.txt           # one run under py-spy (pip install py-spy)

Each run is the `capture-sync` of this venv on a fresh sandbox child and a fresh ledger (SQLite,
synchronous = FULL, no rate limit), with PYTHONPATH set to the checkout it measures; the figure is
that child's own user + sys CPU (os.wait4) over the records, start-up included.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import sys
import tempfile
from pathlib import Path

from harness import CLI, ChildRun, alternately, delivered, run_child, sandbox, write_config

sys.path.insert(0, str(Path(__file__).with_name("peers")))
from contacts import generate  # benchmarks/peers is not a package

HERE = Path(__file__).resolve().parents[1]


def one_sync(checkout: Path, csv: Path, records: int, folder: Path, profile: Path | None = None) -> ChildRun:
    with sandbox(folder) as api:
        config = write_config(folder, api, csv)
        command = [str(CLI), "sync", "-c", str(config)]
        if profile is not None:  # --gil: only the thread holding the GIL, so waits do not count
            spy = Path(sys.executable).with_name("py-spy")
            command = [
                str(spy) if spy.exists() else "py-spy",
                "record",
                "--gil",
                "-r",
                "400",
                "-f",
                "raw",
                "-o",
                str(profile),
                "--",
                *command,
            ]
        run = run_child(command, folder / "sync.log", env={**api.env(), "PYTHONPATH": str(checkout)})
    taken = delivered(folder / "ledger.sqlite3")
    if run.exit_code != 0 or taken != records:
        raise RuntimeError(f"{checkout}: exit {run.exit_code}, {taken} of {records} delivered; see {folder}")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another checkout of capture-sync, run alternately with this one")
    parser.add_argument("--profile", type=Path, help="write py-spy's raw stacks of one run of this tree here")
    args = parser.parse_args()
    trees = {"this": HERE} | ({"base": args.base.resolve()} if args.base else {})
    for tree in trees.values():  # harness compiles this tree only: with PYTHONDONTWRITEBYTECODE set,
        for package in ("connector", "sources"):  # a base without bytecode compiled every module per run
            compileall.compile_dir(tree / package, quiet=1)
    with tempfile.TemporaryDirectory(prefix="capture-sync-ab-") as tmp:
        csv = Path(tmp) / "contacts.csv"
        generate(csv, args.records)
        if args.profile:
            run = one_sync(HERE, csv, args.records, Path(tmp) / "profile", args.profile.resolve())
            print(f"profiled: {run.per_record_us(args.records):.1f} us CPU/record (under py-spy); {args.profile}")
            return
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        for r, name, tree in alternately(trees, args.rounds):
            run = one_sync(tree, csv, args.records, Path(tmp) / f"{name}-{r}")
            cpu[name].append(run.per_record_us(args.records))
            print(f"round {r + 1} {name}: {cpu[name][-1]:.1f} us CPU/record, wall {run.wall_s:.2f} s", flush=True)
    for name, values in cpu.items():
        print(
            f"{name} ({trees[name]}): median {statistics.median(values):.1f} us CPU/record "
            f"({min(values):.1f}-{max(values):.1f}), {args.records:,} records, {args.rounds} runs"
        )
    if args.base:
        ratio = statistics.median(cpu["this"]) / statistics.median(cpu["base"])
        print(f"this / base: {ratio:.2f}")


if __name__ == "__main__":
    os.chdir(Path(__file__).parent)
    main()
