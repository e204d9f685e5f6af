"""Bad input through the whole pipeline: arbitrary rows (any unicode, control characters, NULs,
1 MB fields, numbers where text belongs, huge integers, missing columns, a truncated last line)
in a CSV file, a JSONL file and a plugin source handing over raw Python values are mapped, put
in the ledger and sent to the sandbox by the library's sync(). Nothing raises, and every row ends
captured (or a duplicate of an earlier example's) or rejected with its reasons; the truncated
last line is taken once its writer finishes it. Then the issue's property through the CLI: bad
rows spliced among good ones (bytes that are not UTF-8, cut lines, empty keys, NUL and control
characters, overlong fields, wrong types) are rejected with a reason naming their line, or their
id for the mapping's rejections, every good row is captured once, and `sync` exits 0.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from connector.api import CaptureClient
from connector.config import load_config
from connector.delivery import SourceJob, sync
from connector.ledger import Ledger
from connector.source import Record, Source

FIELDS = ["First", "Last", "Email", "Phone", "Plan"]
HUGE_DIGITS = "7" * 5000  # beyond Python's 4300-digit int <-> str limit
SPECIAL = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "x" * 1_000_000,
    HUGE_DIGITS,
    "\r\n",
    '"',
    "\ufeff",
    "e\u0301\u200b",
    "ada@example.org",
    "ADA@EXAMPLE.ORG ",
    "+1 202 555 0100",
    "0049 30 1234567",
    "{First}",
    "\u202e",
]
text = st.one_of(st.text(max_size=30), st.sampled_from(SPECIAL))
json_only = st.one_of(
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
text_rows = st.lists(st.lists(text, min_size=1, max_size=len(FIELDS)), min_size=1, max_size=6)
json_rows = st.lists(st.dictionaries(st.sampled_from(FIELDS), st.one_of(text, json_only)), min_size=1, max_size=6)
raw_values = st.one_of(text, json_only, st.sampled_from([7 * 10**4999, -(10**4300), 10**4299]), st.binary(max_size=5))
raw_rows = st.lists(st.dictionaries(st.sampled_from(FIELDS), raw_values), min_size=1, max_size=6)


class RawSource(Source[Any]):
    """A plugin source that hands over whatever Python values its rows hold."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        super().__init__("raw", None)
        self.rows = rows

    def read(self, state: Any | None) -> Iterator[Record]:
        start = 0 if state is None else state + 1
        for n in range(start, len(self.rows)):
            yield Record(str(n), self.rows[n], n)


def csv_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    out = csv.writer(buffer)
    out.writerow(FIELDS)
    out.writerows(rows)
    return buffer.getvalue()


def jsonl_text(rows: list[dict[str, Any]]) -> str:
    # A huge integer as a JSON number: json.dumps itself cannot write one.
    return "".join(json.dumps(row).replace(json.dumps(HUGE_DIGITS), HUGE_DIGITS) + "\n" for row in rows)


def write_config(folder: Path, base_url: str = "http://127.0.0.1:9/api") -> Path:
    """A csv and a jsonl source with every kind of mapping rule; the URL matters to the CLI only."""
    path = folder / "capture-sync.toml"
    mapping = """
[sources.mapping]
name = { template = "{First} {Last}" }
first_name = "First"
email = { field = "Email", transform = "lower" }
phone = { field = "Phone", transform = "e164", region = "US" }
custom_fields.plan = "Plan"
"""
    path.write_text(
        f"""[capture]
base_url = "{base_url}"
batch_size = 4

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "csv"
type = "csv"
path = "contacts.csv"
{mapping}
[[sources]]
name = "jsonl"
type = "jsonl"
path = "contacts.jsonl"
{mapping}""",
        encoding="utf-8",
    )
    return path


