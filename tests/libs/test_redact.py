"""Redaction removes every planted secret, keeps ordinary text, and drops dangerous command output whole."""

from __future__ import annotations

import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo_redact import (
    ENVIRONMENT_DUMP,
    KINDS,
    MARKER_RE,
    SECRET_FILE,
    Finding,
    dangerous_output_kind,
    is_dangerous_command,
    is_secret_path,
    marker,
    redact,
    redact_command_output,
    redact_json,
)
from mnemo_redact.detectors import KIND_BY_TYPE, MIN_VALUE_LENGTH, TRIGGERS, _compiled, candidate_segments
from mnemo_redact.model import digest
from mnemo_redact.patterns import RULES, lower_ascii, rule_spans
from tests.corpora.redact import (
    B64URL,
    BENIGN,
    Planted,
    _chars,
    fake_pem,
    image_line,
    planted_secrets,
    planted_transcript,
)

README = Path(__file__).resolve().parents[2] / "libs" / "redact" / "README.md"
PLANTED = planted_secrets(seed=7)
BY_LABEL = {p.label: p for p in PLANTED}
# Every kind the issue and the session-formats notes name.
PROMISED_KINDS = {
    "anthropic-key",
    "openai-key",
    "openrouter-key",
    "huggingface-token",
    "github-token",
    "gitlab-token",
    "npm-token",
    "pypi-token",
    "aws-access-key",
    "aws-secret-key",
    "slack-token",
    "google-api-key",
    "stripe-key",
    "jwt",
    "private-key",
    "bearer-token",
    "basic-auth",
    "secret-assignment",
    "url-credentials",
}


def _rng_key(prefix: str, n: int = 36, seed: int = 1) -> str:
    return prefix + _chars(random.Random(seed), B64URL.replace("-", "").replace("_", ""), n)


def _finding_covering(result_findings: tuple[Finding, ...], text: str, secret: str) -> Finding:
    start = text.index(secret)
    covering = [f for f in result_findings if f.start <= start and f.end >= start + len(secret)]
    assert len(covering) == 1, f"expected one finding over the secret, got {result_findings}"
    return covering[0]


# --- the planted corpus -----------------------------------------------------------------------


def test_the_planted_corpus_covers_every_promised_kind() -> None:
    assert {p.kind for p in PLANTED} >= PROMISED_KINDS


@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: p.label)
def test_each_planted_secret_is_removed_and_named_by_its_kind(planted: Planted) -> None:
    result = redact(planted.text)
    assert planted.secret not in result.text
    finding = _finding_covering(result.findings, planted.text, planted.secret)
    assert finding.kind == planted.kind
    assert marker(planted.kind) in result.text
    # The redaction is tight: what precedes the secret survives, and little beyond it is taken.
    secret_start = planted.text.index(planted.secret)
    assert result.text.startswith(planted.text[: finding.start])
    assert secret_start - finding.start <= len("AccountKey=")
    assert finding.end - (secret_start + len(planted.secret)) <= 2


@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: p.label)
def test_findings_point_at_the_secret_in_the_original_text_and_keep_only_a_digest(planted: Planted) -> None:
    result = redact(planted.text)
    finding = _finding_covering(result.findings, planted.text, planted.secret)
    assert finding.digest == digest(planted.text[finding.start : finding.end])
    assert re.fullmatch(r"[0-9a-f]{12}", finding.digest)
    assert planted.secret not in repr(result.findings)
    # Findings are in order and disjoint, so the marker for each sits where its secret was.
    ends = [f.end for f in result.findings]
    starts = [f.start for f in result.findings]
    assert all(end <= next_start for end, next_start in zip(ends, starts[1:], strict=False))


@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: p.label)
def test_redacting_twice_changes_nothing_more(planted: Planted) -> None:
    once = redact(planted.text)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.findings == ()


def test_the_text_around_a_secret_is_kept_exactly() -> None:
    token = _rng_key("ghp_")
    text = f"Pushing with {token} now.\nNext line stays."
    assert redact(text).text == "Pushing with [REDACTED:github-token] now.\nNext line stays."


