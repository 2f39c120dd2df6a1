"""Structured JSON logs carrying the request id (and the trace id while OpenTelemetry traces),
and opt-in LangSmith tracing."""

from __future__ import annotations

import json
import logging
import os
import sys
from contextvars import ContextVar
from datetime import UTC, datetime

from app import tracing
from app.config import Settings

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)

_STANDARD_ATTRS = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id and any extras."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = request_id_var.get()
        if request_id:
            payload["request_id"] = request_id
        trace_id = tracing.current_trace_id()
        if trace_id:
            payload["trace_id"] = trace_id  # the same line and its trace, side by side
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False, default=str)


def configure_logging(level: str) -> None:
    """Send every log record at `level` or above to stderr as JSON (idempotent).

    The handler filters by level too: a library may set its own logger to DEBUG (bm25s does, at
    import), and the root logger's level does not stop records of such a logger.
    """
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h.formatter, JsonFormatter)]
    if not ours:
        stderr = logging.StreamHandler(sys.stderr)
        stderr.setFormatter(JsonFormatter())
        root.handlers = ours = [stderr]
    for handler in ours:
        handler.setLevel(level)
    root.setLevel(level)


def configure_tracing(settings: Settings) -> bool:
    """Turn LangSmith tracing on only when settings ask for it; nothing is sent by default."""
    if not settings.langsmith_tracing:
        os.environ["LANGSMITH_TRACING"] = "false"
        os.environ.pop("LANGCHAIN_TRACING_V2", None)
        return False
    if not settings.langsmith_api_key:
        from app.errors import ConfigurationError

        raise ConfigurationError("RAG_LANGSMITH_TRACING is on but RAG_LANGSMITH_API_KEY is empty")
    os.environ["LANGSMITH_TRACING"] = "true"
    os.environ["LANGSMITH_API_KEY"] = settings.langsmith_api_key
    os.environ["LANGSMITH_PROJECT"] = settings.langsmith_project
    return True


def error_payload(code: str, message: str, status: int) -> dict[str, str]:
    """The `error` object of an HTTP error body or SSE error event. A server-side failure
    (5xx) also carries the request id, in the message and as a field, to find it in the logs."""
    request_id = request_id_var.get()
    if status < 500 or not request_id:
        return {"code": code, "message": message}
    return {
        "code": code,
        "message": f"{message} (request id {request_id})",
        "request_id": request_id,
    }
