"""Switchable sandbox behaviours: one legal answer for each point the Capture API spec leaves open.

The sandbox is one legal server among many. Where the spec says "not shown", a real CRM may do
anything reasonable, and the connector must stay correct against all of it; each field of
`Behaviour` picks one such answer. The defaults are the sandbox's original behaviour.

- `bulk_result_shape` (spec 2.6, "fields of the objects inside these three arrays: not shown"):
  what the objects in `successful`, `duplicates` and `failed` carry. `echo` (default) echoes the
  0-based request `index`, the person's `idempotency_key`, `email` and `phone`, and `person_id`;
  `nested` keeps the evidence only in nested objects (`result`/`input`, `input`/`errors`);
  `index1` counts request positions from 1 and says nothing else; `array_index` numbers each
  array on its own, lists it in reverse request order and echoes the email upper-cased (so an
  index there is no request position); `bare` carries no evidence at all. See `results.py`.
- `invalid_person` (spec 4.3, "each person is processed independently", and 7, a 400 when "the
  person data is invalid"): `failed` (default) lists a person that fails validation in `failed`
  and captures the others; `reject-request` refuses the whole POST /persons/bulk with a 400 error
  envelope (the code of the first problem, every problem in `error.details`) and captures nothing;
  `Faults.p_person_fail` then refuses no bulk person (only POST /person ones).
- `idempotency_scope` (spec 4.4 and 2.2, which never say whether the keys of the two capture
  operations are related): `operation` (default) remembers keys per (client, operation).
  `shared` puts the Idempotency-Key header of POST /person and the per-person `idempotency_key`
  of bulk persons in one per-client namespace of person keys: a POST /person whose key already
  captured a person (as a bulk per-person key) captures nothing and answers 201 with that earlier
  capture as an idempotent replay; a POST /person that captures records its header key as the
  capture's person key, so a later bulk person with that key is a duplicate. Bodies are not
  compared across operations (the bulk rule for per-person keys). The bulk request's own header
  key stays per operation, and a repeated POST /person key is still a replay or 409 as always.
- `person_key_scope` (spec 2.2: "a stable key for this person within the batch", which says
  nothing of later requests): `client` (default) remembers a bulk person's `idempotency_key` for
  the client, so a person offered again in a later request under its key is a duplicate; `request`
  honours it within one request only: a key seen in an earlier request captures that person again
  (the repeat capture is stored without its person key, as the store holds each key once; it shows
  in `captures()` by identity). With `shared` scope, a POST /person is a request of its own and so
  finds no earlier capture either. The connector re-offers an `unknown` member alone in a new
  request under its same key (design 2), so against this server such a member is captured twice:
  the one behaviour the connector is not safe against, and what `check --flow` probes.
- `rate_limit_unit` (spec 8: "unit and time window of `rate_limit`: not shown"): what a client's
  `rate_limit` counts over the window (`serve --rate-window`, the other open point): `requests`
  (default) counts every request alike; `persons` counts the persons a request carries (a bulk
  request of 100 costs 100; GET /info, POST /person and an unreadable bulk body cost 1).
- `rate_counting` (spec 8 again: how the window counts is not shown either): `sliding` (default)
  admits at most `rate_limit` units in any window of `serve --rate-window`; `fixed` resets the
  count at each multiple of the window on the server's clock (up to twice the limit passes around
  a reset); `bucket` is a token bucket of `rate_limit` units refilled over the window (the whole
  limit at once, then the sustained rate). See `ratelimit.py`.
- `retry_after` (spec 8: "any rate-limit response headers: not shown"): True (default) sends
  `Retry-After` on a 429, the whole seconds until enough of the window frees; False sends none,
  so a client must find the window from the 429s alone.
A client's `rate_limit` itself may change while the server runs (`SandboxStore.set_rate_limit`,
`sandbox set-rate-limit`): it is read on every request, as GET /info reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

BulkResultShape = Literal["echo", "nested", "index1", "array_index", "bare"]
InvalidPerson = Literal["failed", "reject-request"]
IdempotencyScope = Literal["operation", "shared"]
PersonKeyScope = Literal["client", "request"]
RateLimitUnit = Literal["requests", "persons"]
RateCounting = Literal["sliding", "fixed", "bucket"]


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How the sandbox answers where the spec is silent; the defaults are its original answers."""

    bulk_result_shape: BulkResultShape = "echo"
    invalid_person: InvalidPerson = "failed"
    idempotency_scope: IdempotencyScope = "operation"
    person_key_scope: PersonKeyScope = "client"
    rate_limit_unit: RateLimitUnit = "requests"
    retry_after: bool = True
    rate_counting: RateCounting = "sliding"

    def __post_init__(self) -> None:
        for name, kind in (
            ("bulk_result_shape", BulkResultShape),
            ("invalid_person", InvalidPerson),
            ("idempotency_scope", IdempotencyScope),
            ("person_key_scope", PersonKeyScope),
            ("rate_limit_unit", RateLimitUnit),
            ("rate_counting", RateCounting),
        ):
            if getattr(self, name) not in get_args(kind):
                raise ValueError(f"{name} must be one of {', '.join(get_args(kind))}")
