"""The run history tells what happened (issue 26): idle passes that repeat themselves are one entry
with a count and a span, and a capture answered with a person another record holds is a merge."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from connector.ledger import Claim, Ledger, Mapped, Outcome, _merges
from connector.ledger._merges import person_tag
from connector.ledger._runs import Ending, folds

from .test_v9_migration import as_version

DOWN = "connection failed (ConnectError) (no response, info)"


def person(n: int, email: str | None = None) -> Mapped:
    return Mapped(str(n), payload=f'{{"name":"P{n}","email":"{email or f"p{n}@example.org"}"}}')


def ending(
    *,
    kind: str = "sync",
    sources: str = '["crm"]',
    exit_code: int = 4,
    reason: str | None = DOWN,
    read: int = 0,
    note: str | None = None,
    finished: bool = True,
) -> Ending:
    return Ending(kind, sources, note, exit_code, reason, (read, 0, 0), finished)


@pytest.mark.parametrize(
    ("later", "why"),
    [
        (ending(read=1), "it read something"),
        (ending(exit_code=0, reason=None), "it ended otherwise"),
        (ending(reason="API unavailable (HTTP 503, capture_bulk)"), "another reason"),
        (ending(kind="replay"), "another kind"),
        (ending(sources='["other"]'), "other sources"),
        (ending(note="ledger resolve K --requeue"), "an operator's command"),
    ],
)
def test_a_pass_that_differs_in_anything_but_time_starts_a_new_entry(later: Ending, why: str) -> None:
    assert folds(ending(), ending())
    assert not folds(ending(), later), why
    assert not folds(later, ending()), why


def test_a_run_still_running_is_folded_into_by_nothing() -> None:
    assert not folds(ending(finished=False), ending())


def _pass(
    ledger: Ledger,
    kind: str = "sync",
    sources: list[str] | None = None,
    counts: dict[str, int] | None = None,
    exit_code: int = 4,
    reason: str | None = DOWN,
) -> int:
    run = ledger.start_run(kind)
    return ledger.finish_run(run, counts or {}, 0.5, exit_code, ["crm"] if sources is None else sources, reason)


def test_idle_passes_fold_into_one_entry_with_a_count_and_a_span(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        busy = _pass(ledger, counts={"read": 3, "enqueued": 3})
        first = _pass(ledger)
        assert first != busy
        assert [_pass(ledger) for _ in range(4)] == [first] * 4
        sweep = _pass(ledger, kind="replay", sources=[])  # interleaved idle passes of another kind keep their own entry
        assert _pass(ledger) == first and _pass(ledger, kind="replay", sources=[]) == sweep
        runs = ledger.runs()
    assert [(r.id, r.passes) for r in runs] == [(sweep, 2), (first, 6), (busy, 1)]
    folded = runs[1]
    assert folded.duration_s == pytest.approx(3.0)  # six passes of 0.5 s
    assert folded.span_s is not None and folded.span_s >= 0 and folded.reason == DOWN
    assert folded.took().startswith("×6 over ") and runs[2].took() == "0.5"


def test_a_pass_that_reads_sends_or_ends_otherwise_starts_a_new_entry(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        a = _pass(ledger)
        assert _pass(ledger) == a
        b = _pass(ledger, counts={"sent": 2, "captured": 2}, exit_code=0, reason=None)  # the API is back
        c = _pass(ledger, exit_code=0, reason=None)  # nothing to do: a new entry, as b was not idle
        assert _pass(ledger, exit_code=0, reason=None) == c
        d = _pass(ledger)  # the API is down again: another reason
        assert len({a, b, c, d}) == 4
        resolve = ledger.start_run("resolve", note="ledger resolve K --requeue")
        ledger.finish_run(resolve, {}, 0.0, 0)
        assert _pass(ledger) not in (d, resolve)  # an operator acted in between: the history says so
        assert [r.passes for r in ledger.runs()] == [1, 1, 1, 2, 1, 2]


def test_what_a_folded_pass_stamped_belongs_to_the_entry_it_joined(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1)], None)
        first = _pass(ledger, kind="replay", sources=[])
        run = ledger.start_run("replay")
        batch = ledger.claim(Claim(10))  # claimed, then the request failed: nothing counted
        assert batch is not None
        ledger.keep_open(batch, DOWN, [])
        assert ledger.finish_run(run, {}, 0.1, 4, [], DOWN) == first
        assert [e.record_id for e in ledger.run_entries(first)] == ["1"]
        assert ledger.find_run(str(run)) is None  # the pass's own row is gone


def _settle_all(ledger: Ledger, person_ids: dict[str, str | None], named: bool = True) -> int:
    run = ledger.start_run("sync")
    batch = ledger.claim(Claim(100))
    assert batch is not None
    records = dict(ledger._read("SELECT id, record_id FROM entries"))
    outcomes = [
        Outcome(m.entry_id, "captured", person_id=person_ids[records[m.entry_id]], named_person=named)
        for m in batch.members
    ]
    _, merged = ledger.settle_counting(batch, outcomes, [])
    ledger.finish_run(run, {"merged": merged}, 0.1, 0, ["crm"])
    return merged


def test_a_capture_answered_with_a_person_another_record_holds_is_a_merge(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1, "same@example.org"), person(2, "same@example.org"), person(3)], None)
        assert _settle_all(ledger, {"1": "p-a", "2": "p-a", "3": "p-c"}) == 1  # the second of the same person
        ledger.enqueue("crm", "m", [person(1, "new@example.org"), person(4)], None)  # a new version of 1, and 4
        assert _settle_all(ledger, {"1": "p-a", "4": "p-c"}) == 1  # 1's own person: no merge; 4 joins 3's
        assert ledger.status().merged == 2
        assert ledger.runs(1)[0].counts["merged"] == 1


def test_persons_sharing_a_tag_are_told_apart_by_the_whole_id(ledger_target: str | Path) -> None:
    """entries_person holds a 32-bit digest of the person id (schema v14): a digest shared by chance
    (one in some 4 billion pairs, made here by hand) is no merge, and the person's own holders still are."""
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1), person(2)], None)
        assert _settle_all(ledger, {"1": "p-a", "2": "p-b"}) == 0
        with ledger._write() as db:  # wherever 1's tag is (`fresh_tag` until moved, schema v15)
            for column in ("person_tag", "fresh_tag"):
                db.execute(
                    f"UPDATE entries SET {column} = ? WHERE record_id = '1' AND {column} IS NOT NULL",
                    (person_tag("p-x"),),
                )
        ledger.enqueue("crm", "m", [person(3), person(4)], None)
        assert _settle_all(ledger, {"3": "p-x", "4": "p-b"}) == 1  # 4 joins 2's person; 3 shares only 1's tag
        ledger.enqueue("crm", "m", [person(5)], None)
        assert _settle_all(ledger, {"5": "p-x"}) == 1  # 3 holds p-x
        assert ledger.status().merged == 2


