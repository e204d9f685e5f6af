"""What a sync does per record before the ledger, each step alone, for one checkout or two compared
in alternating runs: the source's read (csv, or the same contacts as jsonl), the plugin boundary's
check, the raw digest, the mapping (`payload_noting`), the mapping with the payload's encoding
(`to_mapped`), the digest and person key the ledger makes of each payload, the ledger's enqueue of
the mapped records (on SQLite, `synchronous = NORMAL`: its CPU, not the disk's) and all of
`extract()` on the csv source; on the peers' contacts and the harness's mapping.

    .venv/bin/python benchmarks/read_side.py --records 20000 --rounds 3
    .venv/bin/python benchmarks/read_side.py --base ../base-checkout     # base and this tree, alternated
    .venv/bin/python benchmarks/read_side.py --instructions "raw digest" --base ../base-checkout   # valgrind's count

Each run is a child process with PYTHONPATH set to the checkout it measures; each step's figure is
its CPU time (time.process_time) per record, the second best of 7 passes in that child, and the
medians and ranges over the runs are printed per step. A step's figure is its own cost alone, not
its share of a whole sync (sync_ab.py measures that).
"""

from __future__ import annotations

import argparse
import csv
import gc
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import alternately

HERE = Path(__file__).resolve().parents[1]
PASSES = 7


def _per_record(fn: Callable[[], object], records: int) -> float:
    times = []
    for _ in range(PASSES):
        gc.collect()
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return sorted(times)[1] / records * 1e6


def measure(csv_path: Path, jsonl_path: Path, records: int, once: str | None = None) -> dict[str, float]:
    """Every step on these files, in this process (its connector is the checkout on PYTHONPATH);
    `once`: only that step, one pass, unmeasured (what `--instructions` counts under valgrind)."""
    from csv_read import MAPPING

    from connector.delivery._boundary import Checker
    from connector.delivery.extract import to_mapped
    from connector.keys import content_hash, person_key
    from connector.mapping import Mapping
    from connector.plugins import build_source

    extract = importlib.import_module(
        "connector.delivery.extract"
    )  # the module: the package's `extract` is its function

    sources = {
        kind: build_source("bench", kind, {"path": str(path), "primary_key": "id"})
        for kind, path in (("csv", csv_path), ("jsonl", jsonl_path))
    }
    mapping = Mapping.from_config(MAPPING, where="sources.bench.mapping")
    items = list(sources["csv"].read(None))
    # what the ledger hashes and keys per record (`keys.content_hash`, `keys.person_key`)
    bodies = [body for body, _ in (mapping.encoded_noting(item.data) for item in items) if isinstance(body, bytes)]

    def read(kind: str) -> Callable[[], object]:
        return lambda: sum(1 for _ in sources[kind].read(None))

    # as a sync checks them: the states walked unless the source spells its own (a checkout before 2026-11-27 walks them)
    walked = not getattr(sources["csv"], "_spells_its_states", lambda: False)()

    digests = extract.raw_digests(mapping.version, items) if hasattr(extract, "raw_digests") else [None] * len(items)
    mapped = [to_mapped(mapping, item, raw) for item, raw in zip(items, digests, strict=True)]

    def enqueue() -> None:
        """The mapped records into a new ledger, a chunk at a time as extract does (the ledger's own
        set-up is the same at every size, so the difference of two sizes leaves it out)."""
        from connector.ledger import Ledger

        with (
            tempfile.TemporaryDirectory(prefix="capture-sync-read-side-") as tmp,
            Ledger(Path(tmp) / "ledger.sqlite3", synchronous="NORMAL") as ledger,
        ):
            for start in range(0, len(mapped), CHUNK):
                ledger.enqueue("bench", mapping.version, mapped[start : start + CHUNK], {"n": start})

    def whole() -> None:
        """`extract()` itself on the csv source, as a sync runs it: read, check, digests, mapping and
        enqueue, a chunk at a time, into a new ledger."""
        from connector.delivery.job import SourceJob
        from connector.delivery.report import RunReport
        from connector.ledger import Ledger

        with (
            tempfile.TemporaryDirectory(prefix="capture-sync-read-side-") as tmp,
            Ledger(Path(tmp) / "ledger.sqlite3", synchronous="NORMAL") as ledger,
        ):
            extract.extract(
                ledger, SourceJob("bench", sources["csv"], mapping), CHUNK, RunReport(), extract.NoProgress()
            )

    def check() -> None:
        checker = Checker(states=walked)
        for item in items:
            checker.check(item)

    steps: dict[str, Callable[[], object]] = {
        "csv source": read("csv"),
        "jsonl source": read("jsonl"),
        "plugin boundary": check,
        "raw digest": (
            (lambda: extract.raw_digests(mapping.version, items))
            if hasattr(extract, "raw_digests")
            else (lambda: [extract.raw_digest(mapping.version, item) for item in items])  # a checkout before 2026-11-27
        ),
        "map (payload_noting)": lambda: [mapping.payload_noting(item.data) for item in items],
        "map and encode (to_mapped)": lambda: [to_mapped(mapping, item) for item in items],
        "digest and key": lambda: [person_key("bench", str(n), content_hash(body), 0) for n, body in enumerate(bodies)],
        "enqueue": enqueue,
        "extract (all of it)": whole,
    }
    if once is not None:
        # the set-up's objects frozen out of the collector's walks: a full collection falling inside the
        # step would otherwise walk them all, tens of thousands of instructions per record by chance
        gc.collect()
        gc.freeze()
        if once in steps:
            steps[once]()
        return {}
    return {name: _per_record(fn, records) for name, fn in steps.items()}


