"""The detect-secrets layer: its named detectors, each run only on the lines that could trigger it."""

from __future__ import annotations

import functools
import re
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import NamedTuple

from mnemo_redact.patterns import Span, is_placeholder, looks_random, lower_ascii

# Each enabled plugin with cheap patterns, one of which every line it can flag must contain
# (`Trigger`s). scan_line costs about 0.25 ms a line
# whatever plugins are on, so running it on each line of a 1 MB transcript (20k lines) takes
# seconds; with the triggers only the few lines that could hold a finding are scanned, each by
# the plugins whose triggers fired in it. Tests check, plugin by plugin, that the triggers pass
# every line the plugin flags. Patterns are kept apart (not one alternation) because `re`
# searches a pattern with a literal prefix many times faster.
#
# Off on purpose: Base64HighEntropyString and HexHighEntropyString (they fire on git SHAs and
# base64 images), IPPublicDetector (an address is not a secret), PrivateKeyDetector (it reports
# only the words of the BEGIN line; the regex pack removes whole PEM blocks), and the IBM
# Cloud/COS, Cloudant and SoftLayer detectors (keyed values the assignment rule already covers;
# their `key|token` keywords would send most source lines through scan_line).
_QUOTE = "['\"`]"
# Every word of KeywordDetector's denylist contains one of these.
_KEYWORD_CORE = "(?:key|pass|pwd|secret|contrase)"
_ASSIGNED_KEYWORD = (
    rf"{_KEYWORD_CORE}\w*(?:[\]'\"]{{0,2}}[^\S\n]*(?:[:=]|!=)[=>]{{0,2}}[^\S\n]*{_QUOTE}"
    rf"|[^\s'\"`]{{0,50}}[^\S\n]*{_QUOTE})"
)
_COMPARED_KEYWORD = rf"[!=]{{2,3}}[^\S\n]*\w*{_KEYWORD_CORE}"


class Trigger(NamedTuple):
    """A pattern one of which every line a plugin can flag matches; `lower`: run over the
    lower-cased text. `needles`, as patterns.Rule's: literals every match contains (one of them),
    so a text without them skips a pattern `re` cannot search for by a literal prefix."""

    source: str
    lower: bool = False
    needles: tuple[str, ...] = ()


