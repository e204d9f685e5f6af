"""The Capture API: models, a retrying async client and one exception per outcome."""

from .client import Attempt, CaptureClient, CredentialPair, RateGate, check_base_url, check_idempotency_key
from .errors import (
    BadRequest,
    CaptureError,
    IdempotencyConflict,
    InsecureURLError,
    InvalidIdempotencyKey,
    OutcomeUnknown,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
    UnexpectedStatus,
)
from .models import (
    BulkBody,
    BulkCaptureResult,
    BulkPersonInput,
    ClientInfo,
    ErrorEnvelope,
    PersonCaptureResult,
    PersonInput,
    SuccessEnvelope,
    encode_bulk,
    encode_json,
    explain,
)
from .retry import NO_RETRY, RetryPolicy, is_retryable

__all__ = [
    "Attempt", "CaptureClient", "CredentialPair", "RateGate", "check_base_url", "check_idempotency_key",
    "BadRequest", "CaptureError", "IdempotencyConflict", "InsecureURLError",
    "InvalidIdempotencyKey", "OutcomeUnknown", "RateLimited", "ServiceUnavailable",
    "Unauthorized", "UnexpectedStatus",
    "BulkBody", "BulkCaptureResult", "BulkPersonInput", "ClientInfo", "ErrorEnvelope",
    "PersonCaptureResult", "PersonInput", "SuccessEnvelope", "encode_bulk", "encode_json",
    "explain", "NO_RETRY", "RetryPolicy", "is_retryable",
]
