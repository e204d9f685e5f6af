"""Setup checks before anything is sent (issue 14): a bad setup stops a run, a bad record does not.

Two kinds of finding, kept apart because they are handled differently:
- a config problem (a mapped column the source does not have) is a mistake in the config file that
  would send every contact without that field: `check`, `sync` and `run` stop before sending;
- an unavailable source (a missing file, an empty glob, an unreachable database) may come back by
  itself: `sync` reads the other sources and the daemon keeps running, both naming the broken one.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..logs import mask_secrets
from ..redact import redact_url
from ..source import Source, SourceError
from .job import SourceJob

SHOWN_COLUMNS = 12  # a wide export would bury the problem under its column list


@dataclass
class Preflight:
    config_problems: list[str] = field(default_factory=list)  # stop everything: nothing may be sent
    unavailable: dict[str, str] = field(default_factory=dict)  # source name -> why it cannot be read now


def preflight(jobs: Sequence[SourceJob]) -> Preflight:
    """Open every source as a read would and check its mapping against its columns; every problem
    of every source at once, so a user fixes the config in one go. Blocking: it may touch files,
    databases and HTTP APIs."""
    result = Preflight()
    for job in jobs:
        try:
            job.source.check()
            columns = job.source.columns()
        except Exception as exc:  # a plugin's check may raise anything: it is that source's problem alone
            result.unavailable[job.name] = unavailable_reason(job.name, job.source, exc)
            continue
        if columns is not None:
            result.config_problems.extend(missing_columns(job, columns))
    return result


def unavailable_reason(name: str, source: Source, exc: Exception) -> str:
    """One line naming the source and where it reads from (never a database password)."""
    detail = " ".join(str(exc).split())
    message = detail if isinstance(exc, SourceError) and detail else f"{type(exc).__name__}: {detail}".rstrip(": ")
    where = _location(source)
    if where and where not in message:
        message = f"{where}: {message}"
    return mask_secrets(f"source {name!r}: {message}")


def missing_columns(job: SourceJob, columns: Sequence[str]) -> list[str]:
    """One problem per mapped column the source lacks, naming the mapping field, with a close match."""
    have = set(columns)
    problems = []
    for target, needed in job.mapping.columns().items():
        for column in needed:
            if column in have:
                continue
            problem = f"sources.{job.name}.mapping.{target}: the source has no column {column!r}"
            match = close_match(column, columns)
            if match is not None:
                problem += f"; did you mean {match!r}?"
            else:
                shown = ", ".join(repr(c) for c in columns[:SHOWN_COLUMNS])
                more = f" and {len(columns) - SHOWN_COLUMNS} more" if len(columns) > SHOWN_COLUMNS else ""
                problem += f" (it has: {shown or 'none'}{more})"
            problems.append(problem)
    return problems


def close_match(column: str, columns: Sequence[str]) -> str | None:
    """The source column a person most likely meant: compared case-insensitively, so `Email` finds
    `E-mail` and `email`."""
    folded = {c.casefold(): c for c in reversed(columns)}  # the first column wins a tie of spellings
    found = difflib.get_close_matches(column.casefold(), list(folded), n=1, cutoff=0.6)
    return folded[found[0]] if found else None


def _location(source: Source) -> str | None:
    """The path or the redacted URL a source reads, when its options say (the built-ins and most
    plugins do)."""
    options = source.options
    path, url = getattr(options, "path", None), getattr(options, "url", None)
    if isinstance(path, str) and path:
        return path
    if isinstance(url, str) and url:
        return redact_url(url)
    env = getattr(options, "url_env", None)
    return f"the URL in env {env}" if isinstance(env, str) and env else None