def test_windows_line_endings_stay_outside_the_redacted_value() -> None:
    text = "DB_USER=app\r\nDB_PASSWORD=Fk7x9Qw2Lm\r\nDB_NAME=app\r\n"
    assert redact(text).text == "DB_USER=app\r\nDB_PASSWORD=[REDACTED:secret-assignment]\r\nDB_NAME=app\r\n"


def test_offsets_stay_right_when_lower_casing_changes_the_length_of_the_text() -> None:
    # "İ".lower() is two characters; case-insensitive rules must still report original offsets.
    token = _rng_key("ghp_")
    text = f"İstanbul İİ password = 'Fk7pw-9912' and {token}"
    result = redact(text)
    assert result.text == "İstanbul İİ password = '[REDACTED:secret-assignment]' and [REDACTED:github-token]"
    assert [text[f.start : f.end] for f in result.findings] == ["Fk7pw-9912", token]


# --- ordinary text ------------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "text"), BENIGN, ids=[label for label, _ in BENIGN])
def test_ordinary_text_is_kept_verbatim(label: str, text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.findings == ()
    # Positive control: the same text with a secret in it is redacted, and the text survives.
    planted = BY_LABEL["env-db-password"]
    mixed = redact(f"{text}\n{planted.text}")
    assert planted.secret not in mixed.text
    assert mixed.text.startswith(text + "\n")


def test_base64_image_data_is_kept_verbatim() -> None:
    image = image_line(random.Random(3), size=200_000)
    assert redact(image).text == image
    token = _rng_key("sk-ant-api03-", 93)
    assert redact(image + " " + token).text == image + " [REDACTED:anthropic-key]"


def test_a_public_key_block_is_kept_but_a_private_one_is_not() -> None:
    public = BY_LABEL["pem-rsa"].secret.replace("RSA PRIVATE KEY", "PUBLIC KEY")
    private = BY_LABEL["pem-rsa"].secret
    assert redact(public).text == public
    assert redact(private).text == "[REDACTED:private-key]"


def test_a_truncated_private_key_loses_every_body_line() -> None:
    pem = fake_pem(random.Random(5))
    body = pem.splitlines()[1:-1]
    truncated = "\n".join(pem.splitlines()[:-3]) + "\n... [output truncated]"
    result = redact(truncated)
    assert result.text == "[REDACTED:private-key]\n... [output truncated]"
    assert not any(line in result.text for line in body)


# --- overlapping patterns and markers ---------------------------------------------------------


def test_overlapping_patterns_merge_into_one_finding_of_the_most_specific_kind() -> None:
    anthropic = _rng_key("sk-ant-api03-", 93) + "AA"
    openai = _rng_key("sk-proj-", 120)
    github = _rng_key("ghp_")
    cases = {
        f'curl -H "Authorization: Bearer {anthropic}"': 'curl -H "Authorization: Bearer [REDACTED:anthropic-key]"',
        f"OPENAI_API_KEY={openai}": "OPENAI_API_KEY=[REDACTED:openai-key]",
        f"https://x:{github}@github.com/a/b": "https://x:[REDACTED:github-token]@github.com/a/b",
        f'{{"token": "{github}"}}': '{"token": "[REDACTED:github-token]"}',
    }
    for text, expected in cases.items():
        result = redact(text)
        assert result.text == expected
        assert len(result.findings) == 1


def test_existing_markers_are_never_matched_again() -> None:
    text = "API_KEY=[REDACTED:openai-key]\npostgres://u:[REDACTED:url-credentials]@db/app\ntoken: [REDACTED:jwt]"
    assert redact(text) == redact(text).__class__(text, ())
    # Positive control: a live key beside the markers is still redacted.
    github = _rng_key("ghp_")
    assert redact(f"{text}\n{github}").text == f"{text}\n[REDACTED:github-token]"


_FRAGMENTS = [p.text for p in PLANTED] + [text for _, text in BENIGN]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=5),
    joiners=st.lists(st.sampled_from(["", " ", "\n", "=", ": ", '"', "'", "/", ",", "&"]), min_size=5, max_size=5),
)
def test_any_mix_of_corpus_text_is_redacted_idempotently(parts: list[str], joiners: list[str]) -> None:
    text = parts[0] + "".join(j + p for j, p in zip(joiners, parts[1:], strict=False))
    once = redact(text)
    assert redact(once.text).text == once.text
    for finding in once.findings:
        assert 0 <= finding.start < finding.end <= len(text)


