"""The Capture API: models, a retrying async client and one exception per outcome."""

from .client import Attempt, CaptureClient, CredentialPair, RateGate, check_base_url, check_idempotency_key
from .encoding import encode_json
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
    explain,
)
from .retry import NO_RETRY, RetryPolicy, is_retryable

__all__ = [
    "NO_RETRY",
    "Attempt",
    "BadRequest",
    "BulkBody",
    "BulkCaptureResult",
    "BulkPersonInput",
    "CaptureClient",
    "CaptureError",
    "ClientInfo",
    "CredentialPair",
    "ErrorEnvelope",
    "IdempotencyConflict",
    "InsecureURLError",
    "InvalidIdempotencyKey",
    "OutcomeUnknown",
    "PersonCaptureResult",
    "PersonInput",
    "RateGate",
    "RateLimited",
    "RetryPolicy",
    "ServiceUnavailable",
    "SuccessEnvelope",
    "Unauthorized",
    "UnexpectedStatus",
    "check_base_url",
    "check_idempotency_key",
    "encode_bulk",
    "encode_json",
    "explain",
    "is_retryable",
]
