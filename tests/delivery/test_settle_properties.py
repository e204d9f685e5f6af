"""Settlement under any result shape: one state per member, never one the server did not give it.

A scenario is a batch (members with email and phone, email only or phone only, some sharing an email
or a phone), the server's truth per member (captured, duplicate, failed, or omitted from every array)
and a response: one of the sandbox's five shapes, or a random mix where each object carries a random
subset of evidence (key, email, phone, index, person id) at random depths, the arrays in request,
reversed or shuffled order, and indices counted from 0, from 1, per array, or garbage. Some mixes
lie: an object names another member's key besides its own, or an identified object carries an index
pointing elsewhere in either base. A lie is only ever added beside the object's own evidence: an
object that carries nothing but a wrong index, or nothing but another member's key, cannot be told
from a true one by anybody, so no matcher can be held to it. Indices counted per array (from 0 or
1, object by object) are such a lie by chance on an object that carries nothing else, whichever
place they read as: those are left out.
"""

from __future__ import annotations

import json
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from connector.api import BulkCaptureResult
from connector.delivery import match_bulk
from connector.ledger import Claim, Ledger, Mapped, Member, Outcome

from .test_matching import ARRAY, SHAPES, failure, member, person_id, result

TRUTHS = ("captured", "duplicate", "failed", "omitted")
CONTACTS = ("both", "email", "phone")
PIECES = ("key", "email", "phone", "index", "person_id")
NESTS = ("result", "input", "data", "meta")


@dataclass(frozen=True)
class Scenario:
    contacts: list[str]
    share_email: bool
    share_phone: bool
    truths: list[str]
    shape: str  # one of SHAPES, or "mix"
    seed: int

    def payloads(self) -> list[str]:
        return [member(pos, **self.contact(pos)).payload for pos in range(len(self.truths))]

    def contact(self, pos: int) -> dict[str, str | None]:
        email = "same@example.com" if self.share_email and pos < 2 else ""
        phone = "+12025559999" if self.share_phone and pos in (1, 2) else ""
        kind = self.contacts[pos]
        return {"email": None if kind == "phone" else email, "phone": None if kind == "email" else phone}

    def identifiable(self, pos: int, pieces: set[str]) -> bool:
        """Whether the pieces include one that fits this member alone."""
        shared_email = self.share_email and pos < 2
        shared_phone = self.share_phone and pos in (1, 2)
        has = self.contact(pos)
        return (
            "key" in pieces
            or ("email" in pieces and has["email"] is not None and not shared_email)
            or ("phone" in pieces and has["phone"] is not None and not shared_phone)
        )


@dataclass
class Facts:
    """What the response says that a correct matcher must use."""

    data: BulkCaptureResult
    lied: bool = False
    keyed: frozenset[int] = frozenset()  # members whose object echoes their key
    with_id: frozenset[int] = frozenset()  # members whose object carries their person id


scenarios = st.integers(min_value=1, max_value=12).flatmap(
    lambda n: st.builds(
        Scenario,
        contacts=st.lists(st.sampled_from(CONTACTS), min_size=n, max_size=n),
        share_email=st.booleans(),
        share_phone=st.booleans(),
        truths=st.lists(st.sampled_from(TRUTHS), min_size=n, max_size=n),
        shape=st.sampled_from([*SHAPES, "mix", "mix", "mix"]),
        seed=st.integers(min_value=0, max_value=2**32),
    )
)


def batch_of(s: Scenario) -> list[Member]:
    return [member(pos, **s.contact(pos)) for pos in range(len(s.truths))]


def respond(s: Scenario, batch: list[Member]) -> Facts:
    listed = {pos for pos, t in enumerate(s.truths) if t != "omitted"}
    if s.shape != "mix":
        keyed = listed if s.shape in ("echo", "nested") else set()
        with_id = {pos for pos in listed if s.truths[pos] != "failed"}
        return Facts(result(s.shape, batch, s.truths), keyed=frozenset(keyed), with_id=frozenset(with_id))
    return _mix(s, batch, random.Random(s.seed))


def _put(obj: dict[str, Any], rnd: random.Random, name: str, value: Any) -> None:
    """Place a field at a random depth, in a nested object or a list of them, never over another."""
    for step in rnd.sample(NESTS, rnd.randint(0, 2)):
        inner = obj.setdefault(step, {} if rnd.random() < 0.7 else [{}])
        obj = inner[-1] if isinstance(inner, list) else inner
    if name in obj:
        obj.setdefault("also", []).append({name: value})
    else:
        obj[name] = value


def _echo_of(text: str, kind: str, rnd: random.Random) -> str:
    if kind == "email":
        return rnd.choice([text, text.upper(), f"  {text.title()} "])
    national = f"({text[2:5]}) {text[5:8]}-{text[8:]}"
    return rnd.choice([text, national, text[1:], f"+1 {text[2:5]} {text[5:8]} {text[8:]}"])


