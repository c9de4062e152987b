"""A real gRPC server in front of a real service that forwards every unary call as bytes, except the
methods a drill tells it to refuse (before forwarding) or whose answer it loses (after forwarding)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import grpc


@dataclass
class Proxy:
    """Forwards to `upstream`; `refuse` and `lose` hold method names (WriteMemories, …)."""

    upstream: str
    refuse: set[str] = field(default_factory=set)
    lose: set[str] = field(default_factory=set)
    lose_next: dict[str, int] = field(default_factory=dict)
    """lose_next holds, by method name, how many of its next calls lose their answer (after forwarding)."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """calls are (method name, metadata) of every call received, in order."""
    target: str = ""
    _server: grpc.aio.Server | None = None
    _channel: grpc.aio.Channel | None = None

    def called(self, method: str) -> list[dict[str, Any]]:
        return [metadata for name, metadata in self.calls if name == method]

    async def start(self) -> Proxy:
        self._channel = grpc.aio.insecure_channel(self.upstream)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((_Forward(self),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._server, self.target = server, f"127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)
        if self._channel is not None:
            await self._channel.close()


class _Forward(grpc.GenericRpcHandler):
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
        method: str = handler_call_details.method
        proxy = self.proxy

        async def forward(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            name = method.rsplit("/", 1)[-1]
            metadata = [(k, v) for k, v in context.invocation_metadata() or () if k.startswith("x-")]
            proxy.calls.append((name, dict(metadata)))
            if name in proxy.refuse:
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"{name} refused by the drill")
            assert proxy._channel is not None
            try:
                answer: bytes = await proxy._channel.unary_unary(method)(request, metadata=metadata, timeout=10)
            except grpc.aio.AioRpcError as exc:
                await context.abort(exc.code(), exc.details() or "", tuple(exc.trailing_metadata() or ()))
            if proxy.lose_next.get(name, 0) > 0:
                proxy.lose_next[name] -= 1
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"{name}'s answer lost by the drill")
            if name in proxy.lose:
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"{name}'s answer lost by the drill")
            return answer

        return grpc.unary_unary_rpc_method_handler(forward)