def run_sync(folder: Path, base_url: str, key: str, secret: str, raw: list[dict[str, Any]]) -> None:
    cfg = load_config(write_config(folder))
    jobs = [*cfg.jobs(), SourceJob("raw", RawSource(raw), cfg.jobs()[0].mapping)]

    async def go() -> None:
        async with CaptureClient(base_url, key, secret) as client:
            with Ledger(cfg.ledger_path) as ledger:
                report = await sync(ledger, client, jobs, cfg.delivery_settings())
        assert report.exit_code == 0, report

    try:
        asyncio.run(go())
    finally:
        cfg.close_sources()


def entries(folder: Path) -> dict[str, list[tuple[str, str, str | None]]]:
    """source -> (record id, state, last error) of each record's latest entry."""
    db = sqlite3.connect(folder / "ledger.sqlite3")
    try:
        rows = db.execute(
            "SELECT e.source, e.record_id, e.state, e.last_error FROM entries e "
            "WHERE e.id IN (SELECT max(id) FROM entries GROUP BY source, record_id) ORDER BY e.id"
        ).fetchall()
    finally:
        db.close()
    out: dict[str, list[tuple[str, str, str | None]]] = {}
    for source, record_id, state, error in rows:
        out.setdefault(source, []).append((record_id, state, error))
    return out


def assert_every_row_settled(folder: Path, expected: dict[str, int]) -> None:
    seen = entries(folder)
    for source, count in expected.items():
        assert len({record_id for record_id, _, _ in seen.get(source, [])}) == count, (
            source,
            seen.get(source),
            seen.get(source),
        )
    for source, got in seen.items():
        for record_id, state, error in got:
            assert state in ("captured", "duplicate", "rejected"), (source, record_id, state, error)
            assert state != "rejected" or error, (source, record_id)


