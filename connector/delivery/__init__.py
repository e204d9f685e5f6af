"""Delivery: from the ledger to the Capture API and back, effectively once (design 1-4)."""

from ..exit_codes import ExitCode, exit_code_for
from ._boundary import Checker, Slip, position
from .engine import DeliverySettings, Progress, extract, preview, replay, sync, to_mapped
from .job import SourceJob
from .preflight import Preflight, preflight
from .ratelimit import AdaptiveRateLimiter
from .rejects import REJECTS_MAX_BYTES, RejectsFeed
from .report import RunReport, exit_meaning, report_dict, report_from_dict
from .settle import ObjectReading, match_bulk, person_outcome, read_bulk

__all__ = [
    "REJECTS_MAX_BYTES",
    "AdaptiveRateLimiter",
    "Checker",
    "DeliverySettings",
    "ExitCode",
    "ObjectReading",
    "Preflight",
    "Progress",
    "RejectsFeed",
    "RunReport",
    "Slip",
    "SourceJob",
    "exit_code_for",
    "exit_meaning",
    "extract",
    "match_bulk",
    "person_outcome",
    "position",
    "preflight",
    "preview",
    "read_bulk",
    "replay",
    "report_dict",
    "report_from_dict",
    "sync",
    "to_mapped",
]
