"""Secret redaction for everything Mnemo stores: provider keys, detect-secrets detectors, dangerous command output.

Every secret becomes `[REDACTED:<kind>]`; see the package README for the kinds.
"""

from mnemo_redact.commands import (
    ENVIRONMENT_DUMP,
    SECRET_FILE,
    dangerous_output_kind,
    is_dangerous_command,
    is_secret_path,
    redact_command_output,
)
from mnemo_redact.core import redact
from mnemo_redact.detectors import warm_up
from mnemo_redact.model import MARKER_RE, Finding, Redaction, marker
from mnemo_redact.patterns import KINDS
from mnemo_redact.structured import redact_json

__all__ = [
    "ENVIRONMENT_DUMP",
    "KINDS",
    "MARKER_RE",
    "SECRET_FILE",
    "Finding",
    "Redaction",
    "dangerous_output_kind",
    "is_dangerous_command",
    "is_secret_path",
    "marker",
    "redact",
    "redact_command_output",
    "redact_json",
    "warm_up",
]
