"""The http source's credential stays on its origin, for each way of giving it: a redirect (301, 302,
307, 308), a next link or a Link header to 127.0.0.2 is refused with both URLs named (redacted), or,
with `follow_foreign_origins`, fetched without the credential; https never goes down to http; plain
http with a credential goes only to loopback unless allowed. Oracle: what each upstream received."""

from __future__ import annotations

import json
from typing import Any

import pytest

from connector.plugins import build_source
from connector.problems import ConfigProblem
from connector.source import Record, SourceError

from .upstream import Upstream, items, redirect

SECRET = "tok-5ecret-7f3a9"
FORMS = ["bearer", "header", "userinfo", "query"]
FAST = {"backoff_s": 0.001, "max_backoff_s": 0.01, "max_attempts": 2}


def options(form: str, home: Upstream, path: str, **extra: Any) -> dict[str, Any]:
    """The source's options with the credential given as `form`."""
    url = home.base + path
    if form == "bearer":
        given: dict[str, Any] = {"auth_env": "ORIGIN_TOKEN", "auth_scheme": "Bearer"}
    elif form == "header":
        given = {"auth_env": "ORIGIN_TOKEN", "auth_header": "X-Api-Token"}
    elif form == "userinfo":
        url, given = url.replace("://", f"://reader:{SECRET}@"), {}
    else:
        url, given = f"{url}?api_key={SECRET}", {}
    return {"url": url, "records_path": "items", **given, **FAST, **extra}


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORIGIN_TOKEN", SECRET)


def read(opts: dict[str, Any]) -> list[Record]:
    source = build_source("crm", "http", opts)
    try:
        return [r for r in source.read(None) if isinstance(r, Record)]
    finally:
        source.close()


@pytest.mark.parametrize("code", [301, 302, 307, 308])
@pytest.mark.parametrize("form", FORMS)
def test_a_redirect_to_another_origin_is_refused_naming_both_redacted(
    form: str, code: int, home: Upstream, away: Upstream
) -> None:
    home.route("/start", redirect(code, f"{away.base}/data?sig=abc"))
    away.route("/data", items([1]))
    with pytest.raises(SourceError) as refused:
        read(options(form, home, "/start"))
    message = str(refused.value)
    assert f"refusing a redirect from {home.base}/start" in message  # the userinfo went into a header
    assert f"to {away.base}/data?sig=***: the credential is bound to {home.base}" in message
    assert "follow_foreign_origins = true" in message
    assert SECRET not in message
    assert home.got(SECRET) and away.seen == []


@pytest.mark.parametrize("code", [301, 302, 307, 308])
@pytest.mark.parametrize("form", FORMS)
def test_a_followed_foreign_redirect_carries_no_credential(
    form: str, code: int, home: Upstream, away: Upstream
) -> None:
    home.route("/start", redirect(code, f"{away.base}/data"))
    away.route("/data", items([1, 2]))
    records = read(options(form, home, "/start", follow_foreign_origins=True))
    assert [r.id for r in records] == ["1", "2"]
    assert home.got(SECRET) and len(away.seen) == 1 and not away.got(SECRET)


@pytest.mark.parametrize("pagination", ["next_link", "link_header"])
@pytest.mark.parametrize("form", FORMS)
def test_a_next_page_on_another_origin_is_refused_or_fetched_without_the_credential(
    form: str, pagination: str, home: Upstream, away: Upstream
) -> None:
    # The upstream echoes a query credential into its next link, as many APIs do.
    foreign = f"{away.base}/page2?after=1" + (f"&api_key={SECRET}" if form == "query" else "")
    home.route("/items", items([1], **{"next_link" if pagination == "next_link" else "link_header": foreign}))
    away.route("/page2", items([2]))
    with pytest.raises(
        SourceError, match=r"refusing a next page from .* to http://127\.0\.0\.2:\d+/page2\?after=\*\*\*"
    ) as refused:
        read(options(form, home, "/items", pagination=pagination))
    assert SECRET not in str(refused.value) and away.seen == []

    records = read(options(form, home, "/items", pagination=pagination, follow_foreign_origins=True))
    assert [r.id for r in records] == ["1", "2"]
    assert len(away.seen) == 1 and not away.got(SECRET)
    assert away.seen[0].startswith("GET /page2?after=1\n")


