"""`redact`: find secrets with every layer, merge overlapping finds, replace each with a marker."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from mnemo_redact.detectors import detector_spans
from mnemo_redact.model import MARKER_RE, Finding, Redaction, digest, marker
from mnemo_redact.patterns import PRECEDENCE, Span, rule_spans


def redact(text: str) -> Redaction:
    """`text` with every secret replaced by `[REDACTED:<kind>]`, and what was replaced.

    Offsets in the findings refer to `text`. Markers already in `text` are left alone, so
    `redact(redact(x).text).text == redact(x).text`.
    """
    if not text:
        return Redaction(text)
    candidates = [*rule_spans(text), *detector_spans(text)]
    if not candidates:
        return Redaction(text)
    findings = merge_spans(text, outside_markers(text, candidates))
    return Redaction(apply_findings(text, findings), findings)


def outside_markers(text: str, spans: Iterable[Span]) -> list[Span]:
    """The spans whose match touches no existing marker: redacted text is never matched again."""
    markers = [m.span() for m in MARKER_RE.finditer(text)]
    if not markers:
        return list(spans)
    starts = [start for start, _ in markers]
    kept: list[Span] = []
    for span in spans:
        lo, hi = min(span.start, span.outer_start), max(span.end, span.outer_end)
        i = bisect.bisect_left(starts, hi)
        # The last marker starting before `hi` is the only one that can reach into [lo, hi).
        if i and markers[i - 1][1] > lo:
            continue
        kept.append(span)
    return kept


def merge_spans(text: str, spans: Iterable[Span]) -> tuple[Finding, ...]:
    """One finding per run of overlapping spans, of the most specific kind among them."""
    findings: list[Finding] = []
    ordered = sorted(spans)
    i = 0
    while i < len(ordered):
        start, end, kind = ordered[i].start, ordered[i].end, ordered[i].kind
        j = i + 1
        while j < len(ordered) and ordered[j].start < end:
            end = max(end, ordered[j].end)
            if PRECEDENCE.get(ordered[j].kind, len(PRECEDENCE)) < PRECEDENCE.get(kind, len(PRECEDENCE)):
                kind = ordered[j].kind
            j += 1
        findings.append(Finding(kind, start, end, digest(text[start:end])))
        i = j
    return tuple(findings)


def apply_findings(text: str, findings: tuple[Finding, ...]) -> str:
    """`text` with each finding's span replaced by its marker (findings are sorted and disjoint)."""
    parts: list[str] = []
    pos = 0
    for finding in findings:
        parts.append(text[pos : finding.start])
        parts.append(marker(finding.kind))
        pos = finding.end
    parts.append(text[pos:])
    return "".join(parts)
