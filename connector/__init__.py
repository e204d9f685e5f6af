"""capture-sync: keep a CRM fed with new contacts through its Capture API, effectively once."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`__version__` is read from the installed metadata when first asked for (importlib.metadata costs
    ~20 ms, and every command, `--help` included, imports this package)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("capture-sync")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0"
