"""The result types of screening, the kinds of signal, and the defaults the store applies to a suspicious memory."""

from __future__ import annotations

from dataclasses import dataclass

INSTRUCTION_OVERRIDE = "instruction-override"
ROLE_TAG = "role-tag"
STANDING_ORDER = "standing-order"
ENCODED_INSTRUCTION = "encoded-instruction"
BRIDGING = "bridging"
HIDDEN_TEXT = "hidden-text"
EXFILTRATION_LINK = "exfiltration-link"
EXFILTRATION_REQUEST = "exfiltration-request"
REMOTE_EXECUTION = "remote-execution"

KINDS = (
    INSTRUCTION_OVERRIDE,
    ROLE_TAG,
    STANDING_ORDER,
    ENCODED_INSTRUCTION,
    BRIDGING,
    HIDDEN_TEXT,
    EXFILTRATION_LINK,
    EXFILTRATION_REQUEST,
    REMOTE_EXECUTION,
)

SUSPICIOUS_LABEL = "suspicious"
"""The label a memory carries (stored, and shown in every result) when `screen` flags its text."""

TRUST_FACTOR_SUSPICIOUS = 0.5
"""The factor a suspicious memory's trust weight is multiplied by (a default; the store decides)."""

MAX_EXCERPT = 80


@dataclass(frozen=True, slots=True)
class Signal:
    """One place in the text that looks like an attempt to instruct the model.

    `start` and `end` are offsets in the text given to `screen`. `excerpt` is the readable form of
    what was flagged, at most 80 characters: invisible characters dropped, encoded or smuggled
    text decoded (so a reviewer sees the instruction, not the base64).
    """

    kind: str
    start: int
    end: int
    excerpt: str


@dataclass(frozen=True, slots=True)
class Screening:
    """`suspicious` is True when there is at least one signal; `signals` are in order of position."""

    suspicious: bool
    signals: tuple[Signal, ...] = ()

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of the signals, sorted and unique."""
        return tuple(sorted({s.kind for s in self.signals}))


CLEAN = Screening(False, ())


def excerpt(text: str) -> str:
    """`text` on one line, at most MAX_EXCERPT characters (cut with an ellipsis)."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_EXCERPT else line[: MAX_EXCERPT - 1].rstrip() + "…"