@settings(
    max_examples=15,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(csv_rows=text_rows, jsonl_rows=json_rows, raw=raw_rows, cut=st.floats(0.05, 0.95))
def test_arbitrary_rows_are_captured_or_rejected_with_reasons(rel, sandbox, tmp_path, csv_rows, jsonl_rows, raw, cut):
    key, secret = sandbox.create_client("bad-input", rate_limit=100_000)
    rel.scan.secrets.append(secret)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    *complete, last = csv_rows
    # A CSV row with all its columns and no newline is read as it is (spreadsheets write no final
    # newline), so only a row short of columns can be told apart as still being written.
    last = last[: len(FIELDS) - 1]
    csv_rows = [*complete, last]
    csv_full, csv_last = csv_text(complete), csv_text([last]).split("\n", 1)[1]
    jsonl_full, jsonl_last = jsonl_text(jsonl_rows[:-1]), jsonl_text(jsonl_rows[-1:])
    # The last line of each file is being written: a part of it is there, without its newline.
    csv_cut, jsonl_cut = max(1, int(len(csv_last) * cut)), max(1, int(len(jsonl_last) * cut))
    (folder / "contacts.csv").write_text(csv_full + csv_last[:csv_cut].rstrip("\r\n"), encoding="utf-8", newline="")
    (folder / "contacts.jsonl").write_text(jsonl_full + jsonl_last[:jsonl_cut].rstrip("\n"), encoding="utf-8")

    run_sync(folder, sandbox.base_url, key, secret, raw)
    assert_every_row_settled(folder, {"raw": len(raw)})
    # The cut line is read only when what is there is already a whole row (e.g. `{}` of `{}\n`).
    read = {source: len(got) for source, got in entries(folder).items()}
    assert read.get("csv", 0) in (len(csv_rows) - 1, len(csv_rows))
    assert read.get("jsonl", 0) in (len(jsonl_rows) - 1, len(jsonl_rows))

    # The writer finishes its lines; the next pass takes them, and nothing else changes.
    (folder / "contacts.csv").write_text(csv_full + csv_last, encoding="utf-8", newline="")
    (folder / "contacts.jsonl").write_text(jsonl_full + jsonl_last, encoding="utf-8")
    run_sync(folder, sandbox.base_url, key, secret, raw)
    assert_every_row_settled(folder, {"csv": len(csv_rows), "jsonl": len(jsonl_rows), "raw": len(raw)})


def test_the_known_weak_spots_through_the_cli(rel, sandbox, tmp_path):
    """A NUL, a 1 MB field, a template placeholder in the data, a 5,000-digit number: `sync` exits 0
    without a traceback and each row ends captured or rejected with its reason."""
    env = rel.client(sandbox.store, rate_limit=1000)
    (tmp_path / "contacts.csv").write_text(
        csv_text(
            [
                ["Ada\x00", "Love\x00lace", "ada@example.org", "", "x" * 1_000_000],
                ["{First}", "{Last}", "b@example.org", "", ""],
                ["Cy", "", "", "", ""],
            ]
        ),
        encoding="utf-8",
        newline="",
    )
    (tmp_path / "contacts.jsonl").write_text(
        jsonl_text(
            [
                {"First": HUGE_DIGITS, "Email": "d@example.org", "Plan": HUGE_DIGITS},
                {"First": "Ed", "Email": HUGE_DIGITS, "Phone": 12025550100},
                {"First": ["a"], "Last": {"b": 1}, "Email": True, "Phone": 1.5},
            ]
        ),
        encoding="utf-8",
    )
    result = rel.run("sync", "-c", str(write_config(tmp_path, sandbox.base_url)), env=env)
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert_every_row_settled(tmp_path, {"csv": 3, "jsonl": 3})
    states = {record_id: state for got in entries(tmp_path).values() for record_id, state, _ in got}
    assert states["contacts.csv:2"] == states["contacts.csv:3"] == states["contacts.jsonl:1"] == "captured"
    assert states["contacts.csv:4"] == states["contacts.jsonl:3"] == "rejected"


# The property, through the CLI: good rows with bad ones spliced among them. A kind says
# how a row is written and what must become of it: captured, or rejected by the source (a reason
# that names the row's line) or by the mapping (the reason names the field, after the row's line).
CAPTURED, SOURCE, MAPPING = "captured", "source", "mapping"
KINDS = {
    "valid": CAPTURED,
    "controls": CAPTURED,  # NUL and control characters are stripped before the API
    "overlong": CAPTURED,  # no field has a length limit in the API
    "bytes": SOURCE,  # bytes that are not UTF-8 spliced into the line
    "empty_key": SOURCE,
    "cut": SOURCE,  # jsonl: a line cut short; csv: a row cut before its email (the mapping's)
    "wrong_types": MAPPING,  # an email that is a number, a list, an object, a boolean
    "not_object": SOURCE,  # jsonl only: csv writes it as a row without an email (the mapping's)
}
junk = st.binary(min_size=1, max_size=6).map(lambda b: b"\xff" + bytes(x | 0x80 for x in b))
controls = st.text(alphabet=st.sampled_from("\x00\x01\x07\x08\x0b\x0c\x1b\x7f\x85\x9f"), min_size=1, max_size=4)
plain = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "Zs")), max_size=12)
row_kinds = st.lists(
    st.tuples(st.sampled_from(sorted(KINDS)), junk, controls, plain, st.sampled_from([5, [1], {"a": 1}, True])),
    min_size=1,
    max_size=8,
)
_examples = iter(range(10**9))


