"""The CLI tests' `kit`, for the end-to-end checks here."""

from ..cli.conftest import kit  # noqa: F401 - a fixture, shared
