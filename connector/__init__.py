"""capture-sync: keep a CRM fed with new contacts through its Capture API, effectively once."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("capture-sync")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"
