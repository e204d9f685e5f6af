"""A 401 after the secret was rotated (spec 5: the old secret stops working at once): the client
re-reads its credentials once, verifies a changed pair with GET /info, and sends the request in hand
again under its same key and bytes. An unchanged or refused pair is no cure, and the error names
where the credentials were read from, never their values."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
import respx
from pydantic import SecretStr

from connector.api import CaptureClient, Unauthorized

from .conftest import API_KEY, API_SECRET, BULK_RESULT, INFO, PERSON, fail, ok

NEW_SECRET = "ROTATED-77c1-do-not-log"
ORIGINS = "key from file /etc/cs/api_key, secret from file /etc/cs/api_secret"


@dataclass(frozen=True)
class Pair:
    api_key: str
    api_secret: SecretStr

    def origins(self) -> str:
        return ORIGINS


class Files:
    """What the credential files hold now; counts how often the client read them."""

    def __init__(self, secret: str) -> None:
        self.secret, self.reads = secret, 0

    def __call__(self) -> Pair:
        self.reads += 1
        return Pair(API_KEY, SecretStr(self.secret))


def server(accepted: Callable[[], str]) -> Callable[[httpx.Request], httpx.Response]:
    """A server that accepts only the secret `accepted()` returns, as the sandbox after a rotation."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.headers.get("X-API-Secret") != accepted():
            return fail(401, "UnauthorizedError", "invalid credentials")
        if request.url.path.endswith("/info"):
            return ok(200, INFO)
        return ok(200, BULK_RESULT)

    return answer


async def test_a_rotated_secret_in_its_file_is_verified_and_the_request_goes_again_under_its_key(
    router: respx.MockRouter, make_client: Callable[..., CaptureClient]
) -> None:
    files = Files(NEW_SECRET)  # the operator wrote the new secret before the 401 came back
    route = router.route().mock(side_effect=server(lambda: NEW_SECRET))
    client = make_client(reload_credentials=files, credentials_from=ORIGINS)

    result = await client.capture_bulk([PERSON], "batch-key-1")

    assert len(result.successful) == 1
    sent = [
        (
            c.request.url.path,
            c.request.headers.get("Idempotency-Key"),
            c.request.headers["X-API-Secret"],
            c.request.content,
        )
        for c in route.calls
    ]
    assert [s[0].rsplit("/", 1)[1] for s in sent] == ["bulk", "info", "bulk"]
    assert sent[0][2] == API_SECRET and sent[1][2] == sent[2][2] == NEW_SECRET
    assert sent[0][1] == sent[2][1] == "batch-key-1" and sent[0][3] == sent[2][3]  # same logical request
    assert files.reads == 1
    await client.capture_bulk([PERSON], "batch-key-2")  # the new pair stays in use
    assert route.calls[-1].request.headers["X-API-Secret"] == NEW_SECRET and files.reads == 1


async def test_unchanged_files_are_no_cure_and_the_error_says_where_the_credentials_came_from(
    router: respx.MockRouter, make_client: Callable[..., CaptureClient]
) -> None:
    files = Files(API_SECRET)
    route = router.route().mock(side_effect=server(lambda: NEW_SECRET))
    client = make_client(reload_credentials=files, credentials_from=ORIGINS)

    with pytest.raises(Unauthorized) as caught:
        await client.capture_bulk([PERSON], "batch-key-1")

    assert files.reads == 1
    assert [c.request.url.path.rsplit("/", 1)[1] for c in route.calls] == ["bulk"]  # no GET /info for the same pair
    text = f"{caught.value} {caught.value!r}"
    assert ORIGINS in str(caught.value)
    assert API_SECRET not in text and NEW_SECRET not in text


async def test_a_new_pair_the_api_refuses_is_verified_once_and_never_used(
    router: respx.MockRouter, make_client: Callable[..., CaptureClient]
) -> None:
    files = Files("ALSO-WRONG-0000")
    route = router.route().mock(side_effect=server(lambda: NEW_SECRET))
    client = make_client(reload_credentials=files, credentials_from=ORIGINS)

    for key in ("batch-key-1", "batch-key-2"):
        with pytest.raises(Unauthorized):
            await client.capture_bulk([PERSON], key)

    paths = [c.request.url.path.rsplit("/", 1)[1] for c in route.calls]
    # the refused pair is not verified again, and the second request never leaves: the latch holds it
    assert paths == ["bulk", "info"]
    assert client.refused_since is not None
    assert all(
        c.request.headers["X-API-Secret"] == API_SECRET for c in route.calls if c.request.url.path.endswith("bulk")
    )


async def test_concurrent_401s_read_and_verify_the_files_once(
    router: respx.MockRouter, make_client: Callable[..., CaptureClient]
) -> None:
    files = Files(NEW_SECRET)
    route = router.route().mock(side_effect=server(lambda: NEW_SECRET))
    client = make_client(reload_credentials=files, credentials_from=ORIGINS)

    results = await asyncio.gather(*(client.capture_bulk([PERSON], f"batch-key-{n}") for n in range(4)))

    assert all(len(r.successful) == 1 for r in results)
    assert files.reads == 1
    assert sum(c.request.url.path.endswith("/info") for c in route.calls) == 1
    retried = [
        c.request.headers["Idempotency-Key"]
        for c in route.calls
        if c.request.url.path.endswith("bulk") and c.request.headers["X-API-Secret"] == NEW_SECRET
    ]
    assert sorted(retried) == [f"batch-key-{n}" for n in range(4)]


async def test_without_a_way_to_reread_a_401_is_raised_as_before(
    router: respx.MockRouter, make_client: Callable[..., CaptureClient]
) -> None:
    router.route().mock(side_effect=server(lambda: NEW_SECRET))
    client = make_client()
    with pytest.raises(Unauthorized):
        await client.info()


async def test_after_a_refusal_no_request_leaves_until_a_pair_is_verified_again(
    router: respx.MockRouter, make_client: Callable[..., CaptureClient]
) -> None:
    """The latch: requests not yet sent fail at once with the refusal; verifying a pair lifts it."""
    accepted = {"secret": NEW_SECRET}  # the client's own pair is refused (rotated elsewhere)
    route = router.route().mock(side_effect=server(lambda: accepted["secret"]))
    client = make_client(credentials_from=ORIGINS)

    with pytest.raises(Unauthorized):
        await client.capture_bulk([PERSON], "batch-key-1")
    assert client.refused_since is not None
    for call in (lambda: client.capture_bulk([PERSON], "batch-key-2"), client.info):
        with pytest.raises(Unauthorized, match="not sent") as refused:
            await call()
        assert ORIGINS in str(refused.value) and str(refused.value).count(ORIGINS) == 1
    assert len(route.calls) == 1

    accepted["secret"] = API_SECRET  # the admin made the pair work again
    await client.use_credentials(Pair(API_KEY, SecretStr(API_SECRET)))
    assert client.refused_since is None
    assert len((await client.capture_bulk([PERSON], "batch-key-2")).successful) == 1