TRIGGERS: dict[str, tuple[Trigger, ...]] = {
    # scan_line names its file `adhoc-string-scan`, so KeywordDetector uses its quotes-required
    # patterns: `word\w*` then `:`/`=`/`==`/`!=`/`=>` and a quote; or a quote after at most 50
    # non-blank characters; or a quoted string compared to `\w*word`.
    "KeywordDetector": (
        Trigger(_ASSIGNED_KEYWORD, lower=True, needles=("key", "pass", "pwd", "secret", "contrase")),
        Trigger(_COMPARED_KEYWORD, lower=True, needles=("!!", "!=", "=!", "==")),
    ),
    "AWSKeyDetector": (
        Trigger(r"A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA"),
        Trigger(r"aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['\"][0-9a-z/+]{40}['\"]", lower=True),
    ),
    # Its own pattern: `://user:password@` without reserved characters.
    "BasicAuthDetector": (Trigger(r"://[^:/?#\[\]@!$&'()*+,;=\s]+:[^:/?#\[\]@!$&'()*+,;=\s]+@"),),
    "JwtTokenDetector": (Trigger(r"eyJ"),),
    "SlackDetector": (Trigger(r"xox[abposr]-", lower=True), Trigger(r"hooks\.slack\.com", lower=True)),
    "StripeDetector": (Trigger(r"k_live_"),),
    "NpmDetector": (Trigger(r"_authToken="),),
    "PypiTokenDetector": (Trigger(r"pypi-"),),
    "GitLabTokenDetector": (Trigger(r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-"), Trigger(r"GR1348941")),
    "GitHubTokenDetector": (Trigger(r"gh[pousr]_"),),
    "OpenAIDetector": (Trigger(r"T3BlbkFJ"),),
    "DiscordBotTokenDetector": (Trigger(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}"),),
    "TelegramBotTokenDetector": (Trigger(r":[0-9A-Za-z_-]{35}"),),
    "TwilioKeyDetector": (Trigger(r"AC[a-z0-9]{32}"), Trigger(r"SK[a-z0-9]{32}")),
    "SendGridDetector": (Trigger(r"SG\."),),
    "MailchimpDetector": (Trigger(r"-us\d"),),
    # Its patterns without their delimiters: "AP1" (a protein) or "APC" alone is not a candidate.
    "ArtifactoryDetector": (Trigger(r"AKC[a-zA-Z0-9]{10}|AP[\dABCDEF][a-zA-Z0-9]{8}"),),
    "AzureStorageKeyDetector": (Trigger(r"AccountKey="),),
    "SquareOAuthDetector": (Trigger(r"sq0csp-"),),
}

KIND_BY_TYPE: dict[str, str] = {
    "Secret Keyword": "secret-assignment",
    "AWS Access Key": "aws-access-key",
    "Basic Auth Credentials": "url-credentials",
    "JSON Web Token": "jwt",
    "Slack Token": "slack-token",
    "Stripe Access Key": "stripe-key",
    "NPM tokens": "npm-token",
    "PyPI Token": "pypi-token",
    "GitLab Token": "gitlab-token",
    "GitHub Token": "github-token",
    "OpenAI Token": "openai-key",
    "Discord Bot Token": "discord-token",
    "Telegram Bot Token": "telegram-token",
    "Twilio API Key": "twilio-key",
    "SendGrid API Key": "sendgrid-key",
    "Mailchimp Access Key": "mailchimp-key",
    "Artifactory Credentials": "artifactory-token",
    "Azure Storage Account access key": "azure-storage-key",
    "Square OAuth Secret": "square-secret",
}

# A value shorter than this is never searched for in the line: GitHubTokenDetector reports
# "ghp" (its regex has a capture group), and replacing every "ghp" would garble the text. The
# regex pack owns those shapes.
MIN_VALUE_LENGTH = 8
# Lines longer than this (minified JSON, base64 blobs) are scanned only around each trigger.
LONG_LINE = 4096
WINDOW = 1024

_AWS_KEY_ID = re.compile(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}")
_VERIFY_FILTER = "detect_secrets.filters.common.is_ignored_due_to_verification_policies"
# detect-secrets keeps its settings in process-wide state: one scan at a time.
_LOCK = threading.Lock()


@functools.cache
def _compiled() -> tuple[tuple[str, re.Pattern[str], bool, tuple[str, ...]], ...]:
    return tuple(
        (name, re.compile(trigger.source), trigger.lower, trigger.needles)
        for name, triggers in TRIGGERS.items()
        for trigger in triggers
    )


def candidate_segments(text: str) -> dict[frozenset[str], list[tuple[int, int]]]:
    """The lines of `text` to scan (windows, in a long line), grouped by the plugins triggered there."""
    lowered = lower_ascii(text)
    hits = sorted(
        (m.start(), m.end(), name)
        for name, pattern, lower, needles in _compiled()
        if not needles or any(needle in (lowered if lower else text) for needle in needles)
        for m in pattern.finditer(lowered if lower else text)
    )
    segments: list[tuple[int, int, set[str]]] = []
    for pos, hit_end, name in hits:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        if end - start > LONG_LINE:
            start, end = max(start, pos - WINDOW), min(end, hit_end + WINDOW)
        if segments and start <= segments[-1][1]:
            last = segments[-1]
            segments[-1] = (last[0], max(end, last[1]), last[2] | {name})
        else:
            segments.append((start, end, {name}))
    groups: dict[frozenset[str], list[tuple[int, int]]] = defaultdict(list)
    for start, end, names in segments:
        groups[frozenset(names)].append((start, end))
    return dict(groups)


def _value_spans(segment: str, value: str) -> Iterator[tuple[int, int]]:
    """Each occurrence of `value` in `segment` that is not part of a longer word."""
    pos = segment.find(value)
    while pos >= 0:
        end = pos + len(value)
        before = segment[pos - 1] if pos else " "
        after = segment[end] if end < len(segment) else " "
        if not (value[0].isalnum() and before.isalnum()) and not (value[-1].isalnum() and after.isalnum()):
            yield pos, end
        pos = segment.find(value, pos + 1)


def _keyword_value_is_secret(value: str) -> bool:
    """KeywordDetector takes any string after `secret…=`, `private_key…:`; keep the plausible ones.

    The regex pack already takes quoted values (passphrases too) of exact secret keys, so this
    judges odd keys (`SECRET_FILE = "secret-file"`, `secret_type = 'JSON Web Token'`,
    `sign_fn: "CustomPrivateKeySign"`): only a random-looking value counts. Backticks mean
    Markdown prose (`DB_PASSWORD`, `apiKey`).
    """
    return "`" not in value and looks_random(value)


def _kind(secret_type: str, value: str) -> str:
    kind = KIND_BY_TYPE.get(secret_type, "secret")
    if kind == "aws-access-key" and not _AWS_KEY_ID.fullmatch(value):
        return "aws-secret-key"
    return kind


def scan_segments(text: str, groups: dict[frozenset[str], list[tuple[int, int]]]) -> list[Span]:
    """Run detect-secrets over each group of segments with only that group's plugins."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import get_settings, transient_settings

    found: list[Span] = []
    with _LOCK:
        for names, segments in groups.items():
            with transient_settings({"plugins_used": [{"name": name} for name in sorted(names)]}):
                # Verification would send the secret to its provider: never, whatever the defaults.
                get_settings().disable_filters(_VERIFY_FILTER)
                for seg_start, seg_end in segments:
                    segment = text[seg_start:seg_end].rstrip("\r")
                    for secret in scan_line(segment):
                        # Some patterns include their delimiters (Artifactory's ` AKC… `).
                        value = (secret.secret_value or "").strip(" \t\"'").lstrip("=:")
                        # AWS documents example keys (…EXAMPLE); they are nobody's secret.
                        if not value or len(value) < MIN_VALUE_LENGTH or is_placeholder(value) or "EXAMPLE" in value:
                            continue
                        if secret.type == "Secret Keyword" and not _keyword_value_is_secret(value):
                            continue
                        kind = _kind(secret.type, value)
                        for start, end in _value_spans(segment, value):
                            s, e = seg_start + start, seg_start + end
                            found.append(Span(s, e, kind, s, e))
    return found


def warm_up() -> None:
    """Imports detect-secrets and loads its plugins (a few tenths of a second), so that the first
    write holding a trigger does not pay for it."""
    text = "AKC" + "0123456789abcdef"
    scan_segments(text, candidate_segments(text))


def detector_spans(text: str) -> list[Span]:
    """Findings of detect-secrets' named detectors, as spans of `text` located by their value."""
    groups = candidate_segments(text)
    return scan_segments(text, groups) if groups else []
