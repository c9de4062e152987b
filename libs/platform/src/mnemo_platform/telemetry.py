"""OpenTelemetry set-up: OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set, otherwise none."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler, SamplingResult

_provider: TracerProvider | None = None


class _WhileExported(Sampler):
    """Records spans only once something takes them (an OTLP exporter, a test's processor).

    Unrecorded spans still carry a trace id, propagated between services and written to logs
    and audit events; recording spans nobody exports costs about a quarter of a write's CPU.
    """

    exported = False

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return (ALWAYS_ON if self.exported else ALWAYS_OFF).should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "WhileExported"


_sampler = _WhileExported()

tracer = trace.get_tracer("mnemo")


def configure_tracing(service_name: str, extra_processor: SpanProcessor | None = None) -> TracerProvider:
    """Installs the process's tracer provider once; later calls add processors to the same one."""
    global _provider
    if _provider is None:
        resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name), "service.namespace": "mnemo"}
        )
        # A sampled parent (a caller's traceparent) is followed either way.
        _provider = TracerProvider(resource=resource, sampler=ParentBased(_sampler))
        if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            _sampler.exported = True
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(_provider)
    if extra_processor is not None:
        _sampler.exported = True
        _provider.add_span_processor(extra_processor)
    return _provider


def exporting() -> bool:
    """Whether spans are recorded: something takes them (see _WhileExported)."""
    return _sampler.exported


def shutdown_tracing() -> None:
    """Flushes pending spans; called last at shutdown."""
    if _provider is not None:
        _provider.force_flush(timeout_millis=5000)


def current_trace_id() -> str:
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
