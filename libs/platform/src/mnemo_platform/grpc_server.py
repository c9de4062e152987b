"""A grpc.aio server with health, reflection, tracing, one log line per RPC, error mapping and least roles."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform.connections import ConnectionPolicy
from mnemo_platform.context import (
    CallContext,
    call_from_metadata,
    current_call,
    new_request_id,
    reset_call,
    set_call,
)
from mnemo_platform.contract import declared_least_role
from mnemo_platform.errors import (
    INVALID_INPUT_ERRORS,
    RESOURCE_EXHAUSTED_ERRORS,
    UNAVAILABLE_ERRORS,
    Internal,
    MnemoError,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    describe_error,
    invalid_input,
)
from mnemo_platform.metrics import configure_metrics, forget_pool, observe_pool, rpc_duration, set_ready
from mnemo_platform.reasons import status_details
from mnemo_platform.telemetry import background_span, exporting, untraced

log = structlog.get_logger("mnemo.grpc")

Handler = Callable[[Any, grpc.aio.ServicerContext], Any]


# Methods anyone may call: load balancers and probes carry no principal.
_OPEN_METHODS = ("/grpc.health.v1.Health/",)
# The plumbing every server carries, which declares no least role: health (above) and reflection,
# which describes the services and touches no data.
_PLUMBING = (*_OPEN_METHODS, "/grpc.reflection.")


@contextlib.asynccontextmanager
async def _served(context: grpc.aio.ServicerContext, method: str) -> AsyncIterator[None]:
    """What every call runs inside: its caller set and checked (the principal, then the least role
    its proto declares), the caller's trace context current while no span is recorded (see
    _Traced), its errors turned into status codes, and one canonical log line with its status code
    and duration.

    One scope rather than three interceptors of one each: a single write's call went through five
    interceptors, each a wrapper and an await of its own (profile, 2026-12-05)."""
    metadata = context.invocation_metadata()
    try:
        call = call_from_metadata(metadata)
    except Unauthenticated as exc:
        if not method.startswith(_OPEN_METHODS):
            log.warning("rpc_unauthenticated", method=method, reason=exc.message)
            await _abort(context, exc)
        # Health checks come from probes, which carry no principal; they touch no data.
        call = CallContext(role="agent", workspaces=(), request_id=new_request_id())
    token = set_call(call)
    carried = None if exporting() else otel_context.attach(propagate.extract(dict(metadata or ())))
    started = time.perf_counter()
    code = grpc.StatusCode.OK
    try:
        with structlog.contextvars.bound_contextvars(request_id=call.request_id, principal=call.principal):
            try:
                try:
                    _check_least_role(method)
                    yield
                except grpc.aio.AbortError:
                    raise
                except Exception as exc:
                    await _abort(context, _mapped(exc, method))
            except grpc.aio.AbortError:
                code = context.code() or grpc.StatusCode.UNKNOWN
                raise
            except (asyncio.CancelledError, GeneratorExit):
                code = grpc.StatusCode.CANCELLED  # the client went away mid-call (or mid-stream)
                raise
            except BaseException:
                code = grpc.StatusCode.UNKNOWN
                raise
            finally:
                elapsed = time.perf_counter() - started
                code_name = code.name if isinstance(code, grpc.StatusCode) else str(code)
                log.info("rpc_completed", method=method, code=code_name, duration_ms=round(elapsed * 1000, 2))
                if not method.startswith(_PLUMBING):
                    service, _, name = method.lstrip("/").partition("/")
                    rpc_duration.record(
                        elapsed, {"rpc.service": service, "rpc.method": name, "rpc.grpc.status_code": code_name}
                    )
    finally:
        if carried is not None:
            otel_context.detach(carried)
        reset_call(token)


def _mapped(exc: Exception, method: str) -> MnemoError:
    """A domain error as it is; anything else as the status code it amounts to, INTERNAL for the unanticipated."""
    if isinstance(exc, MnemoError):
        return exc
    if isinstance(exc, tuple(INVALID_INPUT_ERRORS)):
        log.warning("rpc_invalid_input", method=method, error=type(exc).__name__)
        return invalid_input()
    if isinstance(exc, tuple(UNAVAILABLE_ERRORS)):
        log.warning("rpc_dependency_unavailable", method=method, error=describe_error(exc))
        return Unavailable(f"a dependency is unavailable: {type(exc).__name__}")
    if isinstance(exc, tuple(RESOURCE_EXHAUSTED_ERRORS)):
        log.warning("rpc_dependency_exhausted", method=method, error=type(exc).__name__)
        return ResourceExhausted(
            f"the database ran out of a resource ({type(exc).__name__}): nothing was written; "
            "retry once it has been freed"
        )
    log.exception("rpc_failed", method=method)
    return Internal("internal error in Mnemo; the server log has the details")


async def _abort(context: grpc.aio.ServicerContext, exc: MnemoError) -> None:
    """Ends the call with the error's status code, message and reason (in the status details)."""
    await context.abort(exc.code, exc.message, trailing_metadata=status_details(exc.code, exc.message, exc.reason))


