"""OpenTelemetry set-up: OTLP export (gRPC or HTTP) when OTEL_EXPORTER_OTLP_ENDPOINT is set, otherwise none."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler, SamplingResult

from mnemo_platform.settings import SettingsError

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

# The OTLP transports Mnemo can export over, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
OTLP_PROTOCOLS = ("grpc", "http/protobuf")


def otlp_protocol(signal: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The OTLP protocol for `signal` ("TRACES" or "METRICS"), or None when no endpoint is set.

    The signal's own variables win over the general ones, as the OpenTelemetry specification
    says; the protocol defaults to `grpc` (what Mnemo always exported over)."""
    env = os.environ if environ is None else environ
    if not (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")):
        return None
    name = f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"
    if not env.get(name):
        name = "OTEL_EXPORTER_OTLP_PROTOCOL"
    protocol = env.get(name, "").strip() or "grpc"
    if protocol not in OTLP_PROTOCOLS:
        raise SettingsError(f"{name}={protocol!r} is not supported: use one of {', '.join(OTLP_PROTOCOLS)}")
    return protocol


def span_exporter(environ: Mapping[str, str] | None = None) -> Any:
    """The OTLP span exporter the environment asks for, or None. The exporter reads its endpoint,
    headers and timeout from the standard OTEL_EXPORTER_OTLP_* variables itself."""
    protocol = otlp_protocol("TRACES", environ)
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

        return GrpcSpanExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

        return HttpSpanExporter()
    return None


def configure_tracing(service_name: str, extra_processor: SpanProcessor | None = None) -> TracerProvider:
    """Installs the process's tracer provider once; later calls add processors to the same one."""
    global _provider
    if _provider is None:
        resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name), "service.namespace": "mnemo"}
        )
        exporter = span_exporter()  # an unsupported protocol is refused before anything is installed
        # A caller's traceparent sets the trace id either way; its spans are recorded when this
        # process exports them and the caller sampled its own (W3C's sampled flag).
        _provider = TracerProvider(resource=resource, sampler=ParentBased(_sampler, remote_parent_sampled=_sampler))
        if exporter is not None:
            _sampler.exported = True
            _provider.add_span_processor(BatchSpanProcessor(exporter))
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


@contextlib.contextmanager
def entry_span(
    name: str, context: otel_context.Context, kind: trace.SpanKind, attributes: dict[str, Any]
) -> Iterator[trace.Span]:
    """The current span of a request entering Mnemo, a child of `context`'s (a caller's traceparent).

    While spans are recorded it is the tracer's. While none is, it is made here: the caller's trace
    id (or a new one) and a span id of its own, as the tracer would give the span it would not
    record, without the sampler and span machinery in between (about 0.1 ms of a single write's
    3 ms of CPU through the gateway, alternating runs of 2026-12-05)."""
    if exporting() or _provider is None:
        with tracer.start_as_current_span(name, context=context, kind=kind, attributes=attributes) as span:
            yield span
        return
    parent = trace.get_current_span(context).get_span_context()
    ids = _provider.id_generator
    span = trace.NonRecordingSpan(
        trace.SpanContext(
            parent.trace_id if parent.is_valid else ids.generate_trace_id(), ids.generate_span_id(), is_remote=False
        )
    )
    token = otel_context.attach(trace.set_span_in_context(span, context))
    try:
        yield span
    finally:
        otel_context.detach(token)


@contextlib.contextmanager
def background_span(name: str, **attributes: Any) -> Iterator[trace.Span]:
    """A new trace for one round of a background loop (an embedding batch, a harvest tick, a
    consolidation pass): its database statements and outbound calls are its children, not traces
    of their own. Always a root, whatever context the loop's task was created in."""
    with tracer.start_as_current_span(
        name, context=otel_context.Context(), attributes={f"mnemo.{k}": v for k, v in attributes.items()}
    ) as span:
        yield span


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """Statements and calls made inside record no spans: probes that run every few seconds
    (readiness, queue sampling), which would otherwise be a trace each."""
    with suppress_instrumentation():
        yield


def current_trace_id() -> str:
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
