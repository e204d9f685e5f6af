"""`redact_url`, the one way a URL is shown: secrets in every part (user, password, query values,
fragment, written raw or percent-encoded) never come out; scheme, host, port and path do; anything
that is not `scheme://...` comes out as a fixed placeholder."""

from __future__ import annotations

import string
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector import redact
from connector.redact import UNPARSEABLE, hide_path, redact_text, redact_url


@pytest.fixture(autouse=True, scope="module")
def no_hidden_paths() -> Iterator[None]:
    """The webhooks of earlier tests hid their paths (`/x`...) for the whole process: not here."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(redact, "_secret_paths", set())
        yield


# Hosts and paths are lower case without "z"; every secret starts with "ZQ", so no secret can be
# found inside a host or path by chance.
_LABEL = st.text(alphabet="abcdefghijklmnopqrstuvwxy0123456789", min_size=1, max_size=12)
HOSTS = st.one_of(
    st.lists(_LABEL, min_size=1, max_size=3).map(".".join),
    st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t))),
    st.sampled_from(["[::1]", "[2001:db8::7]", "localhost"]),
)
PATHS = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxy0123456789-._~", min_size=1, max_size=10), max_size=4).map(
    lambda parts: "/" + "/".join(parts)
)
_ANY = string.ascii_letters + string.digits + string.punctuation + " \t\u00e9\u4e2d"


def secret(forbidden: str = "") -> st.SearchStrategy[str]:
    """A secret of at least 8 characters; `forbidden` are the delimiters of the part it is written
    raw into (a percent-encoded secret may hold anything). Never whitespace raw: in free text that
    ends the URL, and a URL holds none."""
    alphabet = "".join(c for c in _ANY if c not in forbidden + " \t")
    return st.text(alphabet=alphabet, min_size=6, max_size=24).map(lambda s: "ZQ" + s)


@st.composite
def urls(draw: st.DrawFn) -> tuple[str, list[str], str]:
    """(url, its secrets, how it must start when shown: scheme, masked userinfo, host, port, path)."""
    encoded = draw(st.booleans())

    def part(forbidden: str) -> str:
        value = draw(secret(forbidden))
        secrets.append(value)
        return quote(value, safe="") if encoded else value

    secrets: list[str] = []
    scheme = draw(st.sampled_from(["https", "http", "postgresql+psycopg", "HTTPS"]))
    host, path = draw(HOSTS), draw(PATHS)
    port = draw(st.one_of(st.none(), st.integers(1, 65535)))
    userinfo = draw(st.sampled_from(["", "user", "user:password", ":password"]))
    auth = ""
    if userinfo:
        user = part("/?#@:[]") if "user" in userinfo else ""
        auth = user + (":" + part("/?#@[]") if "password" in userinfo else "") + "@"
    names = draw(st.lists(st.sampled_from(["token", "api_key", "password", "sig", "page"]), max_size=3))
    query = "&".join(f"{name}={part('&#=')}" for name in names)
    fragment = part("") if draw(st.booleans()) else None
    hostport = f"{host}{'' if port is None else f':{port}'}"
    url = f"{scheme}://{auth}{hostport}{path}"
    url += f"?{query}" if query else ""
    url += f"#{fragment}" if fragment is not None else ""
    masked = {"": "", "user": "***@"}.get(userinfo, "***:***@")
    return url, secrets, f"{scheme.lower()}://{masked}{hostport}{path}"


@settings(max_examples=400, deadline=None)
@given(urls())
def test_no_secret_of_any_part_comes_out_and_host_and_path_stay(case: tuple[str, list[str], str]) -> None:
    url, secrets, start = case
    shown = redact_url(url)
    in_text = redact_text(f"GET {url} failed, retrying")
    for value in secrets:
        for form in (value, quote(value, safe="")):
            assert form not in shown and form not in in_text, (url, shown, in_text)
    assert shown == start or shown.startswith(start + "?"), (url, shown)
    assert redact_url(shown) == shown  # what is shown once is shown the same again


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=_ANY, max_size=40).filter(lambda s: "://" not in s))
def test_a_string_without_scheme_and_authority_is_never_echoed(text: str) -> None:
    assert redact_url(text) == UNPARSEABLE


def test_each_part_is_shown_as_documented() -> None:
    assert redact_url("postgresql+psycopg://reader:PW@db.internal:5433/crm?password=PW2&sslmode=require#x") == (
        "postgresql+psycopg://***:***@db.internal:5433/crm?password=***&sslmode=***"
    )
    assert (
        redact_url("https://TOKEN@api.example.com/v1/contacts?api_key") == "https://***@api.example.com/v1/contacts?***"
    )
    assert (
        redact_url("https://api.example.com/v1/contacts?page=2", query=False) == "https://api.example.com/v1/contacts"
    )
    assert redact_url("sqlite:///var/lib/crm.db") == "sqlite:///var/lib/crm.db"
    assert redact_url("https://reader:PW5ecret/db") == UNPARSEABLE  # "@" forgotten: the password is no port
    assert redact_url("https://ho st/") == UNPARSEABLE
    # A user with a raw "/" makes the rest a path: the part before "@" is masked there too.
    assert redact_url("https://us/er:PW@host/x") == "https://us/***/x"


def test_malformed_database_urls_in_text_lose_their_password() -> None:
    assert redact_url("postgresql//reader:PW5ecret@host/db") == UNPARSEABLE
    assert (
        redact_text("cannot parse 'postgresql//reader:PW5ecret@host/db'")
        == "cannot parse 'postgresql//***:***@host/db'"
    )
    assert redact_text("see https://h/x?t=1, then") == "see https://h/x?t=***, then"


def test_a_hidden_path_is_hidden_in_every_spelling() -> None:
    hide_path("https://hooks.example/services/T0/B0/ab cd")
    for spelling in ("https://hooks.example/services/T0/B0/ab%20cd", "HTTPS://HOOKS.EXAMPLE/services/T0/B0/ab cd?x=1"):
        assert "/services" not in redact_url(spelling)
    assert redact_url("https://hooks.example/services/T0/B0/other") == "https://hooks.example/services/T0/B0/other"
