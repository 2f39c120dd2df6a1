"""The settings of the web app, the API docs and the cited page pictures.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from pydantic import BaseModel

from app.config.fields import setting


class WebSettings(BaseModel):
    """The web app, the API docs and the cited page pictures."""

    docs_enabled: bool | None = setting(
        None,
        group="web",
        description="/docs and /redoc (served from installed assets, no CDN). Unset: on when "
        "RAG_ENV=development, off in production. true/false forces them on or off (off: both "
        "answer 404).",
    )
    page_image_max_px: int = setting(
        1600,
        group="web",
        unit="pixels",
        description="Longest side of a rendered PDF page (GET /documents/{id}/pages/{n}.png).",
        ge=200,
        le=4000,
    )
    page_image_cache_mb: int = setting(
        64,
        group="web",
        unit="MB",
        description="Rendered pages kept in memory per API process (0 disables the cache).",
        ge=0,
    )
    page_render_timeout_s: float = setting(
        20.0,
        group="web",
        unit="s",
        description="Each page is rendered in a child process, stopped after this long (a hostile "
        "PDF; 409).",
        gt=0,
    )
    page_render_slots: int = setting(
        2,
        group="web",
        unit="renders",
        description="Renders at once per API process, on threads of their own.",
        ge=1,
        le=64,
    )
    page_render_max_wait_s: float = setting(
        1.5,
        group="web",
        unit="s",
        description="A request waits at most this long for a render slot, then gets 429 (its own "
        "user or tenant holds every slot) or 503 (the server is busy), with Retry-After.",
        ge=0,
        le=30,
    )
    page_render_max_memory_mb: int = setting(
        1024,
        group="web",
        unit="MB",
        description="Address space (RLIMIT_AS) of the render child, like the parse child's.",
        ge=128,
    )
    page_render_max_cpu_s: int = setting(
        30,
        group="web",
        unit="s",
        description="CPU seconds (RLIMIT_CPU) of the render child.",
        gt=0,
    )
    page_render_max_image_mp: int = setting(
        64,
        group="web",
        unit="megapixels",
        description="A page whose embedded images hold more than this is refused (409), undecoded.",
        gt=0,
    )
    page_render_failure_ttl_s: float = setting(
        600.0,
        group="web",
        unit="s",
        description="A page that failed or timed out answers the same 409 at once for this long "
        "(per file version).",
        ge=0,
    )
