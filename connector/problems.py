"""The one error type for configuration that cannot work, shared by the config loader, the source
discovery and the mapping: it carries every problem at once, so a user fixes a config in one go."""

from __future__ import annotations

from pydantic import ValidationError


class ConfigProblem(Exception):
    """A configuration that cannot work; each problem names the key it is about."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def problems_from(exc: ValidationError, where: str) -> list[str]:
    """One `where.key: message` line per pydantic error, in the vocabulary of a config file."""
    problems = []
    for err in exc.errors(include_url=False):
        key = ".".join([where, *(str(part) for part in err["loc"])])
        kind = err["type"]
        if kind == "extra_forbidden":
            message = "unknown option"
        elif kind == "missing":
            message = "required option is missing"
        elif kind == "value_error":
            message = str(err["ctx"]["error"])
        else:
            message = err["msg"]
        problems.append(f"{key}: {message}")
    return problems