def _check_least_role(method: str) -> None:
    """Refuses a caller below the least role the method's proto declares; a method declaring none, everyone."""
    if not method.startswith(_PLUMBING):
        declared = declared_least_role(method)
        if declared is None:
            raise PermissionDenied(
                f"{method} declares no least role, so nobody may call it", reasons_pb.ERROR_REASON_ROLE_TOO_LOW
            )
        if declared.role:
            current_call().require(declared.role, declared.action)


# Clients ping every KEEPALIVE_S (mnemo_platform.connections), with or without calls in flight: the
# server lets them (its minimum interval is the ConnectionPolicy's) and never answers a ping with a
# too_many_pings GOAWAY.
SERVER_KEEPALIVE_OPTIONS: list[tuple[str, int]] = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_ping_strikes", 0),
]


def _unary_served(inner: Handler, method: str) -> Handler:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        async with _served(context, method):
            return await inner(request, context)

    return handle


def _stream_served(inner: Handler, method: str) -> Handler:
    if not inspect.isasyncgenfunction(inner):
        # A handler that writes through context.write (the health service's Watch) is a
        # coroutine; grpc tells the two apart by the function's kind, so keep it.
        return _unary_served(inner, method)

    async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async with _served(context, method):
            async for item in inner(request, context):
                yield item

    return handle


class CallInterceptor(grpc.aio.ServerInterceptor):
    """Runs every unary and server-streaming handler inside _served: the one place calls are
    logged, errors mapped and roles enforced (each method's `least_role` option, read from the
    descriptor pool).

    A method whose requests stream gets no caller set, so it cannot be checked and is refused
    outright: the check fails closed. Mnemo declares no such method.
    """

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None:
            return handler
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=_unary_served(handler.unary_unary, method))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=_stream_served(handler.unary_stream, method))
        if method.startswith(_PLUMBING):
            return handler

        async def refuse(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, f"{method} streams its requests, which the role check cannot cover"
            )

        return handler._replace(
            stream_unary=refuse if handler.stream_unary else None,
            stream_stream=refuse if handler.stream_stream else None,
        )


class _Traced(grpc.aio.ServerInterceptor):
    """OpenTelemetry's server interceptor while spans are recorded (something exports them).

    While none is, it steps aside: its span would be dropped, and its wrapper is about a tenth of a
    single write's CPU. The caller's trace context is then made current by _served, so the
    trace id still reaches logs and audit events (the clients carry it, mnemo_platform.channels)."""

    def __init__(self) -> None:
        # Health and reflection are plumbing, not work worth a trace. Reflection is also a bidi
        # stream clients drop after one answer; OTel's wrapper then closes the stream's generator in
        # another context and logs "Failed to detach context" as an error.
        self.recording = aio_server_interceptor(
            filter_=filters.negate(filters.any_of(filters.health_check(), filters.service_prefix("grpc.reflection")))
        )

    async def intercept_service(self, continuation, handler_call_details):
        if exporting():
            return await self.recording.intercept_service(continuation, handler_call_details)
        return await continuation(handler_call_details)


