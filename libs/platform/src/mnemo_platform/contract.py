"""The facts each RPC declares in its proto: whether a repeat is safe, and the least role that may call it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from google.protobuf import descriptor_pool
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.descriptor_pb2 import MethodOptions

from mnemo.common.v1 import options_pb2
from mnemo_platform.enums import enum_label

# A repeat of a method declaring one of these leaves the state as one call left it.
RETRY_SAFE = (MethodOptions.NO_SIDE_EFFECTS, MethodOptions.IDEMPOTENT)


def retry_safe_methods(service: ServiceDescriptor) -> list[str]:
    """The names of the service's methods that declare NO_SIDE_EFFECTS or IDEMPOTENT, in declaration order."""
    return [m.name for m in service.methods if m.GetOptions().idempotency_level in RETRY_SAFE]


@dataclass(frozen=True)
class LeastRole:
    """What a method declares about who may call it."""

    role: str
    """role is the lowest role that may call the method ("agent", …); "" means any authenticated caller."""
    action: str
    """action names what the method does, in words, for the PERMISSION_DENIED message."""


# Bounded: the path comes from the client, and a server sees only its few registered methods anyway.
@functools.lru_cache(maxsize=512)
def declared_least_role(path: str) -> LeastRole | None:
    """The least role the method at `/package.Service/Method` declares; None when it declares none or is unknown."""
    service, _, method = path.removeprefix("/").partition("/")
    try:
        descriptor = descriptor_pool.Default().FindMethodByName(f"{service}.{method}")
    except KeyError:
        return None
    options = descriptor.GetOptions()
    if not options.HasExtension(options_pb2.least_role):
        return None
    return LeastRole(
        role=enum_label(options_pb2.Role, options.Extensions[options_pb2.least_role]),
        action=options.Extensions[options_pb2.action],
    )