# Shapes the planted corpus does not hold (fake values, built so no scanner takes them for real).
_MORE_SHAPES = [
    ("aws-secret-key", "creds AKIA" + "Q7ZX4M2N8P5R6T1W" + ", " + "wJalrXUtnFMI7K7MDENGbPxRfiCYz" + "q9Xk2Lm4Np7"),
    ("stripe-key", "signing with whsec_" + "Zk3q9Xw2Lm4Np7Rt5Vb8Yc1D"),
    ("google-oauth-secret", "client secret GOCSPX-" + "Zk3q9Xw2Lm4Np7Rt5Vb8Yc1D"),
    ("google-oauth-token", "token ya29." + "a0AfB_byZk3q9Xw2Lm4Np7Rt5Vb8Yc1D"),
    ("slack-token", "app token xapp-1-" + "A0123BCDEF4-5678901234567-abcdef"),
    (
        "private-key",
        "PuTTY-User-Key-File-3: ssh-rsa\nPrivate-Lines: 2\n" + "QUJDREVGR0hJSktMTU5PUA==\nUVJTVFVWV1hZWg==",
    ),
]


@pytest.mark.parametrize(("kind", "text"), _MORE_SHAPES, ids=[kind for kind, _ in _MORE_SHAPES])
def test_each_rule_removes_its_shape(kind: str, text: str) -> None:
    result = redact(text)
    assert kind in {f.kind for f in result.findings}, result
    # The words before the secret stay.
    assert result.text.split()[0] == text.split()[0]


def test_every_match_of_a_rule_holds_one_of_its_needles() -> None:
    """A rule skips a text without its needles: sound only if no match can do without one. The
    patterns run here without that gate, over the whole corpus and the transcript."""
    texts = [
        *_FRAGMENTS,
        *(text for _, text in _MORE_SHAPES),
        planted_transcript(size=200_000, seed=3)[0],
        *(text for texts in _PLUGIN_SAMPLES.values() for text in texts),
    ]
    matched = set()
    for text in texts:
        lowered = lower_ascii(text)
        for rule in RULES:
            for match in rule.pattern.finditer(lowered if rule.lower else text):
                matched.add(rule.pattern.pattern)
                assert any(needle in match.group(0) for needle in rule.needles), (rule.kind, match.group(0))
        for _, pattern, lower, needles in _compiled():
            for match in pattern.finditer(lowered if lower else text):
                matched.add(pattern.pattern)
                assert not needles or any(needle in match.group(0) for needle in needles), match.group(0)
    # The check met every rule and gated trigger (one the corpus never matches would pass unseen).
    gated = {pattern.pattern for _, pattern, _, needles in _compiled() if needles}
    assert gated and matched >= {rule.pattern.pattern for rule in RULES} | gated


# --- the detect-secrets layer -----------------------------------------------------------------

