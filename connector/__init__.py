"""capture-sync: keep a CRM fed with new contacts through its Capture API, effectively once.

The Python API (docs/python-api.md) is these names, and only these:

    from connector import sync, replay, status
    report = sync("capture-sync.toml")          # raises Unsettled, NeedsAttention, ... on a non-zero exit
    print(report.captured, report.rejected, report.exit_code)

They load when first asked for (PEP 562): every command, `--help` included, imports this package,
and none of them should pay for the engine it does not use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._api import StatusReport, replay, status, sync
    from ._errors import AuthenticationFailed, CaptureSyncError, ConfigError, NeedsAttention, SourceFailed, Unsettled
    from .config import Config, load_config
    from .delivery import RunReport
    from .exit_codes import ExitCode

__all__ = [
    "AuthenticationFailed",
    "CaptureSyncError",
    "Config",
    "ConfigError",
    "ExitCode",
    "NeedsAttention",
    "RunReport",
    "SourceFailed",
    "StatusReport",
    "Unsettled",
    "load_config",
    "replay",
    "status",
    "sync",
]

_HOME = {
    "sync": "._api",
    "replay": "._api",
    "status": "._api",
    "StatusReport": "._api",
    "RunReport": ".delivery",
    "Config": ".config",
    "load_config": ".config",
    "ExitCode": ".exit_codes",
    **dict.fromkeys(
        ("CaptureSyncError", "ConfigError", "AuthenticationFailed", "Unsettled", "NeedsAttention", "SourceFailed"),
        "._errors",
    ),
}


def __getattr__(name: str) -> Any:
    """The public names above, imported when first used; and `__version__`, read from the installed
    metadata when first asked for (importlib.metadata costs ~20 ms)."""
    if name in _HOME:
        value = getattr(import_module(_HOME[name], __name__), name)
        globals()[name] = value
        return value
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("capture-sync")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0"


def __dir__() -> list[str]:
    return [*__all__, "__version__"]
