"""The other outbound clients keep their credentials on their origin too: `bound_client` (what a
plugin builds its client with), the Capture API client and the alert webhooks. Real sockets on
127.0.0.1 (the configured origin) and 127.0.0.2 (another)."""

from __future__ import annotations

import io
import logging

import httpx
import pytest
from pydantic import SecretStr

from connector.alerts import SendPolicy, Webhook
from connector.api import CaptureClient
from connector.api.errors import UnexpectedStatus
from connector.outbound import OriginRefused, bound_client

from .upstream import Upstream, items, redirect

SECRET = "plug-1n-5ecret-b4d"


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_plugin_client_refuses_a_foreign_redirect_and_never_sends_it_the_credential(
    code: int, home: Upstream, away: Upstream
) -> None:
    home.route("/start", redirect(code, f"{away.base}/data"))
    away.route("/data", items([1]))
    with bound_client(home.base + "/", {"X-Key": SECRET}) as client:
        with pytest.raises(
            OriginRefused, match=rf"from {home.base}/start to {away.base}/data: the credential is bound"
        ):
            client.get(home.base + "/start")
        assert away.seen == []
        # A call that asks httpx to follow redirects bypasses the auth flow: the request hook still strips.
        assert client.get(home.base + "/start", follow_redirects=True).status_code == 200
        assert client.get(away.base + "/data").status_code == 200  # a direct request elsewhere: no credential
    assert home.got(SECRET) and len(away.seen) == 2 and not away.got(SECRET)


def test_a_plugin_client_follows_foreign_origins_without_the_credential_when_told(
    home: Upstream, away: Upstream
) -> None:
    home.route("/start", redirect(307, f"{away.base}/back"))
    away.route("/back", redirect(302, f"{home.base}/data"))  # and back home: the credential again
    home.route("/data", items([1]))
    with bound_client(f"http://user:{SECRET}@{home.base.split('://')[1]}/", follow_foreign_origins=True) as client:
        assert client.get(home.base + "/start").json()["items"] == [{"id": 1, "email": "p1@example.org"}]
    assert [text.split("\n")[0] for text in home.seen] == ["GET /start", "GET /data"]
    assert all(f"basic: user:{SECRET}" in text for text in home.seen)
    assert len(away.seen) == 1 and not away.got(SECRET)


def test_a_plugin_client_stops_a_redirect_loop_and_refuses_plain_http_beyond_loopback(home: Upstream) -> None:
    home.route("/loop", redirect(302, "/loop"))
    with bound_client(home.base, {"X-Key": SECRET}) as client, pytest.raises(httpx.TooManyRedirects):
        client.get(home.base + "/loop")
    with pytest.raises(OriginRefused, match=r"refusing plain http to crm\.example\.com with a credential"):
        bound_client("http://crm.example.com/", {"X-Key": SECRET})
    bound_client("http://crm.example.com/", {"X-Key": SECRET}, allow_insecure_http=True).close()
    bound_client("http://crm.example.com/").close()  # no credential: nothing to protect


async def test_the_api_client_follows_no_redirect_and_names_it_redacted(home: Upstream, away: Upstream) -> None:
    home.route("/info", redirect(302, f"{away.base}/info?key=abc"))
    async with CaptureClient(home.base, "key-1", SECRET, retry_policy=None) as client:
        with pytest.raises(UnexpectedStatus) as refused:
            await client.info(retry=False)
    assert str(refused.value).startswith(f"HTTP 302: a redirect to {away.base}/info?key=***, not followed")
    assert home.got(SECRET) and not away.seen


async def test_the_api_client_goes_through_the_proxy_the_environment_names(
    away: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests are sent past httpx's client to the transport it chose for the API's origin: with
    HTTP_PROXY set, that is the proxy's (here `away`, which answers in the API's stead)."""
    info = {
        "client_name": "Forms",
        "rate_limit": 60,
        "default_lead_source": "web",
        "has_custom_field_mapping": False,
        "allowed_origins": [],
    }
    envelope = {"success": True, "statusCode": 200, "timestamp": "2026-11-27T08:00:00Z", "data": info}
    away.route("http://crm.example.test/api/info", (200, {}, envelope))
    monkeypatch.setenv("HTTP_PROXY", away.base)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with CaptureClient("http://crm.example.test/api", "key-1", SECRET, allow_insecure_http=True) as client:
        assert (await client.info(retry=False)).client_name == "Forms"
    assert [text.split("\n")[0] for text in away.seen] == ["GET http://crm.example.test/api/info"]


async def test_a_webhook_url_is_in_no_log_line_at_debug_and_its_redirect_is_not_followed(
    home: Upstream, away: Upstream, debug_logs: io.StringIO
) -> None:
    """The URL's scheme is upper case, so httpx's canonical form of it is not the string registered
    as a secret (what the exact-string mask missed)."""
    hook_path = f"/hooks/{SECRET}"
    home.route(hook_path, (200, {}, {"ok": True}))
    home.route("/moved/x", redirect(308, f"{away.base}/hooks/{SECRET}"))
    policy = SendPolicy(initial_backoff_s=0.01, max_backoff_s=0.01, max_attempts=1)
    for url in (home.base.replace("http://", "HTTP://") + hook_path + "?sig=s1gnature", home.base + "/moved/x"):
        hook = Webhook("ops", SecretStr(url), timeout_s=5, policy=policy)
        hook.post({"text": "hello"}, condition="outage")
        await hook.aclose(5)
    out = debug_logs.getvalue()
    assert f"HTTP Request: POST {home.base}/***?sig=*** " in out
    assert "HTTP 308: a redirect, not followed" in out
    for secret in (SECRET, "s1gnature", "/moved/x"):
        assert secret not in out
    assert home.got(SECRET) and away.seen == []


def test_urls_in_library_log_lines_are_redacted_before_any_handler(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="httpx"):
        logging.getLogger("httpx").info(
            "HTTP Request: %s %s", "GET", httpx.URL(f"https://u:{SECRET}@h.example/p?t={SECRET}")
        )
    assert caplog.messages == ["HTTP Request: GET https://***:***@h.example/p?t=***"]
