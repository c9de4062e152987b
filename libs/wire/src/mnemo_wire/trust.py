"""How far search trusts a memory: a weight per status and per provenance, times the memory's own factor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mnemo_platform.settings import SettingsError, parse_positive_float, setting

STATUS_WEIGHTS = "confirmed=1.0,active=0.85,candidate=0.6,superseded=0.3,archived=0.3,contradicted=0.2,retracted=0.1"
PROVENANCE_WEIGHTS = (
    "human=1.0,agent=1.0,consolidated=0.95,harvested_summary=0.8,extracted=0.75,imported=0.75,harvested_transcript=0.6"
)


Weights = tuple[tuple[str, float], ...]


def parse_weights(raw: str) -> Weights:
    """`name=weight,...` into sorted (name, weight) pairs; weights are non-negative numbers."""
    weights: dict[str, float] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected name=weight, got {item.strip()!r}")
        weight = float(value)
        if weight < 0:
            raise ValueError(f"weight of {name.strip()} must not be negative")
        weights[name.strip().lower()] = weight
    return tuple(sorted(weights.items()))


@dataclass(frozen=True)
class TrustSettings:
    """How far search trusts a memory, by status and by provenance (multiplied after fusion)."""

    status_weights: Weights = setting(
        "MNEMO_TRUST_STATUS_WEIGHTS",
        parse_weights(STATUS_WEIGHTS),
        "Weight per status (`status=weight,...`; unnamed statuses keep their default).",
        parse_weights,
        shown_default=f"`{STATUS_WEIGHTS}`",
    )
    provenance_weights: Weights = setting(
        "MNEMO_TRUST_PROVENANCE_WEIGHTS",
        parse_weights(PROVENANCE_WEIGHTS),
        "Weight per provenance (`provenance=weight,...`; unnamed ones keep their default).",
        parse_weights,
        shown_default=f"`{PROVENANCE_WEIGHTS}`",
    )

    suspicious_weight: float = setting(
        "MNEMO_TRUST_SUSPICIOUS_WEIGHT",
        0.5,
        "Own trust factor of a memory whose text tries to instruct the model (flagged `suspicious`).",
        parse_positive_float,
    )

    def validate(self) -> None:
        defaults_s, defaults_p = dict(parse_weights(STATUS_WEIGHTS)), dict(parse_weights(PROVENANCE_WEIGHTS))
        given_s, given_p = dict(self.status_weights), dict(self.provenance_weights)
        unknown = sorted(set(given_s) - set(defaults_s)) + sorted(set(given_p) - set(defaults_p))
        if unknown:
            raise SettingsError(f"invalid configuration: unknown trust weight names {', '.join(unknown)}")
        # Unnamed entries keep their defaults, so an operator can change one weight alone.
        object.__setattr__(self, "status_weights", tuple(sorted({**defaults_s, **given_s}.items())))
        object.__setattr__(self, "provenance_weights", tuple(sorted({**defaults_p, **given_p}.items())))

    def factor(self, status: str, provenance: str, own: float = 1.0) -> float:
        """The trust factor a search score is multiplied by: status x provenance x the memory's own."""
        return dict(self.status_weights).get(status, 1.0) * dict(self.provenance_weights).get(provenance, 1.0) * own

    def sql_factor(self, bind: Callable[[object], str], status: str, provenance: str, own: str) -> str:
        """`factor` as an SQL expression over the named columns, for a statement that ranks in the
        database; `bind` binds a value and returns its placeholder. Kept beside `factor`, so the
        formula has one home."""
        statuses, provenances = bind(dict(self.status_weights)), bind(dict(self.provenance_weights))
        return (
            f"coalesce(({statuses}::jsonb ->> {status})::float8, 1)"
            f" * coalesce(({provenances}::jsonb ->> {provenance})::float8, 1) * {own}"
        )
