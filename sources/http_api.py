"""The built-in `http` source: a JSON REST API, paginated by next link, Link header, cursor token or
page number, incremental by a `since` parameter, retrying 429 and 5xx.

An item that is not an object, or has no id, is yielded as a `BadRecord` at "<URL without its
query> item N" with the id "<page URL>#N" (the page URL is in the state already).

Inside a read the position is the page's URL and how many of its records were taken, so a read cut
short re-fetches that page and goes on after the last record; without `since` the next read
continues from the last page, which is how an append-only API shows new records.

The credential (`auth_env`, or the URL's userinfo, sent as Basic auth) goes only to the URL's
origin (`connector.outbound`): a redirect or a next page elsewhere is refused, or with
`follow_foreign_origins` fetched without it. The URL's own query parameters may be credentials too
(`?api_key=...`): page URLs are kept, in the state and record ids, without the URL's userinfo and
without those parameters, which are put back on each request to the URL's origin (and sent nowhere
else). So a resumed read sends them again, and a changed key in the config file takes effect.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Literal
from urllib.parse import urljoin

import httpx
from pydantic import Field, field_validator, model_validator
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from connector.incremental import CursorType, Row, cursor_key, read_incremental
from connector.logs import register_secret
from connector.outbound import Origin, OriginRefused, bound_client, check_hop, insecure_reason, origin_of, userinfo_auth
from connector.redact import redact_url
from connector.source import Item, Source, SourceError, SourceOptions

Pagination = Literal["none", "next_link", "link_header", "cursor", "page"]


class HttpOptions(SourceOptions):
    url: str = Field(description="The first page, e.g. https://api.example.com/v1/contacts.")
    records_path: str | None = Field(
        None, description="Dotted path of the record list in the body (default: the body)."
    )
    id_field: str = Field("id", description="Dotted path of each record's stable id.")
    params: dict[str, str] = Field(
        {}, description="Extra query parameters (no credentials: page URLs go into the state)."
    )
    auth_env: str | None = Field(None, description="Environment variable holding the credential.")
    auth_header: str = Field("Authorization", description="Header that carries the credential.")
    auth_scheme: str | None = Field(None, description="Prefix of the credential, e.g. Bearer.")
    pagination: Pagination = Field("none", description="none, next_link, link_header, cursor or page.")
    next_path: str = Field("next", description="Dotted path of the next link (next_link) or token (cursor).")
    cursor_param: str = Field("cursor", description="Query parameter that sends the token (cursor).")
    page_param: str = Field("page", description="Query parameter of the page number (page).")
    first_page: int = Field(1, description="Number of the first page (page).")
    page_size_param: str | None = Field(None, description="Query parameter of the page size.")
    page_size: int | None = Field(None, ge=1, description="Page size to ask for.")
    since_param: str | None = Field(None, description="Query parameter asking for records changed since a value.")
    since_field: str | None = Field(None, description="Dotted path of each record's value for since_param.")
    cursor_type: CursorType = Field("string", description="How since values compare: string, number or datetime.")
    timeout_s: float = Field(30.0, gt=0, description="Timeout of each request.")
    max_attempts: int = Field(5, ge=1, description="Attempts per request on 429, 5xx and network errors.")
    backoff_s: float = Field(1.0, ge=0, description="First retry delay (exponential, with jitter).")
    max_backoff_s: float = Field(60.0, ge=0, description="Longest retry delay, Retry-After included.")
    follow_foreign_origins: bool = Field(
        False, description="Follow a redirect or next page to another origin, without the credential (default: refuse)."
    )
    allow_insecure_http: bool = Field(
        False, description="Send a credential over plain http to a host other than loopback."
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL:
            raise ValueError("not a valid URL") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("must be an http:// or https:// URL")
        return value

    @model_validator(mode="after")
    def _pairs(self) -> HttpOptions:
        if (self.since_param is None) != (self.since_field is None):
            raise ValueError("set both `since_param` and `since_field`, or neither")
        if (self.page_size is None) != (self.page_size_param is None):
            raise ValueError("set both `page_size_param` and `page_size`, or neither")
        credential = self.auth_env is not None or bool(httpx.URL(self.url).userinfo)
        if credential and not self.allow_insecure_http and (why := insecure_reason(self.url)):
            raise ValueError(why)
        return self


def dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


class _Transient(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


class HttpSource(Source[HttpOptions]):
    """A JSON REST API: pages by next link, Link header, cursor token or number; `since` increments."""

    Options = HttpOptions
    options: HttpOptions

    def __init__(self, name: str, options: HttpOptions) -> None:
        super().__init__(name, options)
        self._client: httpx.Client | None = None
        self._base, _ = userinfo_auth(options.url)  # the userinfo goes as an origin-bound header
        self._origin: Origin = origin_of(options.url)
        self._bound_params = httpx.URL(self._base).params.multi_items()

    def _http(self) -> httpx.Client:
        if self._client is None:
            opts = self.options
            headers = {}
            if opts.auth_env is not None:
                credential = os.environ.get(opts.auth_env)
                if not credential:
                    raise SourceError(f"environment variable {opts.auth_env} is not set")
                register_secret(credential)
                headers[opts.auth_header] = f"{opts.auth_scheme} {credential}" if opts.auth_scheme else credential
            try:
                self._client = bound_client(
                    opts.url,
                    headers,
                    follow_foreign_origins=opts.follow_foreign_origins,
                    allow_insecure_http=opts.allow_insecure_http,
                    headers={"Accept": "application/json"},
                    timeout=opts.timeout_s,
                )
            except OriginRefused as exc:
                raise SourceError(str(exc)) from None
        return self._client

    def check(self) -> None:
        url = self._first_url(None)
        self._records(self._body(self._get(url)), url)

    def read(self, state: Any | None) -> Iterator[Item]:
        key = cursor_key(self.options.cursor_type) if self.options.since_field else None
        return read_incremental(state, self._scan, key=key)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _first_url(self, since: Any) -> str:
        opts = self.options
        params = dict(opts.params)
        if opts.pagination == "page":
            params[opts.page_param] = str(opts.first_page)
        if opts.page_size_param and opts.page_size:
            params[opts.page_size_param] = str(opts.page_size)
        if since is not None and opts.since_param:
            params[opts.since_param] = str(since)
        return self._kept(str(httpx.URL(self._base).copy_merge_params(params)))

    def _kept(self, url: str) -> str:
        """`url` as states and ids keep it: no userinfo, none of the configured URL's query pairs."""
        parsed = httpx.URL(url)
        pairs = parsed.params.multi_items()
        kept = [pair for pair in pairs if pair not in self._bound_params]
        if parsed.userinfo:
            parsed = parsed.copy_with(username=None, password=None)
        return str(parsed.copy_with(params=kept) if len(kept) != len(pairs) else parsed)

    def _sent(self, url: str) -> str:
        """A kept URL as requested: the configured query pairs put back at their own origin only."""
        if origin_of(url) != self._origin:
            return url
        names = set(httpx.URL(url).params.keys())
        missing = tuple(pair for pair in self._bound_params if pair[0] not in names)
        return str(httpx.URL(url).copy_merge_params(missing)) if missing else url

    def _scan(self, position: dict[str, Any] | None, since: Any) -> Iterator[Row]:
        if position:
            url, skip = self._kept(position["url"]), position["index"]
            self._hop(self._base, url, "a saved position")
        else:
            url, skip = self._first_url(since), 0
        while True:
            response = self._get(url)
            body = self._body(response)
            records = self._records(body, url)
            for index in range(skip, len(records)):
                yield self._row(url, index, records[index])
            skip = 0
            following = self._next_url(url, response, body, records)
            if following is None or following == url:
                return
            self._hop(url, following, "a next page")
            url = following

    def _hop(self, from_url: str, to_url: str, what: str) -> None:
        try:
            check_hop(
                from_url, to_url, self._origin, follow_foreign_origins=self.options.follow_foreign_origins, what=what
            )
        except OriginRefused as exc:
            raise SourceError(_refusal(exc)) from None

    def _row(self, url: str, index: int, data: Any) -> Row:
        opts, position = self.options, {"url": url, "index": index + 1}
        where, problem = f"{_where(url)} item {index + 1}", None
        if not isinstance(data, dict):
            data, problem = {"item": str(data)[:1000]}, "not a JSON object"
        elif (record_id := dig(data, opts.id_field)) is None or not str(record_id).strip():
            problem = f"no value in {opts.id_field!r}"
        else:
            cursor = dig(data, opts.since_field) if opts.since_field else None
            return Row(str(record_id), data, position, cursor, where)
        return Row(f"{url}#{index + 1}", data, position, where=where, problem=problem)

    def _next_url(self, url: str, response: httpx.Response, body: Any, records: list[Any]) -> str | None:
        opts = self.options
        if opts.pagination == "next_link":
            link = dig(body, opts.next_path)
            return self._kept(urljoin(url, link)) if isinstance(link, str) and link else None
        if opts.pagination == "link_header":
            link = response.links.get("next", {}).get("url")
            return self._kept(urljoin(url, link)) if link else None
        if opts.pagination == "cursor":
            token = dig(body, opts.next_path)
            return (
                str(httpx.URL(url).copy_set_param(opts.cursor_param, str(token))) if token not in (None, "") else None
            )
        if opts.pagination == "page" and records:
            page = int(httpx.URL(url).params.get(opts.page_param, opts.first_page))
            return str(httpx.URL(url).copy_set_param(opts.page_param, str(page + 1)))
        return None

    @staticmethod
    def _body(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise SourceError(f"{_where(str(response.url))} did not answer JSON") from None

    def _records(self, body: Any, url: str) -> list[Any]:
        """The page's items (each should be an object: one that is not is a bad record)."""
        records = dig(body, self.options.records_path) if self.options.records_path else body
        if not isinstance(records, list):
            where = f"`{self.options.records_path}`" if self.options.records_path else "the body"
            raise SourceError(f"{_where(url)}: {where} is not a list")
        return records

    def _get(self, url: str) -> httpx.Response:
        opts = self.options
        retrying = Retrying(
            retry=retry_if_exception_type(_Transient),
            stop=stop_after_attempt(opts.max_attempts),
            wait=self._wait,
            reraise=True,
        )
        try:
            return retrying(self._attempt, url)
        except _Transient as exc:
            raise SourceError(f"GET {_where(url)} failed after {opts.max_attempts} attempt(s): {exc}") from None

    def _attempt(self, url: str) -> httpx.Response:
        try:
            response = self._http().get(self._sent(url))
        except httpx.TransportError as exc:
            raise _Transient(f"{type(exc).__name__}") from None
        except OriginRefused as exc:
            raise SourceError(_refusal(exc)) from None
        except httpx.TooManyRedirects as exc:
            raise SourceError(f"GET {_where(url)}: {exc}") from None
        if response.status_code == 429 or response.status_code >= 500:
            raise _Transient(f"HTTP {response.status_code}", _retry_after(response.headers.get("Retry-After")))
        if response.status_code >= 400:
            raise SourceError(f"GET {_where(url)} answered HTTP {response.status_code}")
        return response

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Transient) and exc.retry_after is not None:
            return min(exc.retry_after, self.options.max_backoff_s)
        return wait_random_exponential(multiplier=self.options.backoff_s, max=self.options.max_backoff_s)(state)


def _where(url: str) -> str:
    """The URL as people see it: redacted, without its query (whose values would show as ***)."""
    return redact_url(url, query=False)


def _refusal(exc: OriginRefused) -> str:
    return str(exc) if exc.downgrade else f"{exc} (follow_foreign_origins = true follows it without the credential)"
