"""The synthetic test flow (spec 1: "production should be used only after a synthetic test flow
works"), step by step, each judged on what the server answered.

It sends a handful of clearly synthetic persons (first name "capture-sync flow", an address at
example.com with a local part unique to the run, a note that they may be deleted) and checks what
effectively-once delivery relies on: a repeated key is a replay, a repeated bulk request captures
nobody twice, how an invalid person is reported, what evidence places a bulk result object, and
whether a per-person key is remembered across requests (design 2 re-offers an `unknown` member alone
in a new request under its same key). A step that cannot run because an earlier one gave it nothing
to work on is reported as not run, never as passed.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..api import (
    BadRequest,
    BulkCaptureResult,
    CaptureClient,
    CaptureError,
    ClientInfo,
    OutcomeUnknown,
    PersonCaptureResult,
    PersonInput,
    Unauthorized,
    encode_json,
)
from ..delivery import ExitCode
from ._evidence import counts, read, repeat_verdict
from ._record import Recorder, envelope_problem

Cause = Literal["auth", "unavailable", "contract"]
NAME = "capture-sync flow"
NOTE = "synthetic test person sent by `capture-sync check --flow`; safe to delete"

TITLES = {
    "info": "GET /info answers with the client's settings",
    "person": "POST /person captures a synthetic person",
    "person-replay": "the same POST /person again, same key: a replay",
    "bulk": "POST /persons/bulk with an invalid person, then the same request again",
    "invalid-person": "how the server reports an invalid bulk person",
    "evidence": "what places each bulk result object on its person",
    "person-key-scope": "a per-person key is remembered in a later request",
    "envelopes": "every response in the spec's envelopes",
}


@dataclass
class Step:
    """One step's verdict; `cause` says why a failed step failed (it picks the exit code)."""

    name: str
    passed: bool
    seen: str
    details: list[str] = field(default_factory=list)
    cause: Cause | None = None
    ran: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": TITLES[self.name],
            "passed": self.passed,
            "ran": self.ran,
            "seen": self.seen,
            "details": self.details,
        }


@dataclass
class FlowReport:
    """Every step's verdict in order, and the client GET /info named (None when it did not answer):
    a pass is recorded under that name only when every step passed."""

    steps: list[Step]
    client_name: str | None

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.steps)

    @property
    def exit_code(self) -> ExitCode:
        """3 when the credentials were refused, 7 when the server answered against the flow, 4 when
        it did not answer (an outage: try again later); 0 when every step passed."""
        causes = {s.cause for s in self.steps if not s.passed}
        for cause, code in (
            ("auth", ExitCode.AUTH),
            ("contract", ExitCode.FLOW_FAILED),
            ("unavailable", ExitCode.UNSETTLED),
        ):
            if cause in causes:
                return code
        return ExitCode.OK

    def summary(self) -> dict[str, Any]:
        """What the ledger keeps beside a pass."""
        return {"client_name": self.client_name, "steps": {s.name: s.seen for s in self.steps}}


@dataclass
class _Run:
    """What the steps hand on to each other."""

    client: CaptureClient
    recorder: Recorder
    token: str
    info: ClientInfo | None = None
    person_body: bytes = b""
    person: PersonCaptureResult | None = None
    bulk: list[dict[str, Any]] = field(default_factory=list)
    first: BulkCaptureResult | BadRequest | None = None
    sent: list[dict[str, Any]] = field(default_factory=list)  # the persons of the answer step 6 reads
    labels: list[str] = field(default_factory=list)
    answer: BulkCaptureResult | None = None

    def person_of(self, tag: str, **more: Any) -> dict[str, Any]:
        return {
            "first_name": NAME,
            "last_name": tag,
            "email": f"flow-{self.token}-{tag}@example.com",
            "notes": NOTE,
            **more,
        }

    def key(self, tag: str) -> str:
        return f"capture-sync-flow-{self.token}-{tag}"


class _NotRun(Exception):
    """The step has nothing to work on: an earlier step did not give it an answer."""


def _answered(run: _Run, name: str, expected: int, seen: str) -> Step:
    """A step judged on the status of the last response (the spec's one success status) and `seen`."""
    status = run.recorder.last_status()
    ok = status == expected
    return Step(
        name,
        ok,
        f"HTTP {status}: {seen}" + ("" if ok else f" (the spec says {expected})"),
        cause=None if ok else "contract",
    )


async def _info(run: _Run) -> Step:
    run.info = info = await run.client.info()
    return _answered(
        run,
        "info",
        200,
        (
            f"client {info.client_name!r}, rate_limit {info.rate_limit}, default_lead_source "
            f"{info.default_lead_source!r}, has_custom_field_mapping {info.has_custom_field_mapping}"
        ),
    )