def test_a_person_id_the_database_cannot_store_as_given_is_found_again(ledger_target: str | Path) -> None:
    """A NUL in a person id is stored as U+FFFD (neither engine keeps a NUL in text): the merge check
    looks for the id as stored, so the second record captured into that person is a merge."""
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1)], None)
        assert _settle_all(ledger, {"1": "p\x00a"}) == 0
        ledger.enqueue("crm", "m", [person(2)], None)
        assert _settle_all(ledger, {"2": "p\x00a"}) == 1
        assert ledger.status().merged == 1


def test_a_ledger_from_before_v14_still_finds_the_persons_it_holds(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1), person(2)], None)
        assert _settle_all(ledger, {"1": "p-a", "2": "p-b"}) == 0
    as_version(ledger_target, 13)
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(3), person(4)], None)
        assert _settle_all(ledger, {"3": "p-a", "4": "p-c"}) == 1


def test_merges_are_found_whether_the_holder_s_tag_waits_or_was_moved_into_entries_person(
    ledger_target: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settle writes a person's tag where it waits (SQLite: `fresh_tag`, schema v15) until enough
    wait, then they move into entries_person in a settle's transaction; a process that opens the
    ledger later counts what earlier ones left waiting. The holders are found all along."""
    monkeypatch.setattr(_merges, "FRESH_MOVE", 3)
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1), person(2)], None)
        assert _settle_all(ledger, {"1": "p-a", "2": "p-b"}) == 0  # two waiting
        ledger.enqueue("crm", "m", [person(3)], None)
        assert _settle_all(ledger, {"3": "p-a"}) == 1  # found waiting; then the three moved
        assert _waiting(ledger) == 0
        ledger.enqueue("crm", "m", [person(4), person(5)], None)
        assert _settle_all(ledger, {"4": "p-b", "5": "p-c"}) == 1  # 2's moved tag found
    with Ledger(ledger_target) as ledger:  # 4 and 5 wait: counted again at the first settle
        ledger.enqueue("crm", "m", [person(6)], None)
        assert _settle_all(ledger, {"6": "p-c"}) == 1  # 5's waiting tag found; then all moved
        assert _waiting(ledger) == 0
        ledger.enqueue("crm", "m", [person(7)], None)
        assert _settle_all(ledger, {"7": "p-c"}) == 1
        assert ledger.status().merged == 4


def _waiting(ledger: Ledger) -> int:
    with ledger._write() as db:
        return _merges.fresh_count(db)


def test_a_ledger_from_before_v15_still_finds_the_persons_it_holds(ledger_target: str | Path) -> None:
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1), person(2)], None)
        assert _settle_all(ledger, {"1": "p-a", "2": "p-b"}) == 0
    as_version(ledger_target, 14)
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(3), person(4)], None)
        assert _settle_all(ledger, {"3": "p-a", "4": "p-c"}) == 1


@pytest.mark.parametrize("ids", ["none", "a bare id"])
def test_without_a_person_id_in_the_answer_nothing_is_a_merge(ledger_target: str | Path, ids: str) -> None:
    with Ledger(ledger_target) as ledger:
        ledger.enqueue("crm", "m", [person(1, "same@example.org"), person(2, "same@example.org")], None)
        answered = {"1": None, "2": None} if ids == "none" else {"1": "row-1", "2": "row-1"}
        assert _settle_all(ledger, answered, named=False) == 0
        assert ledger.status().merged == 0
        assert ledger.status().by_state["captured"] == 2


def test_the_id_of_a_folded_pass_is_never_handed_out_again(ledger_target: str | Path) -> None:
    """The pass that folded was the newest run: its id was in the log line that started it (and in
    whatever the operator saw of it while it ran). A later run must not get that id again."""
    with Ledger(ledger_target) as ledger:
        first = _pass(ledger)
        run = ledger.start_run("sync")
        assert ledger.finish_run(run, {}, 0.5, 4, ["crm"], DOWN) == first  # folded: its own row is gone
        assert [(r.id, r.passes) for r in ledger.runs()] == [(first, 2)] and ledger.find_run(str(run)) is None
        assert ledger.find_run("last").id == first and ledger.status().runs[0].id == first
        later = ledger.start_run("sync")
        assert later > run
        ledger.finish_run(later, {"read": 1}, 0.5, 0, ["crm"])
        assert [r.id for r in ledger.runs()] == [later, first]


def test_the_merge_check_seeks_both_person_indexes_on_sqlite(tmp_path: Path) -> None:
    """The merge check ("who else is this person") runs in every settle that captures: a scan of
    entries there would read the whole ledger per batch. Each branch of `holders_sql` seeks its own
    index by tag."""
    from connector.ledger._sqlite import DIALECT

    path = tmp_path / "ledger.sqlite3"
    Ledger(path).close()
    with sqlite3.connect(path) as conn:
        plan = [
            row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {_merges.holders_sql(DIALECT)}", ("[1]", '["p"]') * 2)
        ]
    seeks = [step for step in plan if step.startswith("SEARCH entries USING INDEX")]
    assert len(seeks) == 2 and not any(step.startswith("SCAN entries") for step in plan), plan
    assert any("entries_person " in step for step in seeks) and any("entries_person_fresh" in step for step in seeks)