# Lines each plugin flags (checked below), so the trigger test exercises every plugin.
_PLUGIN_SAMPLES: dict[str, list[str]] = {
    "KeywordDetector": [
        'password = "hunter2hunter2"',
        'db_secret: "abcd1234efgh"',
        '"abc12345xyz" == my_password',
        'password => "abc12345xyz"',
        'contraseña = "abc12345xyz"',
        'secret_value "abcd12345678";',
        'PASSWD="Zx81!kdjw"',
    ],
    "AWSKeyDetector": ["key_id = AKIAZ7QX4M2N8P5R6T1W", "aws_key = 'Fk7abcdEFGH1234ijklMNOP5678qrstUVWX90yz'"],
    "BasicAuthDetector": ["https://admin:Fk7pass1@example.com/x"],
    "JwtTokenDetector": [BY_LABEL["jwt-in-log"].secret],
    "SlackDetector": ["xoxb-123456789012-1234567890123-Fk7abcdefghijklmnop", BY_LABEL["slack-webhook-url"].secret],
    "StripeDetector": ["sk_live_" + "Fk7abcdefghijklmnopqrstu"],
    "NpmDetector": ["//registry.npmjs.org/:_authToken=npm_Fk7abcdefghijklmnopqrstuvwxyz012345"],
    "PypiTokenDetector": [BY_LABEL["pypirc"].secret],
    "GitLabTokenDetector": ["GR1348941Fk7abcdefghijklmnopq", "glpat-Fk7abcdefghijklmnopq"],
    "GitHubTokenDetector": ["ghp_Fk7abcdefghijklmnopqrstuvwxyz0123456"],
    "OpenAIDetector": [BY_LABEL["python-openai-legacy"].secret],
    "DiscordBotTokenDetector": ["MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs"],
    "TelegramBotTokenDetector": [BY_LABEL["telegram-bot"].secret],
    "TwilioKeyDetector": [BY_LABEL["twilio"].secret, "AC" + "0a1b" * 8],
    "SendGridDetector": [BY_LABEL["sendgrid"].secret],
    "MailchimpDetector": [BY_LABEL["mailchimp"].secret],
    "ArtifactoryDetector": ["token AKCFk7abcdefgh ", "AP6Fk7abcdefgh"],
    "AzureStorageKeyDetector": [BY_LABEL["azure-connection-string"].text],
    "SquareOAuthDetector": [BY_LABEL["square"].secret],
}


def _flagged_by(plugin: str, line: str) -> bool:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    with transient_settings({"plugins_used": [{"name": plugin}]}):
        return any(scan_line(line))


def _triggered_plugins(text: str, line_start: int, line_end: int) -> set[str]:
    return {
        name
        for names, segments in candidate_segments(text).items()
        for s, e in segments
        if s <= line_start and e >= line_end
        for name in names
    }


@pytest.mark.parametrize("plugin", sorted(TRIGGERS), ids=str)
def test_a_plugin_meets_every_line_it_would_flag(plugin: str) -> None:
    """The prefilter is safe: with and without it, each plugin flags the same lines of the corpus."""
    lines = [line for text in _FRAGMENTS for line in text.splitlines()] + _PLUGIN_SAMPLES[plugin]
    lines += [line for _, text in BENIGN for line in text.splitlines()]
    text = "\n".join(lines)
    flagged = 0
    pos = 0
    for line in lines:
        if _flagged_by(plugin, line):
            flagged += 1
            assert plugin in _triggered_plugins(text, pos, pos + len(line)), f"trigger misses {line!r}"
        pos += len(line) + 1
    assert flagged >= len(_PLUGIN_SAMPLES[plugin]), "positive control: the samples exercise the plugin"