# Appended to every server started afterwards: how a test watches what services receive.
EXTRA_INTERCEPTORS: list[grpc.aio.ServerInterceptor] = []

DEFAULT_MAX_CONCURRENT_RPCS = 256


async def _unavailable(context: grpc.aio.ServicerContext, message: str) -> None:
    await _abort(context, Unavailable(message))


class Admission(grpc.aio.ServerInterceptor):
    """Caps the calls a server runs at once and ends the ones a shutdown's grace leaves running.

    Beyond `limit` a call is refused at once with UNAVAILABLE, before its handler runs (so nothing
    was done, and any client may retry it). Once the server stops, new calls are refused the same
    way; a unary call still running when the grace is over is cancelled where it waits (a database
    statement is cancelled and its transaction rolled back) and answered UNAVAILABLE, rather than
    left to gRPC, which would drop it with CANCELLED. Health checks are neither counted nor refused:
    probes must see the server's own answer.
    """

    def __init__(self, service: str, limit: int) -> None:
        self.service = service
        self.limit = limit
        self.active = 0
        self.closing = False
        self._expired = False
        self._unary: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    async def _admit(self, context: grpc.aio.ServicerContext, method: str) -> None:
        if self.closing:
            await _unavailable(context, f"{self.service} is shutting down; the call was not started: retry")
        if self.active >= self.limit:
            log.warning("rpc_refused_busy", method=method, limit=self.limit)
            await _unavailable(
                context,
                f"{self.service} is busy: {self.limit} calls are running (MNEMO_GRPC_MAX_CONCURRENT_RPCS); "
                "the call was not started: retry with backoff",
            )
        self.active += 1
        self._idle.clear()

    def _leave(self) -> None:
        self.active -= 1
        if self.active == 0:
            self._idle.set()

    def _unary_handler(self, inner: Handler, method: str) -> Handler:
        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await self._admit(context, method)
            task = asyncio.current_task()
            assert task is not None
            self._unary.add(task)
            try:
                return await inner(request, context)
            except asyncio.CancelledError:
                if not self._expired:
                    raise  # the client went away
                log.warning("rpc_cut_at_shutdown", method=method)
                await _unavailable(
                    context, f"{self.service} stopped before the call finished; it was rolled back: retry"
                )
                raise
            finally:
                self._unary.discard(task)
                self._leave()

        return handle

    def _stream_handler(self, inner: Handler, method: str) -> Handler:
        if not inspect.isasyncgenfunction(inner):

            async def handle_coroutine(request: Any, context: grpc.aio.ServicerContext) -> Any:
                await self._admit(context, method)
                try:
                    return await inner(request, context)
                finally:
                    self._leave()

            return handle_coroutine

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await self._admit(context, method)
            try:
                async for item in inner(request, context):
                    yield item
            finally:
                self._leave()

        return handle

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(_OPEN_METHODS):
            return handler
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unary_handler(handler.unary_unary, method))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=self._stream_handler(handler.unary_stream, method))
        return handler

    async def drain(self, grace_s: float) -> int:
        """Refuses new calls, waits up to `grace_s` for the running ones, then cuts the unary calls
        still running (answered UNAVAILABLE); returns how many were cut."""
        self.closing = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout=grace_s)
        self._expired = True
        cut = list(self._unary)
        for task in cut:
            task.cancel()
        if cut:
            # Long enough for a cancelled statement's rollback and the UNAVAILABLE answer.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*cut, return_exceptions=True), timeout=5)
        return len(cut)


@dataclass(frozen=True)
class Registration:
    """A servicer and the generated function that adds it to a server."""

    add_to_server: Callable[[Any, grpc.aio.Server], None]
    servicer: Any
    service_name: str


