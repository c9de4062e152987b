"""The choices of the CLI's enumerated options, read from the proto enums that the server checks against.

One list each, in the contract: a kind, mode, role or agent added to a proto is accepted here with
no change to the CLI. Importing this module loads the generated code (protobuf, about 0.2 s), so
parser.py imports it only for a subcommand that has such an option.
"""

from __future__ import annotations

from mnemo.common.v1 import common_pb2, options_pb2
from mnemo.harvest.v1 import harvest_service_pb2
from mnemo.ingest.v1 import ingest_service_pb2
from mnemo.search.v1 import search_service_pb2
from mnemo_platform import enum_labels

KINDS = enum_labels(common_pb2.MemoryKind)
SEARCH_MODES = enum_labels(search_service_pb2.SearchMode)
ROLES = enum_labels(options_pb2.Role)
AGENTS = enum_labels(harvest_service_pb2.Agent)
VOTES = enum_labels(ingest_service_pb2.FeedbackVote)
PROPOSAL_KINDS = enum_labels(common_pb2.ProposalKind)
PROPOSAL_STATES = enum_labels(common_pb2.ProposalState)