@pytest.mark.parametrize("form", FORMS)
def test_redirects_and_pages_on_the_same_origin_carry_the_credential(form: str, home: Upstream) -> None:
    home.route("/old", redirect(302, "/items"))
    home.route("/items", items([1], next_link="/more"))
    home.route("/more", items([2]))
    assert [r.id for r in read(options(form, home, "/old", pagination="next_link"))] == ["1", "2"]
    first, redirected, more = home.seen
    assert SECRET in first and SECRET in more
    # A redirect goes where its Location says: a query credential only if the server put it there.
    assert (SECRET in redirected) is (form != "query")


@pytest.mark.parametrize("form", FORMS)
def test_https_never_goes_down_to_http_even_when_foreign_origins_are_followed(
    form: str, tls_home: Upstream, home: Upstream, away: Upstream
) -> None:
    tls_home.route("/start", redirect(302, f"{home.base}/items"))
    tls_home.route("/listed", items([1], next_link=f"{away.base}/items"))
    for path, hop in (("/start", "a redirect"), ("/listed", "a next page")):
        opts = options(form, tls_home, path, pagination="next_link", follow_foreign_origins=True)
        with pytest.raises(
            SourceError, match=f"refusing {hop} from https://.*: https never goes down to http"
        ) as refused:
            read(opts)
        assert "follow_foreign_origins" not in str(refused.value)
    assert tls_home.got(SECRET) and home.seen == [] and away.seen == []


@pytest.mark.parametrize("form", ["bearer", "header", "userinfo"])
def test_plain_http_with_a_credential_goes_only_to_loopback_unless_allowed(form: str, home: Upstream) -> None:
    elsewhere = options(form, home, "/items")
    elsewhere["url"] = elsewhere["url"].replace("127.0.0.1", "crm.example.com")
    with pytest.raises(
        ConfigProblem, match=r"sources\.crm: refusing plain http to crm\.example\.com with a credential"
    ) as refused:
        build_source("crm", "http", elsewhere)
    assert SECRET not in str(refused.value)
    build_source("crm", "http", {**elsewhere, "allow_insecure_http": True})  # allowed: nothing sent yet
    build_source("crm", "http", {**elsewhere, "url": elsewhere["url"].replace("http://", "https://")})


def test_states_and_ids_hold_no_url_secret_and_a_resumed_read_sends_the_credential_again(home: Upstream) -> None:
    def pages(path: str) -> tuple[int, dict[str, str], Any]:
        if f"api_key={SECRET}" not in path:
            return 401, {}, {"error": "no key"}
        page = int(path.split("page=")[1].split("&")[0]) if "page=" in path else 1
        return 200, {}, [{"id": page * 10 + i} for i in (1, 2)] + ["junk"] if page <= 2 else []

    home.route("/pages", pages)
    url = f"{home.base.replace('://', f'://reader:{SECRET}@')}/pages?api_key={SECRET}"
    opts = {"url": url, "pagination": "page", **FAST}
    source = build_source("crm", "http", opts)
    everything = list(source.read(None))
    assert [r.id for r in everything if isinstance(r, Record)] == ["11", "12", "21", "22"]
    for item in everything:
        shown = json.dumps([item.state, item.id, item.where])
        assert SECRET not in shown and "reader" not in shown, shown
    assert everything[2].id == f"{home.base}/pages?page=1#3" and everything[2].where == f"{home.base}/pages item 3"

    home.seen.clear()
    resumed = list(build_source("crm", "http", opts).read(everything[3].state))  # after 21: page 2 again
    assert [r.id for r in resumed if isinstance(r, Record)] == ["22"]
    assert home.seen and all(f"api_key={SECRET}" in text and f"basic: reader:{SECRET}" in text for text in home.seen)