def spliced_files(folder: Path, rows: list[tuple[Any, ...]], tag: str) -> dict[str, dict[str, tuple[str, int]]]:
    """contacts.csv and contacts.jsonl holding `rows`; per source, the expected outcome and line of each row id."""
    csv_lines, jsonl_lines = [b"id,First,Last,Email,Plan,Phone\n"], []
    expected: dict[str, dict[str, tuple[str, int]]] = {"csv": {}, "jsonl": {}}
    for n, (kind, bad_bytes, ctl, text, wrong) in enumerate(rows):
        rid, email = f"r{n}", f"p{n}.{tag}@example.org"
        fields = {"id": rid, "First": f"Ann{text}", "Last": "Lee", "Email": email, "Plan": text, "Phone": ""}
        if kind == "controls":
            fields["First"], fields["Plan"] = f"A{ctl}nn", f"{ctl}pro{ctl}"
        elif kind == "overlong":
            fields["Plan"] = "x" * 100_000
        elif kind == "empty_key":
            fields["id"] = ""
        elif kind == "wrong_types":
            fields["Email"] = wrong
        csv_fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
        csv_row = csv_text([list(csv_fields.values())[1:]]).split("\n", 1)[1].encode()
        csv_row = csv_row.replace(b"\r\n", b"\n")
        csv_row = (rid + ",").encode() + csv_row if fields["id"] else b"," + csv_row
        json_row = json.dumps(fields).encode() + b"\n"
        outcome = KINDS[kind]
        if kind == "bytes":
            csv_row = csv_row[:-1] + bad_bytes + b"\n"
            json_row = json_row[:-2] + bad_bytes + json_row[-2:]
        elif kind in ("cut", "not_object"):
            csv_row = f"{rid},Ann,Lee\n".encode()
            json_row = json_row[: len(json_row) // 2] + b"\n" if kind == "cut" else b"[1, 2]\n"
        csv_outcome = MAPPING if kind in ("cut", "not_object") else outcome
        line = n + 2
        csv_lines.append(csv_row)
        jsonl_lines.append(json_row)
        expected["csv"][rid if csv_outcome != SOURCE else f"contacts.csv:{line}"] = (csv_outcome, line)
        expected["jsonl"][rid if outcome != SOURCE else f"contacts.jsonl:{line - 1}"] = (outcome, line - 1)
    (folder / "contacts.csv").write_bytes(b"".join(csv_lines))
    (folder / "contacts.jsonl").write_bytes(b"".join(jsonl_lines))
    return expected


def keyed_config(folder: Path, base_url: str) -> Path:
    """write_config's two sources, each read by its `id` column."""
    path = write_config(folder, base_url)
    text = path.read_text(encoding="utf-8").replace(
        'path = "contacts.csv"\n', 'path = "contacts.csv"\nprimary_key = "id"\n'
    )
    path.write_text(
        text.replace('path = "contacts.jsonl"\n', 'path = "contacts.jsonl"\nprimary_key = "id"\n'), encoding="utf-8"
    )
    return path


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(rows=row_kinds)
@example(rows=[(kind, b"\xff\xfe", "\x00\x1b", "ok", [1]) for kind in sorted(KINDS)])  # every kind, always
def test_bad_rows_spliced_among_good_ones_are_rejected_with_their_line_and_the_good_ones_captured_once(
    rel, sandbox, tmp_path, rows
):
    env = rel.client(sandbox.store, rate_limit=100_000)
    tag = f"x{next(_examples)}"
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    expected = spliced_files(folder, rows, tag)
    config = keyed_config(folder, sandbox.base_url)

    for attempt in (1, 2):  # the second sync finds nothing new: the cursor moved past every bad row
        result = rel.run("sync", "-c", str(config), env=env)
        assert result.code == 0, (attempt, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        seen = entries(folder)
        for source, want in expected.items():
            got = {record_id: (state, error) for record_id, state, error in seen.get(source, [])}
            assert set(got) == set(want), (source, got, want)
            for record_id, (outcome, line) in want.items():
                state, error = got[record_id]
                if outcome == CAPTURED:
                    assert state == "captured", (source, record_id, state, error)
                else:  # set aside by the source or by the mapping: the reason names its line
                    assert state == "rejected" and f"contacts.{source} line {line}:" in error, (
                        source,
                        record_id,
                        error,
                    )

    # Each captured row once, whichever sources hold it (both files hold the same people).
    emails = {p["id"]: p["data"]["email"] for p in sandbox.store.persons() if tag in p["data"]["email"]}
    per_person = Counter(emails[c["person_id"]] for c in sandbox.store.captures() if c["person_id"] in emails)
    rows_captured = Counter(
        f"p{rid[1:]}.{tag}@example.org" for want in expected.values() for rid, (o, _) in want.items() if o == CAPTURED
    )
    assert per_person == rows_captured
    for person_id in emails:  # no control character reached the API
        data = next(p["data"] for p in sandbox.store.persons() if p["id"] == person_id)
        assert not any(ch in json.dumps(data) for ch in ("\\u0000", "\\u001b", "\\u007f")), data