class GrpcServer:
    """Owns one grpc.aio server: start binds and marks SERVING, stop drains and marks NOT_SERVING."""

    def __init__(
        self,
        name: str,
        address: str,
        registrations: Sequence[Registration],
        grace_s: float,
        connection: ConnectionPolicy | None = None,
        max_concurrent_rpcs: int = DEFAULT_MAX_CONCURRENT_RPCS,
    ) -> None:
        self.name = name
        self.address = address
        self.registrations = list(registrations)
        self.grace_s = grace_s
        self.connection = connection or ConnectionPolicy()
        self.health = HealthServicer()
        self.admission = Admission(name, max_concurrent_rpcs)
        self._services: list[str] = []
        self.port: int = 0
        self._server: grpc.aio.Server | None = None

    @property
    def target(self) -> str:
        """host:port clients can dial (the bound port, even when 0 was asked for), or the Unix socket."""
        if self.address.startswith("unix:"):
            return self.address
        host = self.address.rsplit(":", 1)[0]
        if host in {"0.0.0.0", "[::]", ""}:
            host = "127.0.0.1"
        return f"{host}:{self.port}"

    async def start(self) -> None:
        server = grpc.aio.server(
            interceptors=[
                _Traced(),
                # Outside admission: a call refused as busy is logged, and a caller below the
                # method's least role is refused without taking a place.
                CallInterceptor(),
                self.admission,
                *EXTRA_INTERCEPTORS,
            ],
            options=[
                # Without this a second process could bind the same port and steal half the calls.
                ("grpc.so_reuseport", 0),
                # Behind a Kubernetes ClusterIP connections, not calls, are balanced: recycle them
                # (without cutting the streams under way), and let keepalive pings through.
                *self.connection.options(),
                ("grpc.max_receive_message_length", 16 * 1024 * 1024),
                *SERVER_KEEPALIVE_OPTIONS,
            ],
        )
        names = []
        for reg in self.registrations:
            reg.add_to_server(reg.servicer, server)
            names.append(reg.service_name)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME],
            server,
        )
        try:
            self.port = server.add_insecure_port(self.address)
        except RuntimeError as exc:
            raise OSError(f"{self.name}: cannot listen on {self.address}: {exc}") from exc
        await server.start()
        self._server = server
        self._services = names
        for service in [*names, ""]:
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info("grpc_server_started", service=self.name, address=self.target)

    async def set_ready(self, ready: bool) -> None:
        """Readiness is the health of the named services; the overall ("") health stays SERVING
        while the process can answer at all (liveness): a database outage should take a replica
        out of rotation, not get it restarted."""
        status = health_pb2.HealthCheckResponse.SERVING if ready else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in self._services:
            await self.health.set(service, status)

    async def stop(self) -> None:
        if self._server is None:
            return
        # Readiness first, so load balancers stop sending new calls, then drain in-flight ones:
        # new calls are refused UNAVAILABLE, and whatever the grace leaves running is rolled back
        # and answered UNAVAILABLE (Admission) before gRPC itself stops.
        await self.health.enter_graceful_shutdown()
        cut = await self.admission.drain(self.grace_s)
        if cut:
            log.warning("rpcs_cut_at_shutdown", service=self.name, calls=cut, grace_s=self.grace_s)
        # Streams left running (a harvest run) are cancelled by gRPC after this last second.
        await self._server.stop(1.0)
        self._server = None
        log.info("grpc_server_stopped", service=self.name)


# How often a service checks that it can serve (its database answers), and how long it waits.
READINESS_INTERVAL_S = 2.0
READINESS_TIMEOUT_S = 2.0


