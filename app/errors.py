"""Typed errors with a stable machine-readable code and a message a user can act on."""

from __future__ import annotations

from typing import TypeVar


class RagError(Exception):
    """Base of every error this service raises on purpose."""

    code = "error"
    http_status = 400
    # Server errors (5xx) reach clients as a generic text unless their message is known to be
    # safe (written for clients, naming no host, URL or upstream reply): then set this.
    expose_message = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(RagError):
    """Settings are invalid or a configured component cannot be built."""

    code = "configuration_error"
    http_status = 500


class SecretsKeyProblem(ConfigurationError):
    """RAG_SECRETS_KEY is missing or unusable; the message says how to fix it (no secret)."""

    code = "secrets_key_missing"
    expose_message = True


class IngestionError(RagError):
    """A document cannot be turned into chunks; the message says why and what to do."""

    code = "ingestion_failed"
    http_status = 422


class UnsupportedFileType(IngestionError):
    code = "unsupported_file_type"
    http_status = 415


class EmptyDocument(IngestionError):
    code = "empty_document"


class CorruptDocument(IngestionError):
    code = "corrupt_document"


class EncryptedDocument(IngestionError):
    code = "encrypted_document"


class NeedsOCR(IngestionError):
    code = "needs_ocr"


class UnreadableScan(IngestionError):
    """OCR found no readable text on any page that needed it; the message names the pages."""

    code = "unreadable_scan"


class OcrQuotaExceeded(IngestionError):
    """OCR'ing this document would pass the tenant's OCR page quota; nothing was read."""

    code = "quota_exceeded"
    http_status = 413


class UndecodableText(IngestionError):
    code = "undecodable_text"


class SuspiciousArchive(IngestionError):
    """A zip-based file (DOCX, PPTX, XLSX) whose expansion is abnormal: a likely zip bomb."""

    code = "suspicious_archive"


class DocumentTooLarge(IngestionError):
    code = "document_too_large"
    http_status = 413


class ParseTimeout(IngestionError):
    code = "parse_timeout"


class DocumentTooComplex(IngestionError):
    """Parsing the file hit the parse child's memory or CPU limit."""

    code = "document_too_complex"


class JobTimedOut(IngestionError):
    """An ingestion job ran past its total time limit (RAG_JOB_TIMEOUT_S) and was stopped."""

    code = "job_timeout"


class JobPaused(Exception):
    """Not a failure: a long OCR job gave its worker back to other tenants' waiting jobs after
    a turn of pages; the pages it read are kept and it resumes from them when claimed again."""


class EmbeddingModelMismatch(RagError):
    """A tenant's index was built with another embedding model; vectors must never mix."""

    code = "embedding_model_mismatch"
    http_status = 409


class NotFound(RagError):
    code = "not_found"
    http_status = 404


Found = TypeVar("Found")


def or_not_found(found: Found | None, message: str) -> Found:
    """`found` itself, or NotFound(message) when it is None: a loader answers the same 404
    whether the thing is missing or belongs to another tenant or user."""
    if found is None:
        raise NotFound(message)
    return found


class ProviderUnavailable(RagError):
    """A configured provider (LLM server, embedding server) cannot be reached."""

    code = "provider_unavailable"
    http_status = 503


def unreachable_server_errors() -> tuple[type[Exception], ...]:
    """What a server that did not answer raises where no provider turned it into
    ProviderUnavailable: chromadb's HTTP client passes httpx's transport errors through (not
    ConnectionError). A job is retried after one; a request answers 503."""
    import httpx  # on demand: importing the errors costs nothing

    return (ConnectionError, TimeoutError, httpx.TransportError)


class ProviderUnreachable(ProviderUnavailable):
    """The identity provider did not answer, or answered with something unusable."""

    code = "identity_provider_unavailable"
    expose_message = True


