"""Typed errors with a stable machine-readable code and a message a user can act on."""

from __future__ import annotations


class RagError(Exception):
    """Base of every error this service raises on purpose."""

    code = "error"
    http_status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(RagError):
    """Settings are invalid or a configured component cannot be built."""

    code = "configuration_error"
    http_status = 500


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


class UndecodableText(IngestionError):
    code = "undecodable_text"


class SuspiciousArchive(IngestionError):
    """A zip-based file (DOCX, PPTX, XLSX) whose expansion is abnormal: a likely zip bomb."""

    code = "suspicious_archive"


class DocumentTooLarge(IngestionError):
    code = "document_too_large"
    http_status = 413


class ReversedText(IngestionError):
    """Extracted right-to-left text came out in visual (reversed) order and could not be fixed."""

    code = "reversed_text"


class ParseTimeout(IngestionError):
    code = "parse_timeout"


class EmbeddingModelMismatch(RagError):
    """A tenant's index was built with another embedding model; vectors must never mix."""

    code = "embedding_model_mismatch"
    http_status = 409


class NotFound(RagError):
    code = "not_found"
    http_status = 404


class ProviderUnavailable(RagError):
    """A configured provider (LLM server, embedding server) cannot be reached."""

    code = "provider_unavailable"
    http_status = 503


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


class Conflict(RagError):
    """The thing to create already exists (for example a user name that is taken)."""

    code = "conflict"
    http_status = 409


class AuthenticationFailed(RagError):
    """Credentials or a bearer token were rejected; the message never says which part was wrong."""

    code = "unauthorized"
    http_status = 401


class RateLimited(RagError):
    """Too many requests for this user or client; `retry_after_s` says when to try again."""

    code = "rate_limited"
    http_status = 429

    def __init__(self, message: str, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
