"""The settings of prometheus metrics and traces.

Mixed with the other concerns into the one `app.config.Settings`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from app.config.fields import setting, split_list


class MonitoringSettings(BaseModel):
    """Prometheus metrics and traces."""

    metrics_enabled: bool = setting(
        False,
        group="metrics",
        description="Serve /metrics in the Prometheus text format; needs RAG_METRICS_TOKEN or "
        "RAG_METRICS_PORT.",
    )
    metrics_token: str = setting(
        "",
        group="metrics",
        description="Bearer token scrapers send for /metrics on the API's port.",
        repr=False,
    )
    metrics_port: int | None = setting(
        None,
        group="metrics",
        description="Serve /metrics only on this port of its own (the API's /metrics then "
        "answers 404); keep it off the gateway.",
        ge=1,
        le=65535,
    )
    metrics_host: str | None = setting(
        None,
        group="metrics",
        description="Address the RAG_METRICS_PORT listener binds (empty: RAG_HOST's); it has no "
        "token, so widen it (0.0.0.0) only on a private network such as the compose stack's.",
    )
    metrics_tenant_label: str = setting(
        "",
        group="metrics",
        description="Comma-separated tenants whose answers get a `tenant` label of their own (the "
        'rest count as "other"); no tenant is a label by default.',
    )
    tracing: Literal["off", "otlp"] = setting(
        "off",
        group="metrics",
        description="OpenTelemetry traces: otlp exports spans (also on when "
        "OTEL_EXPORTER_OTLP_ENDPOINT is set).",
    )
    langsmith_tracing: bool = setting(
        False, group="tracing", description="Send traces to LangSmith."
    )
    langsmith_api_key: str | None = setting(
        None, group="tracing", description="LangSmith API key.", repr=False
    )
    langsmith_project: str = setting(
        "rag-service", group="tracing", description="LangSmith project name."
    )

    @property
    def metrics_tenants(self) -> frozenset[str]:
        """RAG_METRICS_TENANT_LABEL as the set of tenants broken out by name."""
        return frozenset(split_list(self.metrics_tenant_label))
