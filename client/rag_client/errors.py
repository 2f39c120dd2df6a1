"""What can go wrong, and the exit code each leads to."""

from __future__ import annotations

EXIT_OK = 0
EXIT_SOME_FAILED = 1  # some files (or the request) failed
EXIT_USAGE = 2  # bad usage or authentication


class RagClientError(Exception):
    """An error `rag` reports on stderr (or in its JSON) and exits with `exit_code`."""

    exit_code = EXIT_SOME_FAILED

    def __init__(self, message: str, code: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class UsageError(RagClientError):
    """The command line or configuration is wrong."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message, "usage_error")


class ApiError(RagClientError):
    """The service answered with an error body `{"error": {"code", "message"}}`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message, code)
        self.status = status
        if status == 401:
            self.exit_code = EXIT_USAGE


class ConnectionFailed(RagClientError):
    """The service could not be reached (after the retries)."""

    def __init__(self, url: str, reason: str | None = None) -> None:
        super().__init__(f"could not reach {url}: {reason}", "connection_failed")
