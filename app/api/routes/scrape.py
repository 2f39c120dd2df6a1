"""GET /metrics: the Prometheus exposition, for a scraper holding RAG_METRICS_TOKEN.

Answers 404 while metrics are off, or when they are served on their own port
(RAG_METRICS_PORT) instead: the API's port then never shows them.
"""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request, Response

from app.api.deps import SettingsDep
from app.api.errors import ApiError, error_responses
from app.api.openapi import content_response
from app.metrics import enabled, exposition

router = APIRouter()


@router.get(
    "/metrics",
    tags=["ops"],
    response_class=Response,
    responses={
        **content_response("Prometheus text format", "text/plain"),
        **error_responses(401, 404),
    },
)
def metrics(request: Request, settings: SettingsDep) -> Response:
    """Counters and histograms of every process of the service (README "Monitoring")."""
    if not (enabled() and settings.metrics_token) or settings.metrics_port:
        raise ApiError(404, "not_found", "not found")
    given = request.headers.get("Authorization", "")
    expected = f"Bearer {settings.metrics_token}"
    if not secrets.compare_digest(given.encode(), expected.encode()):
        raise ApiError(
            401,
            "unauthorized",
            "send the metrics token as a bearer token",
            {"WWW-Authenticate": "Bearer"},
        )
    body, content_type = exposition()
    return Response(body, media_type=content_type)
