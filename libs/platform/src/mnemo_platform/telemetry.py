"""OpenTelemetry set-up: OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set, otherwise none."""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_provider: TracerProvider | None = None

tracer = trace.get_tracer("mnemo")


def configure_tracing(service_name: str, extra_processor: SpanProcessor | None = None) -> TracerProvider:
    """Installs the process's tracer provider once; later calls add processors to the same one."""
    global _provider
    if _provider is None:
        resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name), "service.namespace": "mnemo"}
        )
        _provider = TracerProvider(resource=resource)
        if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(_provider)
    if extra_processor is not None:
        _provider.add_span_processor(extra_processor)
    return _provider


def shutdown_tracing() -> None:
    """Flushes pending spans; called last at shutdown."""
    if _provider is not None:
        _provider.force_flush(timeout_millis=5000)


def current_trace_id() -> str:
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
