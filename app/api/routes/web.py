"""The built-in web app at `/` and the API docs (`/docs`, `/redoc`), all served offline.

The app is plain HTML, CSS and JavaScript modules from `app/web/static`; the docs pages load
Swagger UI and ReDoc from the `fastapi-offline` package's files, never from a CDN.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from app.api.errors import ApiError
from app.config import Settings

STATIC_DIR = Path(__file__).resolve().parents[2] / "web" / "static"
DOCS_ASSETS_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
STATIC_URL = "/static"
DOCS_ASSETS_URL = "/docs-assets"
REDOC_JS_URL = "/docs-offline/redoc.standalone.js"
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"

# Only this origin: no CDN, no inline script; blob: for page pictures fetched with the token.
APP_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

# The docs pages need their inline start-up script and styles; everything else stays local
# (ReDoc's bundle would fetch a vendor logo from a CDN: this makes the browser refuse it).
DOCS_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
        "'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; "
        "worker-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(include_in_schema=False)


_BASE_TAG = '<base href="/">'


@cache
def _index_template() -> str:
    page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    assert _BASE_TAG in page, "index.html must carry the base tag the prefix is written into"
    return page


def _prefix(request: Request) -> str:
    """The path prefix a gateway serves us under (RAG_ROOT_PATH or a trusted proxy's), or ""."""
    return str(request.scope.get("root_path", "")).rstrip("/")


@router.get("/")
def web_app(request: Request) -> HTMLResponse:
    """The web app's single page; its links resolve under the gateway's path prefix."""
    base = f'<base href="{html.escape(_prefix(request), quote=True)}/">'
    page = _index_template().replace(_BASE_TAG, base, 1)
    return HTMLResponse(page, headers=APP_SECURITY_HEADERS)


def docs_enabled(settings: Settings) -> bool:
    """Whether /docs and /redoc are served: RAG_DOCS_ENABLED, else only in development."""
    if settings.docs_enabled is not None:
        return settings.docs_enabled
    return settings.env == "development"


def _require_docs(request: Request) -> None:
    if not docs_enabled(request.app.state.container.settings):
        raise ApiError(404, "not_found", "Not Found")  # the same answer as any unknown path


def _docs_page(
    request: Request, render: Callable[..., HTMLResponse], name: str, **assets: Any
) -> HTMLResponse:
    """A docs page drawn by `render` with these assets (404 unless RAG_DOCS_ENABLED): titled
    after the app, reading the OpenAPI document under the gateway's prefix, with the docs'
    security headers."""
    _require_docs(request)
    page = render(
        openapi_url=_prefix(request) + request.app.openapi_url,
        title=f"{request.app.title} - {name}",
        **assets,
    )
    page.headers.update(DOCS_SECURITY_HEADERS)
    return page


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI from installed assets (RAG_DOCS_ENABLED)."""
    assets = _prefix(request) + DOCS_ASSETS_URL
    return _docs_page(
        request,
        get_swagger_ui_html,
        "Swagger UI",
        swagger_js_url=f"{assets}/swagger-ui-bundle.js",
        swagger_css_url=f"{assets}/swagger-ui.css",
        swagger_favicon_url=f"{assets}/favicon.png",
        # Swagger UI would otherwise load a validator badge from an external site.
        swagger_ui_parameters={"validatorUrl": None},
    )


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    """ReDoc from installed assets (RAG_DOCS_ENABLED); no web fonts."""
    root = _prefix(request)
    return _docs_page(
        request,
        get_redoc_html,
        "ReDoc",
        redoc_js_url=root + REDOC_JS_URL,
        redoc_favicon_url=f"{root}{DOCS_ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )


@cache
def _offline_redoc_bundle() -> bytes:
    """ReDoc's bundle without its one hard-wired CDN image (the vendor logo): an empty data URL
    instead, which ReDoc's own error handler hides. The rest of the bundle is unchanged."""
    bundle = (DOCS_ASSETS_DIR / "redoc.standalone.js").read_bytes()
    return bundle.replace(REDOC_CDN_LOGO.encode(), b"data:,")


@router.get(REDOC_JS_URL)
def redoc_bundle() -> Response:
    """The ReDoc script, without its CDN request."""
    return Response(
        _offline_redoc_bundle(),
        media_type="text/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )


def install_web(app: FastAPI) -> None:
    """Serve the web app, its static files and the offline docs from this process."""
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="static")
    app.mount(DOCS_ASSETS_URL, StaticFiles(directory=DOCS_ASSETS_DIR), name="docs-assets")
    app.include_router(router)