async def _person(run: _Run) -> Step:
    run.person_body = encode_json(PersonInput.model_validate(run.person_of("person")).to_json_dict())
    run.person = result = await run.client.capture_person(run.person_body, run.key("person"))
    return _answered(
        run,
        "person",
        201,
        (
            f"person_id {result.person_id}, status {result.status!r}, action {result.action!r}, "
            f"idempotent_replay {result.idempotent_replay}"
        ),
    )


async def _person_replay(run: _Run) -> Step:
    if run.person is None:
        raise _NotRun("step person captured nobody")
    again = await run.client.capture_person(run.person_body, run.key("person"))
    status = run.recorder.last_status()
    same = again.person_id == run.person.person_id
    flag = again.idempotent_replay
    seen = f"HTTP {status}: idempotent_replay {flag}, {'the same' if same else 'a new'} person_id {again.person_id}"
    if status == 201 and (flag is True or (flag is None and same)):
        return Step("person-replay", True, seen)
    return Step(
        "person-replay",
        False,
        seen
        + (
            ": the server captured the person again under a repeated Idempotency-Key, so a retry after a lost "
            "response would capture twice"
            if status == 201
            else ": expected 201"
        ),
        cause="contract",
    )


async def _bulk_twice(
    run: _Run, persons: list[dict[str, Any]], key: str
) -> tuple[BulkCaptureResult | BadRequest, BulkCaptureResult | BadRequest, str, bool]:
    """The same bulk request twice (same key, same bytes): both answers, what was seen, and whether
    the second captured nobody twice."""
    body = encode_json({"persons": persons})  # bytes: one person may break rule B on purpose
    answers: list[BulkCaptureResult | BadRequest] = []
    for _ in range(2):
        try:
            answers.append(await run.client.capture_bulk(body, key))
        except BadRequest as exc:
            answers.append(exc)
    first, again = answers
    if isinstance(first, BulkCaptureResult) and isinstance(again, BulkCaptureResult):
        ok, how = repeat_verdict(first, again)
        return first, again, f"HTTP 200: {counts(first)}; the same request again: {how}", ok
    if isinstance(first, BadRequest) and isinstance(again, BadRequest):
        return first, again, f"HTTP 400 both times ({first}): nothing captured", True
    kinds = ["HTTP 200" if isinstance(a, BulkCaptureResult) else "HTTP 400" for a in answers]
    return first, again, f"{kinds[0]}, then {kinds[1]} for the same request: the answers differ", False


async def _bulk(run: _Run) -> Step:
    run.bulk = [
        run.person_of("bulk1", idempotency_key=run.key("bulk1")),
        {"first_name": NAME, "last_name": "no email or phone", "notes": NOTE, "idempotency_key": run.key("bulk2")},
        run.person_of("bulk3", idempotency_key=run.key("bulk3")),
    ]
    first, _, seen, ok = await _bulk_twice(run, run.bulk, run.key("request1"))
    run.first = first
    if isinstance(first, BulkCaptureResult):
        run.sent, run.labels, run.answer = run.bulk, ["#1", "#2 (invalid)", "#3"], first
    return Step("bulk", ok, "3 persons, #2 without email or phone; " + seen, cause=None if ok else "contract")


async def _invalid_person(run: _Run) -> Step:
    if run.first is None:
        raise _NotRun("step bulk got no answer")
    if isinstance(run.first, BadRequest):
        valid = [run.bulk[0], run.bulk[2]]
        first, _, seen, ok = await _bulk_twice(run, valid, run.key("request2"))
        head = (
            f"whole request refused: HTTP 400 ({run.first}); #1 and #3 again alone, new header key, same person keys: "
        )
        if isinstance(first, BulkCaptureResult):
            run.sent, run.labels, run.answer = valid, ["#1", "#3"], first
        ok = ok and run.answer is not None
        return Step("invalid-person", ok, head + seen, cause=None if ok else "contract")
    reading = read(run.bulk, run.first, ["#1", "#2", "#3"])
    state = reading.outcomes[1].state
    if state == "failed":
        return Step(
            "invalid-person",
            True,
            f"per person: #2 is listed in failed ({reading.outcomes[1].error}); the others were processed",
        )
    if state in ("captured", "duplicate"):
        return Step(
            "invalid-person", False, f"#2, without email or phone (rule B), was accepted as {state}", cause="contract"
        )
    if run.first.failed:
        return Step(
            "invalid-person",
            True,
            f"per person: {counts(run.first)} (the object in failed names nobody the matcher can place)",
        )
    return Step(
        "invalid-person",
        False,
        f"{counts(run.first)}: no object in failed and no 400 for #2 (rule B)",
        cause="contract",
    )


