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