class SsoFailure(RagError):
    """A sign-in that cannot complete; the message is for the person, `reason` for the log."""

    code = "sso_failed"

    def __init__(self, reason: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.reason = reason
        self.http_status = status


class ModelIntegrityError(ConfigurationError):
    """A model file does not match its expected size or sha256; it is never loaded."""

    code = "model_integrity_error"


class GenerationTimeout(ProviderUnavailable):
    """The language model did not finish (or could not start) within the configured time."""

    code = "generation_timeout"
    http_status = 504


class PageUnavailable(RagError):
    """A page cannot be shown as a picture (not a PDF, original not kept, unreadable)."""

    code = "page_unavailable"
    http_status = 409


class InvalidInput(RagError):
    """A value supplied by a user or operator (user name, tenant id, password) is not acceptable."""

    code = "invalid_input"
    http_status = 422


class PasswordTooCommon(InvalidInput):
    """A new password is, or is padded from, a commonly used password."""

    code = "password_too_common"


class PasswordContainsUsername(InvalidInput):
    """A new password contains its user's own name."""

    code = "password_contains_username"


class Conflict(RagError):
    """The thing to create already exists (for example a user name that is taken)."""

    code = "conflict"
    http_status = 409


class DocumentNameTaken(Conflict):
    """Another upload made a new document of the same name in the same collection at the same
    moment; nothing of this upload was kept, and sent again it replaces that document."""


class AuthenticationFailed(RagError):
    """Credentials or a bearer token were rejected; the message never says which part was wrong."""

    code = "unauthorized"
    http_status = 401


class TenantRequired(RagError):
    """A user name that several tenants have was given without one; told only to a caller whose
    password was right for one of them, so it reveals nothing to a guesser."""

    code = "tenant_required"
    http_status = 400


class Forbidden(RagError):
    """The caller is known but its role does not allow this (the message says which role does)."""

    code = "forbidden"
    http_status = 403


class KeyNotAllowed(Forbidden):
    """An API key asked for what only a signed-in person may do (administer users, change a
    password, make or revoke keys without the `keys:manage` scope)."""

    code = "api_key_not_allowed"


class RateLimited(RagError):
    """Too many requests for this user or client; `retry_after_s` says when to try again."""

    code = "rate_limited"
    http_status = 429

    def __init__(self, message: str, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class AccountLocked(RateLimited):
    """An account had its day's share of failed logins: clients that have not signed in to it
    recently are refused until `retry_after_s` (its own recent clients still get in)."""

    code = "account_locked"


class QuotaExceeded(RagError):
    """Storing this would exceed a tenant quota (`quota` names which); nothing was stored."""

    code = "quota_exceeded"
    http_status = 413

    def __init__(self, quota: str, message: str) -> None:
        super().__init__(message)
        self.quota = quota


class JobQueueFull(RateLimited):
    """The tenant's ingestion queue is at its quota; it drains, so the client may retry."""

    code = "quota_exceeded"
    quota = "queued_jobs"


class PromptTooLong(RagError):
    """The question and its passages do not fit the language model's context window."""

    code = "prompt_too_long"
    http_status = 422


class Overloaded(RateLimited):
    """No capacity for an answer or a stream now: 429 when the caller's own user or tenant bound
    is full, 503 when the server as a whole is; `retry_after_s` says when to come back."""

    # The message only says which bound is full and when to retry: safe to show on a 503.
    expose_message = True

    def __init__(self, message: str, retry_after_s: float, *, server_busy: bool) -> None:
        super().__init__(message, retry_after_s)
        self.server_busy = server_busy
        self.code = "server_busy" if server_busy else "concurrency_limited"
        self.http_status = 503 if server_busy else 429


# What a client is told for server-side failures: the code says what kind, the request id
# finds the details in the logs. Messages of server errors can name hosts, ports, URLs and
# upstream bodies, so they never leave the process.
_SERVER_SIDE_MESSAGES = {
    "configuration_error": "the service is misconfigured",
    "model_integrity_error": "the service is misconfigured",
    "provider_unavailable": "a component the service depends on is unavailable; try again later",
    "generation_timeout": "the language model did not answer in time; try again later",
}
GENERIC_SERVER_MESSAGE = "internal error"
_BY_STATUS = {
    503: "the service is busy or a component is unavailable; try again later",
    504: "the service did not answer in time; try again later",
}


def public_message(error: RagError) -> str:
    """The message a client may see: a client error's own text, a generic one otherwise."""
    if error.http_status < 500 or error.expose_message:
        return error.message
    return _server_side_message(error.code, error.http_status)


def _server_side_message(code: str, status: int) -> str:
    return _SERVER_SIDE_MESSAGES.get(code) or _BY_STATUS.get(status, GENERIC_SERVER_MESSAGE)


def _error_classes(base: type[RagError] = RagError) -> dict[str, type[RagError]]:
    found: dict[str, type[RagError]] = {}
    for cls in base.__subclasses__():
        found.setdefault(cls.code, cls)
        found.update({k: v for k, v in _error_classes(cls).items() if k not in found})
    return found


# code -> the first error class with that code (every error class is defined above), built
# once: GET /jobs/{id} looks a stored code up here on every poll.
_ERROR_CLASSES = _error_classes()

# Job-only codes; their messages are ours and say nothing about hosts or upstream errors.
_JOB_MESSAGES = {
    "retrying": "a component was briefly unavailable; the job will be retried automatically",
    "internal_error": "internal error while indexing; the upload was not indexed, try again later",
}
_SAFE_JOB_CODES = {"processing_interrupted"}


def public_job_error(code: str, detail: str) -> str:
    """What GET /jobs/{id} shows for a stored job error: the detail only when it is a
    client-side error's message (what is wrong with the file), a fixed text otherwise."""
    if code in _JOB_MESSAGES:
        return _JOB_MESSAGES[code]
    cls = _ERROR_CLASSES.get(code)
    if code in _SAFE_JOB_CODES or (
        cls is not None and (cls.http_status < 500 or cls.expose_message)
    ):
        return detail
    return _server_side_message(code, cls.http_status if cls is not None else 500)
