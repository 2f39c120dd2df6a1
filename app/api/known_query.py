"""Query parameters a route does not read are refused (422), never ignored.

FastAPI leaves a parameter it does not know unread. For a filter that is a silent failure: a
script listing `GET /documents?collection_id=manuals` (the field of the response, not the
parameter, which is `collection`) was shown every document of the tenant, and would have
acted on all of them. JSON bodies already refuse unknown fields; this does the same for the
query string of every authenticated route.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from app.api.errors import ApiError

# Route (by identity: routes compare by their path) -> the query parameters it reads.
_read_by: dict[int, frozenset[str]] = {}


async def refuse_unknown_query(request: Request) -> None:
    """422 naming the parameters the matched route does not read, and those it does (on the
    event loop, as it reads only the route: no hop to the thread pool per request)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    known = _read_by.get(id(route))
    if known is None:
        known = _read_by.setdefault(id(route), frozenset(_query_names(route.dependant)))
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        reads = ", ".join(sorted(known)) or "none"
        raise ApiError(
            422,
            "validation_error",
            f"unknown query parameter(s): {', '.join(unknown)}; this route reads: {reads}",
        )


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters of a route's function and of every dependency it has."""
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names