STEPS = (
    "csv source",
    "jsonl source",
    "plugin boundary",
    "raw digest",
    "map (payload_noting)",
    "map and encode (to_mapped)",
    "digest and key",
    "enqueue",
    "extract (all of it)",
)
CHUNK = 1_000  # records per enqueue transaction: a sync's chunk once grown (`DeliverySettings.chunk_size`)
SMALL, LARGE = 1_000, 4_000


def _instructions(tree: Path, folder: Path, step: str) -> float:
    """Instructions per record of one pass of `step`, counted by valgrind (callgrind) with a fixed
    hash seed, so the figure holds on a busy machine: the count at LARGE records less the count at
    SMALL, each less its set-up alone (the step named `none`), over the difference in records."""
    env = _env(tree) | {"PYTHONHASHSEED": "0"}
    counts = {}
    for size in (SMALL, LARGE):
        paths = [str(folder / f"{size}.csv"), str(folder / f"{size}.jsonl")]
        for name in (step, "none"):
            command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__]
            command += ["--child", *paths, "--records", str(size), "--once", name]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            found = re.search(r"Collected : (\d+)", done.stderr)
            if found is None:
                raise SystemExit(f"no count from valgrind: {done.stderr[-500:]}")
            counts[size, name] = int(found[1])
    own = {size: counts[size, step] - counts[size, "none"] for size in (SMALL, LARGE)}
    return (own[LARGE] - own[SMALL]) / (LARGE - SMALL)


def _count_instructions(trees: dict[str, Path], steps: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="capture-sync-read-side-") as tmp:
        for size in (SMALL, LARGE):
            csv_path, jsonl_path = _write_inputs(Path(tmp), size)
            csv_path.rename(Path(tmp) / f"{size}.csv")
            jsonl_path.rename(Path(tmp) / f"{size}.jsonl")
        print(f"instructions per record (valgrind, the count at {LARGE:,} records less the count at {SMALL:,})")
        for step in steps:
            cells = [f"{name} {_instructions(tree, Path(tmp), step):,.0f}" for name, tree in trees.items()]
            print(f"  {step:28s} " + "   ".join(cells), flush=True)


def _write_inputs(folder: Path, records: int) -> tuple[Path, Path]:
    from contacts import generate

    csv_path, jsonl_path = folder / "contacts.csv", folder / "contacts.jsonl"
    generate(csv_path, records)
    with open(csv_path, newline="", encoding="utf-8") as rows, open(jsonl_path, "w", encoding="utf-8") as out:
        for row in csv.DictReader(rows):
            out.write(json.dumps({**row, "id": int(row["id"])}) + "\n")
    return csv_path, jsonl_path


def _env(tree: Path) -> dict[str, str]:
    """A child's environment: the checkout it measures first on its path, then the benchmarks'."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), str(HERE / "benchmarks"), str(HERE / "benchmarks" / "peers")]),
    }


def _child(tree: Path, csv_path: Path, jsonl_path: Path, records: int) -> dict[str, float]:
    env = _env(tree)
    command = [sys.executable, __file__, "--child", str(csv_path), str(jsonl_path), "--records", str(records)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another checkout of capture-sync, run alternately with this one")
    parser.add_argument(
        "--instructions",
        nargs="*",
        choices=STEPS,
        metavar="STEP",
        help="count each step's instructions per record under valgrind instead of timing them "
        "(all steps when none is named; needs valgrind)",
    )
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--once", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child, args.records, args.once)))
        return
    sys.path[:0] = [str(HERE / "benchmarks" / "peers")]
    trees = {"this": HERE} | ({"base": args.base.resolve()} if args.base else {})
    if args.instructions is not None:
        _count_instructions(trees, args.instructions or list(STEPS))
        return
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="capture-sync-read-side-") as tmp:
        csv_path, jsonl_path = _write_inputs(Path(tmp), args.records)
        for r, name, tree in alternately(trees, args.rounds):
            figures[name].append(_child(tree, csv_path, jsonl_path, args.records))
            print(
                f"round {r + 1} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in figures[name][-1].items()),
                flush=True,
            )
    print(f"\nus CPU per record, median (range) of {args.rounds} runs, {args.records:,} records")
    for step in figures["this"][0]:
        cells = []
        for name in trees:
            values = [run[step] for run in figures[name]]
            cells.append(f"{name} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"  {step:28s} " + "   ".join(cells))


if __name__ == "__main__":
    main()