def _mix(s: Scenario, batch: list[Member], rnd: random.Random) -> Facts:
    n = len(batch)
    indexing = rnd.choice(("base0", "base1", "per_array", "garbage"))
    arrays: dict[str, list[tuple[int, dict[str, Any], set[str]]]] = {a: [] for a in ARRAY.values()}
    facts = Facts(BulkCaptureResult(successful=[], duplicates=[], failed=[]))
    keyed, with_id = set(), set()
    for pos, (m, truth) in enumerate(zip(batch, s.truths, strict=True)):
        if truth == "omitted":
            continue
        person = json.loads(m.payload)
        pieces = {p for p in PIECES if rnd.random() < 0.5}
        obj: dict[str, Any] = {}
        if "key" in pieces:
            _put(obj, rnd, "idempotency_key", m.key)
            keyed.add(pos)
        for kind in ("email", "phone"):
            if kind in pieces and kind in person:
                _put(obj, rnd, kind, _echo_of(person[kind], kind, rnd))
        if truth == "failed":
            _put(
                obj,
                rnd,
                rnd.choice(("error", "errors", "message", "reason")),
                rnd.choice([failure(pos), [failure(pos)], f"bad person {pos}"]),
            )
        elif "person_id" in pieces:
            _put(obj, rnd, rnd.choice(("person_id", "id")), person_id(pos))
            with_id.add(pos)
        if s.identifiable(pos, pieces) and n > 1 and rnd.random() < 0.1:
            other = rnd.choice([q for q in range(n) if q != pos])
            _put(obj, rnd, "idempotency_key", batch[other].key)
            facts.lied = True
        arrays[ARRAY[truth]].append((pos, obj, pieces))
    for objs in arrays.values():
        order = rnd.choice(("request", "reversed", "shuffled"))
        if order != "request":
            objs.reverse() if order == "reversed" else rnd.shuffle(objs)
        for slot, (pos, obj, pieces) in enumerate(objs):
            if "index" not in pieces:
                continue
            identified = s.identifiable(pos, pieces)
            index = _index(indexing, pos, slot, n, rnd, lie=identified and rnd.random() < 0.1)
            if indexing == "per_array" and not identified:
                continue  # a slot in its array, counted from 0 or 1: read as a place, a lie by chance
            _put(obj, rnd, "index", index)
    facts.data = BulkCaptureResult(**{a: [obj for _, obj, _ in objs] for a, objs in arrays.items()})
    facts.keyed, facts.with_id = frozenset(keyed), frozenset(with_id)
    return facts


def _index(indexing: str, pos: int, slot: int, n: int, rnd: random.Random, lie: bool) -> Any:
    if lie:  # another member in base 0 and in base 1
        return rnd.choice([q for q in range(-1, n + 2) if q not in (pos, pos + 1)])
    if indexing == "garbage":
        return rnd.choice([-1 - rnd.randrange(3), n + 1 + rnd.randrange(3), str(pos), float(pos), None, True])
    if indexing == "per_array":
        return slot + (1 if rnd.random() < 0.5 else 0)
    return pos + (indexing == "base1")


def check(s: Scenario, outcomes: list[Outcome], facts: Facts, entry_ids: list[int]) -> None:
    assert [o.entry_id for o in outcomes] == entry_ids
    for pos, (o, truth) in enumerate(zip(outcomes, s.truths, strict=True)):
        assert o.state in ("unknown", truth), f"#{pos} is {truth}, settled {o.state}"
        assert o.person_id in (None, person_id(pos)), f"#{pos} got another member's person id"
        if o.state in ("failed", "unknown"):
            assert o.error and o.person_id is None
        if not facts.lied and pos in facts.keyed:
            assert o.state == truth, f"#{pos} echoes its key yet is {o.state}: {o.error}"
            if pos in facts.with_id:
                assert o.person_id == person_id(pos)


@settings(max_examples=600, deadline=None)
@given(scenarios)
def test_no_member_is_settled_with_a_state_or_person_id_the_server_did_not_give_it(s):
    batch = batch_of(s)
    facts = respond(s, batch)
    check(s, match_bulk(batch, facts.data), facts, [m.entry_id for m in batch])


@settings(max_examples=60, deadline=None)
@given(scenarios)
def test_captured_and_duplicate_entries_are_never_sent_again(s):
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "ledger.sqlite3", synchronous="NORMAL")
        n = len(s.truths)
        ledger.enqueue("src", "v1", [Mapped(str(i), payload=p) for i, p in enumerate(s.payloads())], {"offset": n})
        batch = ledger.claim(Claim(100))
        assert batch is not None and len(batch.members) == n
        facts = respond(s, list(batch.members))
        outcomes = match_bulk(batch.members, facts.data)
        check(s, outcomes, facts, [m.entry_id for m in batch.members])
        ledger.settle(batch, outcomes, [])
        final = {o.entry_id: o.state for o in outcomes}

        # Drain everything the ledger would still send, including failed ones requeued by replay.
        ledger.requeue_failed(before=float("inf"))
        resent: set[int] = set()
        while (work := ledger.claim(Claim(100, include_stalled=True))) is not None:
            resent.update(m.entry_id for m in work.members)
            ledger.settle(work, [Outcome(m.entry_id, "captured") for m in work.members], [])
        ledger.close()

    # An unknown is re-offered alone once; one its own one-person batch could not place waits for an operator.
    asked_again = ("failed", "unknown") if n > 1 else ("failed",)
    settled_for_good = {eid for eid, state in final.items() if state in ("captured", "duplicate")}
    assert not (resent & settled_for_good)
    assert resent == {eid for eid, state in final.items() if state in asked_again}
