"""Memory-poisoning screen: flags text that tries to instruct the model before Mnemo stores it.

`screen(text)` returns a `Screening`; see the package README for the kinds and the policy.
"""

from mnemo_guard.core import screen
from mnemo_guard.model import KINDS, SUSPICIOUS_LABEL, TRUST_FACTOR_SUSPICIOUS, Screening, Signal

__all__ = ["KINDS", "SUSPICIOUS_LABEL", "TRUST_FACTOR_SUSPICIOUS", "Screening", "Signal", "screen"]