async def _evidence(run: _Run) -> Step:
    if run.answer is None:
        raise _NotRun("no bulk request was answered 200")
    reading = read(run.sent, run.answer, run.labels)
    unplaced = len(run.sent) - reading.placed
    note = (
        ""
        if not unplaced
        else (
            f"; {unplaced} person(s) could not be placed (the spec allows it): the connector then asks for each "
            "alone in a one-person bulk request under its own key (see step person-key-scope)"
        )
    )
    return Step("evidence", True, reading.summary + note, details=reading.lines)


async def _person_key_scope(run: _Run) -> Step:
    if run.answer is None:
        raise _NotRun("no bulk request was answered 200")
    outcomes = read(run.sent, run.answer, run.labels).outcomes
    valid = [i for i, p in enumerate(run.sent) if "email" in p]
    captured = [i for i in valid if outcomes[i].state == "captured"]
    if not captured and (any(outcomes[i].state != "unknown" for i in valid) or not run.answer.successful):
        raise _NotRun("no valid person of the bulk request was captured")
    pos = (captured or valid)[0]
    person = run.sent[pos]
    result = await run.client.capture_bulk(encode_json({"persons": [person]}), run.key("request3"))
    seen = f"{run.labels[pos]} alone in a new bulk request under its same per-person key: {counts(result)}"
    if (result.duplicates and not result.successful) or any(
        o.get("idempotent_replay") is True for o in result.successful
    ):
        return Step("person-key-scope", True, seen + ": not captured again, as design 2 needs")
    first_id = outcomes[pos].person_id
    if result.successful:
        ids = {str(o.get("person_id") or (o.get("result") or {}).get("id")) for o in result.successful}
        same = (
            ""
            if not first_id
            else " (the person_id of its first capture: captured again as an update)"
            if (first_id in ids)
            else " (a new person_id)"
        )
        why = (
            f": captured again{same}. This server remembers a per-person idempotency_key within one request "
            "only. The connector resolves a person whose result it cannot place by offering it alone in a new "
            "request under its same key, so here such a person would be captured twice: use this server only "
            "if every result places its person (step evidence), or ask its provider to keep per-person keys"
        )
        return Step("person-key-scope", False, seen + why, cause="contract")
    return Step("person-key-scope", False, seen + ": neither a duplicate nor a replay", cause="contract")


def _envelopes(recorder: Recorder) -> Step:
    problems = [p for ex in recorder.exchanges if (p := envelope_problem(ex))]
    n = len(recorder.exchanges)
    if problems:
        return Step(
            "envelopes", False, f"{len(problems)} of {n} responses off the spec", details=problems, cause="contract"
        )
    return Step(
        "envelopes",
        True,
        f"{n} responses, each in the spec's envelope with its HTTP status",
        details=[ex.label for ex in recorder.exchanges],
    )


def _cause(exc: CaptureError) -> Cause:
    if isinstance(exc, Unauthorized):
        return "auth"
    if isinstance(exc, OutcomeUnknown):  # no answer, or a 2xx that is not the spec's envelope
        return "unavailable" if exc.status_code is None else "contract"
    status = exc.status_code or 0
    return "unavailable" if status in (429, 503) or status >= 500 else "contract"


_STEPS: list[tuple[str, Callable[[_Run], Awaitable[Step]]]] = [
    ("info", _info),
    ("person", _person),
    ("person-replay", _person_replay),
    ("bulk", _bulk),
    ("invalid-person", _invalid_person),
    ("evidence", _evidence),
    ("person-key-scope", _person_key_scope),
]


async def run_flow(client: CaptureClient, recorder: Recorder) -> FlowReport:
    """Every step in order; after a failed GET /info nothing else is sent."""
    run = _Run(client, recorder, uuid.uuid4().hex[:12])
    steps: list[Step] = []
    for name, step in _STEPS:
        if steps and not steps[0].passed:
            steps.append(Step(name, False, "not run: GET /info failed, nothing else was sent", ran=False))
            continue
        try:
            steps.append(await step(run))
        except _NotRun as exc:
            steps.append(Step(name, False, f"not run: {exc}", ran=False))
        except CaptureError as exc:
            steps.append(Step(name, False, str(exc), cause=_cause(exc)))
    steps.append(_envelopes(recorder))
    return FlowReport(steps, run.info.client_name if run.info else None)