class GrpcApp:
    """A service as a runnable component: open resources, serve, then close in reverse.

    Subclasses implement `open()` (return the servicers to register) and `close()`.
    """

    name = "service"
    max_concurrent_rpcs = DEFAULT_MAX_CONCURRENT_RPCS
    """max_concurrent_rpcs is set from MNEMO_GRPC_MAX_CONCURRENT_RPCS by whoever runs the app."""

    def __init__(self, address: str, grace_s: float) -> None:
        self.address = address
        self.grace_s = grace_s
        self.server: GrpcServer | None = None
        self._readiness: asyncio.Task[None] | None = None
        # Set by whoever builds the app from its settings (ServiceAddresses.connection_policy()).
        self.connection = ConnectionPolicy()

    @property
    def target(self) -> str:
        """host:port this service can be dialled on once started."""
        assert self.server is not None, f"{self.name} is not started"
        return self.server.target

    async def open(self) -> list[Registration]:
        raise NotImplementedError

    async def close(self) -> None:
        return None

    async def unready_reason(self) -> str | None:
        """Why the service cannot serve right now (its database does not answer), or None. Checked
        every READINESS_INTERVAL_S; the answer is the named services' gRPC health."""
        return None

    async def renew_connections(self) -> None:
        """Called when a readiness probe got no answer: the service replaces connections that may
        have died silently (a database-backed service renews its pool's connections)."""
        return None

    async def start(self) -> None:
        configure_metrics()
        # Its own trace: opening the pool and migrating are statements no request asked for.
        with background_span(f"{self.name}.start"):
            registrations = await self.open()
        pool = getattr(self, "pool", None)
        if pool is not None:
            observe_pool(self.name, pool)
        self.server = GrpcServer(
            self.name,
            self.address,
            registrations,
            self.grace_s,
            self.connection,
            max_concurrent_rpcs=self.max_concurrent_rpcs,
        )
        try:
            await self.server.start()
        except BaseException:
            await self.close()
            raise
        set_ready(self.name, True)
        self._readiness = asyncio.create_task(self._watch_readiness(), name=f"{self.name}-readiness")

    async def _probe(self) -> str | None:
        # Every READINESS_INTERVAL_S: a trace each would bury the ones worth reading.
        with untraced():
            return await self.unready_reason()

    async def _watch_readiness(self) -> None:
        ready = True
        probe: asyncio.Task[str | None] | None = None
        while True:
            await asyncio.sleep(READINESS_INTERVAL_S)
            # The probe runs as a task of its own and is not waited on past the timeout: against a
            # hung database, cancelling a statement waits for the server too (asyncpg sends it a
            # cancel request), and a wait_for would wait with it. A probe still running from the last
            # round means not ready, without a second one piling up behind it.
            if probe is None:
                probe = asyncio.ensure_future(self._probe())
            done, _ = await asyncio.wait({probe}, timeout=READINESS_TIMEOUT_S)
            silent = not done
            if not done:
                probe.cancel()
                reason: str | None = f"no answer within {READINESS_TIMEOUT_S:g} s"
            else:
                try:
                    reason = probe.result()
                except asyncio.CancelledError:
                    reason, silent = f"no answer within {READINESS_TIMEOUT_S:g} s", True
                except Exception as exc:
                    reason = describe_error(exc)
                probe = None
            # Only silence renews the connections: a path that died silently leaves connections that
            # look open and answer nothing. A probe that failed loudly (its connection reset or
            # refused) lost only the connection it was on, which the pool drops itself; renewing
            # them all then made every request after it open a connection of its own, which across
            # a slow link did not fit its deadline (tests/faults/test_network_faults.py).
            if silent:
                await self.renew_connections()
            if (reason is None) != ready and self.server is not None:
                ready = reason is None
                await self.server.set_ready(ready)
                set_ready(self.name, ready)
                if ready:
                    log.info("service_ready", service=self.name)
                else:
                    log.warning("service_not_ready", service=self.name, reason=(reason or "")[:300])

    async def stop(self) -> None:
        if self._readiness is not None:
            # Python 3.11's wait_for can swallow a cancellation that lands as the check it wraps
            # completes (gh-86296), and the watch then sleeps on: cancel until it is done.
            while not self._readiness.done():
                self._readiness.cancel()
                await asyncio.wait({self._readiness}, timeout=0.1)
            self._readiness = None
        if self.server is not None:
            await self.server.stop()
        set_ready(self.name, None)
        pool = getattr(self, "pool", None)
        if pool is not None:
            forget_pool(self.name, pool)
        await self.close()