def test_the_enabled_plugins_exist_and_the_entropy_plugins_are_off() -> None:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    plugins = {cls.__name__: secret_type for secret_type, cls in get_mapping_from_secret_type_to_class().items()}
    assert set(TRIGGERS) <= set(plugins)
    assert {plugins[name] for name in TRIGGERS} <= set(KIND_BY_TYPE)
    assert not {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"} & set(TRIGGERS)
    assert set(KIND_BY_TYPE.values()) <= set(KINDS)


@pytest.mark.parametrize(
    "label", ["telegram-bot", "sendgrid", "twilio", "azure-connection-string", "square", "mailchimp"], ids=str
)
def test_detect_secrets_catches_shapes_the_regex_pack_does_not_know(label: str) -> None:
    planted = BY_LABEL[label]
    assert not [s for s in rule_spans(planted.text) if s.start <= planted.text.index(planted.secret) < s.end]
    assert planted.secret not in redact(planted.text).text


def test_a_short_detector_value_is_never_replaced_as_a_string() -> None:
    # GitHubTokenDetector reports "ghp"; replacing every "ghp" would garble the prose.
    token = _rng_key("ghp_")
    text = f"{token} is a token; the ghp prefix marks personal tokens"
    assert redact(text).text == "[REDACTED:github-token] is a token; the ghp prefix marks personal tokens"
    assert len("ghp") < MIN_VALUE_LENGTH


def test_a_secret_deep_inside_a_very_long_line_is_found_by_both_layers() -> None:
    telegram, github = BY_LABEL["telegram-bot"].secret, _rng_key("ghp_")
    filler = '{"k": "' + "x" * 150_000
    text = f"{filler} bot {telegram} and {github} {filler}"
    result = redact(text)
    assert telegram not in result.text and github not in result.text
    assert result.kinds == ("telegram-token", "github-token")


def test_no_secret_is_ever_sent_to_a_provider_for_verification(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("redaction made a network call")

    monkeypatch.setattr(requests.Session, "request", refuse)
    text = "\n".join(p.text for p in PLANTED)
    result = redact(text)
    assert all(p.secret not in result.text for p in PLANTED)


def test_concurrent_redaction_gives_the_same_results_as_sequential() -> None:
    texts = [p.text for p in PLANTED] * 3
    sequential = [redact(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        concurrent = list(pool.map(redact, texts))
    assert concurrent == sequential


# --- dangerous commands -----------------------------------------------------------------------

DANGEROUS = [
    ("env", ENVIRONMENT_DUMP),
    ("env | sort", ENVIRONMENT_DUMP),
    ("sudo printenv", ENVIRONMENT_DUMP),
    ("printenv OPENAI_API_KEY", ENVIRONMENT_DUMP),
    ("set", ENVIRONMENT_DUMP),
    ("set | grep AWS", ENVIRONMENT_DUMP),
    ("export -p", ENVIRONMENT_DUMP),
    ("declare -px", ENVIRONMENT_DUMP),
    ("env -u HOME", ENVIRONMENT_DUMP),
    ("ps e", ENVIRONMENT_DUMP),
    ("ps auxeww", ENVIRONMENT_DUMP),
    ("ps -E", ENVIRONMENT_DUMP),
    ("docker inspect web-1", ENVIRONMENT_DUMP),
    ("docker compose config", ENVIRONMENT_DUMP),
    ("heroku config -a shop", ENVIRONMENT_DUMP),
    ("echo $OPENAI_API_KEY", ENVIRONMENT_DUMP),
    ("cat /proc/1/environ | tr '\\0' '\\n'", ENVIRONMENT_DUMP),
    ("tr '\\0' '\\n' < /proc/self/environ", ENVIRONMENT_DUMP),
    ("python -c 'import os; print(os.environ)'", ENVIRONMENT_DUMP),
    ('bash -lc "env"', ENVIRONMENT_DUMP),
    ("ssh prod-1 printenv", ENVIRONMENT_DUMP),
    ("docker exec -it -u root web env", ENVIRONMENT_DUMP),
    ("kubectl exec -n app api-0 -- env", ENVIRONMENT_DUMP),
    ("FOO=1 nohup env", ENVIRONMENT_DUMP),
    ("cd app && env | grep -i key", ENVIRONMENT_DUMP),
    ("cat .env", SECRET_FILE),
    ("cat .env*", SECRET_FILE),
    ("cat ./services/api/.env.local", SECRET_FILE),
    ("cat config/prod.env", SECRET_FILE),
    ("cat ~/.aws/credentials", SECRET_FILE),
    ("cat ~/.codex/auth.json", SECRET_FILE),
    ("cat ~/.local/share/opencode/auth.json", SECRET_FILE),
    ("cat ~/.pi/agent/auth.json", SECRET_FILE),
    ("cat ~/.claude/.credentials.json", SECRET_FILE),
    ("cat ~/.npmrc", SECRET_FILE),
    ("cat ~/.ssh/id_rsa", SECRET_FILE),
    ("cat ~/.ssh/id_ed25519", SECRET_FILE),
    ("less ~/.netrc", SECRET_FILE),
    ("head -5 ~/.docker/config.json", SECRET_FILE),
    ("cat ~/.kube/config", SECRET_FILE),
    ("grep -n DATABASE .env.production", SECRET_FILE),
    ("sudo cat /etc/app/secrets.yaml", SECRET_FILE),
    ("jq . < ~/.codex/auth.json", SECRET_FILE),
    ("git show HEAD~1:.env", SECRET_FILE),
    ("find . -name '.env*' | xargs cat", SECRET_FILE),
    ("cat $(ls .env*)", SECRET_FILE),
    ("openssl rsa -in server.key -text", SECRET_FILE),
    ("kubectl get secret db-creds -o yaml", SECRET_FILE),
    ("kubectl get secrets -n prod -ojson", SECRET_FILE),
    ("kubectl config view --raw", SECRET_FILE),
    ("gh auth token", SECRET_FILE),
    ("gcloud auth print-access-token", SECRET_FILE),
    ("aws configure get aws_secret_access_key", SECRET_FILE),
    ("vault kv get secret/app", SECRET_FILE),
    ("sops -d secrets.enc.yaml", SECRET_FILE),
]

HARMLESS = [
    "ls",
    "ls -la .env",
    "git status",
    "git add .env.example",
    "cat README.md",
    "cat .env.example",
    "cat ~/.ssh/id_rsa.pub",
    "cat ~/.ssh/config",
    "kubectl get secrets",
    "kubectl describe secret db-creds",
    "ps -ef",
    "ps aux | grep python",
    "set -euo pipefail",
    "export PATH=$HOME/bin:$PATH",
    "env -i PATH=/usr/bin python3 -m pytest",
    "echo $HOME",
    "source .env && pytest",
    "cp .env.example .env",
    "docker ps",
    "uv run pytest -q",
]


@pytest.mark.parametrize(("command", "kind"), DANGEROUS, ids=[c for c, _ in DANGEROUS])
def test_the_whole_output_of_a_dangerous_command_is_dropped(command: str, kind: str) -> None:
    output = "HOME=/home/dev\nPATH=/usr/bin\nLANG=C.UTF-8\n"  # no secret shape at all: dropped anyway
    result = redact_command_output(command, output)
    assert is_dangerous_command(command)
    assert dangerous_output_kind(command) == kind
    assert result.text == f"[REDACTED:{kind}]"
    assert result.findings == (Finding(kind, 0, len(output), digest(output)),)
    # Dropping is idempotent too.
    assert redact_command_output(command, result.text).text == result.text


@pytest.mark.parametrize("command", HARMLESS, ids=str)
def test_the_output_of_a_harmless_command_is_kept_and_still_redacted(command: str) -> None:
    output = "src\ntests\npyproject.toml\nREADME.md\n"
    assert not is_dangerous_command(command)
    assert redact_command_output(command, output).text == output
    # Positive control: a secret in harmless output is still found by the patterns.
    planted = BY_LABEL["env-openai-proj"]
    result = redact_command_output(command, output + planted.text)
    assert result.text == output + planted.text.replace(planted.secret, "[REDACTED:openai-key]")


def test_an_empty_output_stays_empty() -> None:
    assert redact_command_output("env", "").text == ""
    assert redact_command_output("env", "").findings == ()


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        (".env", True),
        ("/srv/app/.env.production", True),
        ("~/.aws/credentials", True),
        ("C:\\Users\\dev\\.aws\\credentials", True),
        ("~/.config/gcloud/application_default_credentials.json", True),
        ("keys/service-account-prod.json", True),
        ("certs/privkey.pem", True),
        (".env.example", False),
        (".env.sample", False),
        ("~/.ssh/id_ed25519.pub", False),
        ("certs/fullchain.pem", False),
        ("src/credentials.py", False),
        ("config.json", False),
        (".venv/bin/python", False),
    ],
    ids=lambda v: str(v),
)
def test_secret_paths_are_recognised_and_templates_are_not(path: str, secret: bool) -> None:
    assert is_secret_path(path) is secret


# --- structured values ------------------------------------------------------------------------


def test_redact_json_recurses_into_every_string_and_keeps_the_shape() -> None:
    github, jwt_token = _rng_key("ghp_"), BY_LABEL["jwt-in-log"].secret
    value = {
        "type": "tool_use",
        "input": {"command": f"git push https://x:{github}@github.com/a/b", "timeout": 30},
        "messages": [
            {"role": "user", "content": [f"my token is {jwt_token}", ("tuple", github)]},
            {"role": "assistant", "content": "done", "usage": {"input_tokens": 1200, "cached": True}},
        ],
        "env": {"DB_PASSWORD": "plainwords", "GITHUB_TOKEN": "${GITHUB_TOKEN}", "PASSWORD": ""},
        "credentials": {"password": "correct horse battery staple", "username": "dev"},
        github: "a secret used as a key",
        7: None,
    }
    redacted, findings = redact_json(value)
    assert redacted == {
        "type": "tool_use",
        "input": {"command": "git push https://x:[REDACTED:github-token]@github.com/a/b", "timeout": 30},
        "messages": [
            {"role": "user", "content": ["my token is [REDACTED:jwt]", ("tuple", "[REDACTED:github-token]")]},
            {"role": "assistant", "content": "done", "usage": {"input_tokens": 1200, "cached": True}},
        ],
        # A value under a secret key is taken whole; references and empty values are not secrets.
        "env": {"DB_PASSWORD": "[REDACTED:secret-assignment]", "GITHUB_TOKEN": "${GITHUB_TOKEN}", "PASSWORD": ""},
        "credentials": {"password": "[REDACTED:secret-assignment]", "username": "dev"},
        "[REDACTED:github-token]": "a secret used as a key",
        7: None,
    }
    assert [f.kind for f in findings] == [
        "github-token",
        "jwt",
        "github-token",
        "secret-assignment",
        "secret-assignment",
        "github-token",
    ]
    assert findings[1] == Finding("jwt", 12, 12 + len(jwt_token), digest(jwt_token))
    assert value["input"]["command"].count(github) == 1  # the input is not modified in place


def test_redact_json_handles_every_planted_text_in_one_pass() -> None:
    value = [{"text": p.text, "n": i} for i, p in enumerate(PLANTED)]
    redacted, findings = redact_json(value)
    for planted, item, original in zip(PLANTED, redacted, value, strict=True):
        assert planted.secret not in item["text"]
        assert item["text"] == redact(original["text"]).text
    assert len(findings) == sum(len(redact(p.text).findings) for p in PLANTED)
    # Positive control: scalars and plain strings pass through.
    assert redact_json({"a": [1, 2.5, None, "plain"]}) == ({"a": [1, 2.5, None, "plain"]}, ())


# --- documentation and size -------------------------------------------------------------------


def test_the_readme_documents_every_kind_and_the_marker() -> None:
    readme = README.read_text()
    missing = [kind for kind in [*KINDS, ENVIRONMENT_DUMP, SECRET_FILE] if f"`{kind}`" not in readme]
    assert missing == []
    assert "[REDACTED:<kind>]" in readme
    assert MARKER_RE.fullmatch(marker("github-token"))


def test_a_megabyte_transcript_loses_every_planted_secret() -> None:
    text, planted = planted_transcript(size=1_000_000, secrets=20, seed=11)
    redact(text[:10_000])  # warm up: detect-secrets is imported on first use
    started = time.perf_counter()
    result = redact(text)
    elapsed = time.perf_counter() - started
    print(f"\nredacted {len(text) / 1e6:.2f} MB with {len(planted)} planted secrets in {elapsed * 1000:.0f} ms")
    assert len(planted) == 20
    missing = [p.label for p in planted if p.secret in result.text]
    assert missing == []
    assert {p.kind for p in planted} <= set(result.kinds)
