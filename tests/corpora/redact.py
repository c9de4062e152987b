"""Fake secrets of every kind in realistic text, and transcripts to plant them in (for tests and benchmarks).

Every key is generated at run time from a seeded RNG and carries `FAKE`/`fake` where its shape
allows: no key-shaped literal sits in the repository for push protection to flag, and none can
be anyone's real key. Real GitHub tokens also end in a CRC32 checksum these do not have.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


@dataclass(frozen=True, slots=True)
class Planted:
    """A fake `secret` of `kind` inside `text`; after redaction `secret` must appear nowhere."""

    kind: str
    secret: str
    text: str
    label: str


def _chars(rng: random.Random, alphabet: str, n: int) -> str:
    text = "".join(rng.choice(alphabet) for _ in range(n))
    # Guarantee both cases and a digit, as a generator would produce in practice.
    return "Fk7" + text[3:] if n >= 8 and alphabet in (ALNUM, B64URL, B64) else text


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def fake_jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": f"fake-{rng.randrange(10**6)}", "iat": 1700000000}).encode())
    return f"{header}.{payload}.{_b64url(rng.randbytes(32))}"


def fake_pem(rng: random.Random, label: str = "RSA PRIVATE KEY") -> str:
    body = base64.b64encode(b"FAKE" + rng.randbytes(600)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


def _generators() -> list[tuple[str, str, Callable[[random.Random], str], Callable[[str], str]]]:
    """(kind, label, make the secret, embed it in realistic text)."""
    return [
        (
            "anthropic-key",
            "curl-bearer-anthropic",
            lambda r: "sk-ant-api03-" + _chars(r, B64URL, 93) + "AA",
            lambda s: f'$ curl https://api.anthropic.com/v1/messages -H "Authorization: Bearer {s}" -d @req.json',
        ),
        (
            "anthropic-key",
            "claude-oauth-json",
            lambda r: "sk-ant-oat01-" + _chars(r, B64URL, 80) + "AA",
            lambda s: json.dumps({"claudeAiOauth": {"accessToken": s, "expiresAt": 1767225600000}}, indent=2),
        ),
        (
            "openai-key",
            "env-openai-proj",
            lambda r: "sk-proj-" + _chars(r, B64URL, 156),
            lambda s: f"PATH=/usr/local/bin:/usr/bin\nOPENAI_API_KEY={s}\nHOME=/home/dev",
        ),
        (
            "openai-key",
            "python-openai-legacy",
            lambda r: "sk-" + _chars(r, ALNUM, 20) + "T3BlbkFJ" + _chars(r, ALNUM, 20),
            lambda s: f'client = OpenAI(api_key="{s}")\nresp = client.models.list()',
        ),
        (
            "openrouter-key",
            "shell-export-openrouter",
            lambda r: "sk-or-v1-" + _chars(r, HEX, 64),
            lambda s: f"export OPENROUTER_API_KEY='{s}' && python run.py",
        ),
        (
            "huggingface-token",
            "log-huggingface",
            lambda r: "hf_" + "Fake" + _chars(r, string.ascii_letters, 30),
            lambda s: f"2025-01-02 10:00:01 INFO hub: logging in with token {s} (write)",
        ),
        (
            "github-token",
            "git-remote-ghp",
            lambda r: "ghp_" + _chars(r, ALNUM, 36),
            lambda s: f"origin\thttps://x-access-token:{s}@github.com/acme/app.git (fetch)",
        ),
        (
            "github-token",
            "gh-hosts-gho",
            lambda r: "gho_" + _chars(r, ALNUM, 36),
            lambda s: f"github.com:\n    user: dev\n    oauth_token: {s}\n    git_protocol: https",
        ),
        (
            "github-token",
            "actions-ghs",
            lambda r: "ghs_" + _chars(r, ALNUM, 36),
            lambda s: f"Run actions/checkout@v4 with token {s}",
        ),
        (
            "github-token",
            "fine-grained-pat",
            lambda r: "github_pat_" + _chars(r, ALNUM, 22) + "_" + _chars(r, ALNUM, 59),
            lambda s: f'gh auth login --with-token <<< "{s}"',
        ),
        (
            "gitlab-token",
            "gitlab-header",
            lambda r: "glpat-" + _chars(r, B64URL, 20),
            lambda s: f'curl --header "PRIVATE-TOKEN: {s}" https://gitlab.example.com/api/v4/projects',
        ),
        (
            "npm-token",
            "npmrc",
            lambda r: "npm_" + _chars(r, ALNUM, 36),
            lambda s: f"registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken={s}",
        ),
        (
            "pypi-token",
            "pypirc",
            lambda r: "pypi-AgEIcHlwaS5vcmc" + _chars(r, B64URL, 120),
            lambda s: f"[pypi]\n  username = __token__\n  password = {s}",
        ),
        (
            "aws-access-key",
            "aws-credentials-id",
            lambda r: "AKIA" + "FAKE" + _chars(r, string.ascii_uppercase + string.digits, 12),
            lambda s: f"[default]\naws_access_key_id = {s}\nregion = eu-west-1",
        ),
        (
            "aws-access-key",
            "sts-session-id",
            lambda r: "ASIA" + "FAKE" + _chars(r, string.ascii_uppercase + string.digits, 12),
            lambda s: f'{{"Credentials": {{"AccessKeyId": "{s}", "Expiration": "2025-01-01T00:00:00Z"}}}}',
        ),
        (
            "aws-secret-key",
            "aws-credentials-secret",
            lambda r: "Fake" + _chars(r, B64, 36),
            lambda s: f"[default]\naws_secret_access_key = {s}\noutput = json",
        ),
        (
            "aws-secret-key",
            "sts-json-secret",
            lambda r: "fAKE" + _chars(r, B64, 36),
            lambda s: json.dumps({"Credentials": {"SecretAccessKey": s, "Expiration": "2025-01-01T00:00:00Z"}}),
        ),
        (
            "slack-token",
            "slack-bot-yaml",
            lambda r: f"xoxb-{r.randrange(10**11, 10**12)}-{r.randrange(10**12, 10**13)}-Fake{_chars(r, ALNUM, 20)}",
            lambda s: f"slack:\n  channel: '#deploys'\n  bot: {s}",
        ),
        (
            "slack-webhook",
            "slack-webhook-url",
            lambda r: (
                "https://hooks.slack.com/services/T"
                + _chars(r, string.ascii_uppercase + string.digits, 8)
                + "/B"
                + _chars(r, string.ascii_uppercase + string.digits, 8)
                + "/"
                + _chars(r, ALNUM, 24)
            ),
            lambda s: f'notify() {{ curl -X POST -d \'{{"text":"done"}}\' {s}; }}',
        ),
        (
            "google-api-key",
            "google-maps-js",
            lambda r: "AIza" + "Fake" + _chars(r, B64URL, 31),
            lambda s: f'<script src="https://maps.googleapis.com/maps/api/js?key={s}&callback=init"></script>',
        ),
        (
            "stripe-key",
            "stripe-live-python",
            lambda r: "sk_live_" + _chars(r, ALNUM, 24),
            lambda s: f'stripe.api_key = "{s}"\ncharge = stripe.Charge.create(amount=500)',
        ),
        (
            "stripe-key",
            "stripe-restricted-env",
            lambda r: "rk_live_" + _chars(r, ALNUM, 24),
            lambda s: f"STRIPE_RESTRICTED={s}",
        ),
        (
            "stripe-key",
            "stripe-test-log",
            lambda r: "sk_test_" + _chars(r, ALNUM, 24),
            lambda s: f"[stripe] request failed for key {s}: 401",
        ),
        (
            "jwt",
            "jwt-in-log",
            fake_jwt,
            lambda s: f"2025-01-02T10:00:00Z DEBUG auth: session cookie={s} user=42",
        ),
        (
            "jwt",
            "jwt-bearer-curl",
            fake_jwt,
            lambda s: f"curl -s -H 'Authorization: Bearer {s}' http://localhost:8080/api/me",
        ),
        ("private-key", "pem-rsa", lambda r: fake_pem(r), lambda s: f"$ cat deploy/key.pem\n{s}\n$ ls"),
        (
            "private-key",
            "pem-openssh",
            lambda r: fake_pem(r, "OPENSSH PRIVATE KEY"),
            lambda s: f"Here is the key you asked for:\n\n```\n{s}\n```\n",
        ),
        (
            "private-key",
            "pem-in-json",
            lambda r: fake_pem(r, "PRIVATE KEY").replace("\n", "\\n"),
            lambda s: '{"type": "service_account", "private_key": "' + s + '\\n", "client_email": "x@y.iam"}',
        ),
        (
            "bearer-token",
            "opaque-bearer",
            lambda r: _chars(r, ALNUM, 40),
            lambda s: f'requests.get(url, headers={{"Authorization": "Bearer {s}"}})',
        ),
        (
            "basic-auth",
            "basic-header",
            lambda r: base64.b64encode(f"deploy:Fake{_chars(r, ALNUM, 16)}".encode()).decode(),
            lambda s: f"> GET /v2/ HTTP/1.1\n> Authorization: Basic {s}\n> Accept: */*",
        ),
        (
            "basic-auth",
            "curl-user",
            lambda r: "Fake" + _chars(r, ALNUM, 14),
            lambda s: f"curl -u admin:{s} https://jenkins.example.com/api/json",
        ),
        (
            "secret-assignment",
            "env-db-password",
            lambda r: "Fake" + _chars(r, ALNUM, 14),
            lambda s: f"DB_HOST=db\nDB_USER=app\nDB_PASSWORD={s}\nDB_NAME=app",
        ),
        (
            "secret-assignment",
            "json-config-password",
            lambda r: "Fake" + _chars(r, ALNUM + "!@#", 14),
            lambda s: json.dumps({"database": {"host": "db", "user": "app", "password": s}}, indent=2),
        ),
        (
            "secret-assignment",
            "python-secret-key",
            lambda r: "fake-" + _chars(r, ALNUM + "!@#%^&*", 40),
            lambda s: f"DEBUG = False\nSECRET_KEY = '{s}'\nALLOWED_HOSTS = ['*']",
        ),
        (
            "secret-assignment",
            "yaml-client-secret",
            lambda r: "Fake" + _chars(r, ALNUM, 28),
            lambda s: f"oauth:\n  client_id: web-app\n  client_secret: {s}\n  redirect: /cb",
        ),
        (
            "secret-assignment",
            "cli-password-flag",
            lambda r: "Fake" + _chars(r, ALNUM, 12),
            lambda s: f"$ psql --host db --password {s} -c 'select 1'",
        ),
        (
            "secret-assignment",
            "api-key-header",
            lambda r: "fake" + _chars(r, HEX, 28),
            lambda s: f"curl -H 'X-Api-Key: {s}' https://api.example.com/v1/items",
        ),
        (
            "url-credentials",
            "dsn-log-line",
            lambda r: "Fake" + _chars(r, ALNUM, 12),
            lambda s: f"2025-01-02 10:00:00 ERROR db: could not connect to postgresql://app:{s}@db.internal:5432/app",
        ),
        (
            "url-credentials",
            "database-url-env",
            lambda r: "Fake" + _chars(r, ALNUM, 16),
            lambda s: f"DATABASE_URL=mysql://root:{s}@127.0.0.1:3306/shop?charset=utf8mb4",
        ),
        (
            "url-credentials",
            "redis-url-python",
            lambda r: "Fake" + _chars(r, ALNUM, 10),
            lambda s: f'cache = Redis.from_url("redis://:{s}@cache:6379/0")',
        ),
        # Shapes only detect-secrets knows (no key word in sight): its layer must catch them.
        (
            "telegram-token",
            "telegram-bot",
            lambda r: f"{r.randrange(10**8, 10**9)}:AAFake{_chars(r, B64URL, 29)}",
            lambda s: f"bot = Bot({s!r})",
        ),
        (
            "sendgrid-key",
            "sendgrid",
            lambda r: "SG." + _chars(r, B64URL, 22) + "." + _chars(r, B64URL, 43),
            lambda s: f"mail = SendGridAPIClient({s!r})",
        ),
        (
            "twilio-key",
            "twilio",
            lambda r: "SK" + "fa4e" + _chars(r, HEX, 28),
            lambda s: f"client = Client({s!r}, sid)",
        ),
        (
            "azure-storage-key",
            "azure-connection-string",
            lambda r: "Fake" + _chars(r, B64, 82) + "==",
            lambda s: f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net",
        ),
        (
            "square-secret",
            "square",
            lambda r: "sq0csp-" + _chars(r, B64URL, 43),
            lambda s: f"square_app = connect({s!r})",
        ),
        (
            "mailchimp-key",
            "mailchimp",
            lambda r: "fa4e" + _chars(r, HEX, 28) + "-us14",
            lambda s: f"mc = MailchimpMarketing.Client(); mc.set_config({{'api': {s!r}}})",
        ),
    ]


def planted_secrets(seed: int = 0) -> list[Planted]:
    """One fake secret per generator (every kind, several contexts), each in its own text."""
    rng = random.Random(seed)
    return [
        Planted(kind, secret, embed(secret), label)
        for kind, label, make, embed in _generators()
        for secret in [make(rng)]
    ]


# Text that must come out of redaction unchanged: prose and code that talk about secrets, ids
# and hashes that look random, references and placeholders that stand in for a secret.
BENIGN: tuple[tuple[str, str], ...] = (
    ("sk-in-prose", "Keys that start with sk- are secret; never paste one into an issue."),
    ("kebab-case-words", "See docs/task-management-system-overview-2024.md and the risk-assessment-framework."),
    ("git-sha", "commit 3f6c2a9e1b7d4c8a0e5f2b6d9c1a7e3f4b8d0c2a\nMerge: 9b1d3c5 e7f2a48"),
    ("uuid", "request_id=5b0f2c6e-8d1a-4e3b-9f7c-2a6d1e8b4c0f status=200 duration_ms=12"),
    (
        "sha256-digest",
        "image: ghcr.io/acme/app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ),
    ("password-as-a-word", "The password reset flow sends a token by email; the token expires after an hour."),
    ("token-identifiers", "tokens = tokenizer(text, max_tokens=4096)\nprint(len(tokens), 'tokens used')"),
    ("type-hints", "def authenticate(token: str, password: str | None = None) -> User:"),
    ("environment-lookup", "api_key = os.environ['OPENAI_API_KEY']\nsecret = settings.SECRET_KEY"),
    ("getpass", "password = getpass.getpass('Password: ')"),
    ("keyword-arguments", "client = Client(api_key=api_key, token=token, password=password)"),
    ("bearer-variable", 'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/me'),
    ("bearer-f-string", 'headers = {"Authorization": f"Bearer {token}"}'),
    ("dsn-placeholder", "DATABASE_URL=postgres://app:${DB_PASSWORD}@localhost:5432/app"),
    ("urls-without-credentials", "https://github.com/acme/app/pull/42 git@github.com:acme/app.git ssh://git@host:22/r"),
    (
        "aws-documentation-keys",
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "env-template",
        "OPENAI_API_KEY=your-api-key-here\nDB_PASSWORD=changeme\nGITHUB_TOKEN=\nSTRIPE_KEY=<your-stripe-key>\n"
        "SECRET_KEY=xxxxxxxx\nAPI_TOKEN=${API_TOKEN}\nPASSWORD=********",
    ),
    ("tokenizer-config", '{"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "[UNK]", "model_max_length": 512}'),
    ("fetch-credentials", "fetch(url, { credentials: 'include', method: 'POST' })"),
    ("ssh-public-key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG4rT3vTt99Ox5kndS4HmgTrKBT8SKzhK4rhGkEVGlCI dev@laptop"),
    (
        "pem-public-key",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
    ),
    ("pytest-output", "tests/test_auth.py::test_token_refresh PASSED                            [ 42%]"),
    ("traceback", '  File "/app/auth/tokens.py", line 88, in refresh_access_token\n    raise TokenExpired(token_id)'),
    ("existing-markers", "API_KEY=[REDACTED:openai-key] and postgres://u:[REDACTED:url-credentials]@db/app"),
    ("jwt-in-prose", "A JWT has three parts, header.payload.signature, and the header starts with eyJ."),
    ("npm-commands", "npm install --save-dev typescript@5.4.2 && npm_config_cache=/tmp/npm npm ci"),
    ("comparisons", 'if password == "":\n    raise ValueError("empty")\nif token is None:'),
    ("kubernetes-secret-reference", "secretName: db-credentials\nsecretKeyRef:\n  name: db\n  key: password"),
    ("password-policy", "PASSWORD_MIN_LENGTH=12\nTOKEN_TTL_SECONDS=3600\nAUTH_PROVIDER=github"),
    ("token-counts", "Total tokens: 12345 (input 10000, output 2345)"),
    ("authorization-prose", "Set the Authorization header to a bearer token from the login response."),
    (
        "login-with-token-stdin",
        "gh auth login --with-token < token.txt && docker login --password-stdin -u dev ghcr.io",
    ),
    ("generated-token-in-code", "token = secrets.token_urlsafe(32)\nkey = Fernet.generate_key()"),
    ("email-and-port", "contact: dev@example.com, http://localhost:8080/api/v1/users?page=2"),
)

# Ordinary transcript lines, most of them unrelated to secrets, as a coding session produces.
NEUTRAL: tuple[str, ...] = (
    "I'll start by reading the test file to understand the expected behaviour.",
    "Let me run the test suite to see which tests fail.",
    "The failure comes from the date parsing: the fixture uses a naive datetime.",
    "    def test_parses_iso_dates(self) -> None:",
    "        assert parse('2024-01-02T03:04:05Z') == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)",
    "from __future__ import annotations",
    "import asyncio",
    "    for item in items:",
    "        results.append(await fetch(item.url, timeout=10))",
    "    return {k: v for k, v in sorted(counts.items()) if v > 1}",
    "diff --git a/src/app/parse.py b/src/app/parse.py",
    "@@ -12,7 +12,9 @@ def parse(value: str) -> datetime:",
    "-    return datetime.fromisoformat(value)",
    "+    return datetime.fromisoformat(value.replace('Z', '+00:00'))",
    "============================= 42 passed, 1 skipped in 3.21s ==============================",
    "FAILED tests/test_parse.py::test_timezones - AssertionError: assert None == 'UTC'",
    "drwxr-xr-x  12 dev staff   384 Jan  2 10:00 src",
    "-rw-r--r--   1 dev staff  1532 Jan  2 10:00 pyproject.toml",
    '{"type": "tool_use", "name": "Read", "input": {"file_path": "/repo/src/app/parse.py"}}',
    '{"type": "tool_result", "content": "ok", "is_error": false}',
    "On branch main\nYour branch is up to date with 'origin/main'.",
    "modified:   src/app/parse.py",
    "Successfully installed httpx-0.28.1 anyio-4.6.2",
    "npm warn deprecated inflight@1.0.6: This module is not supported, and leaks memory.",
    "Compiling serde v1.0.210\n   Compiling tokio v1.40.0",
    "The change keeps the public API and only touches the parser; I'll add a regression test.",
    "SELECT id, created_at FROM events WHERE workspace_id = $1 ORDER BY created_at DESC LIMIT 50;",
    "2025-01-02T10:00:00Z INFO server: listening on 0.0.0.0:8080",
    "const [items, setItems] = useState<Item[]>([]);",
    "  - name: Run tests\n    run: uv run pytest -q",
)


def ordinary_line(rng: random.Random) -> str:
    """One line of harmless transcript text: mostly neutral, sometimes text that talks about secrets."""
    if rng.random() < 0.08:
        return rng.choice(BENIGN)[1]
    line = rng.choice(NEUTRAL)
    if rng.random() < 0.1:
        line += f" ({''.join(rng.choice(HEX) for _ in range(40))})"
    return line


def image_line(rng: random.Random, size: int = 20_000) -> str:
    """A base64 image as tool output carries it."""
    return '{"type": "image", "source": {"data": "' + base64.b64encode(rng.randbytes(size * 3 // 4)).decode() + '"}}'


def planted_transcript(size: int = 1_000_000, secrets: int = 20, seed: int = 0) -> tuple[str, list[Planted]]:
    """About `size` characters of transcript with `secrets` planted texts (of spread-out kinds) in it."""
    rng = random.Random(seed)
    pool = planted_secrets(seed)
    planted = [pool[i * len(pool) // secrets] for i in range(secrets)] if secrets <= len(pool) else pool
    lines: list[str] = []
    total = 0
    while total < size:
        line = image_line(rng) if rng.random() < 0.002 else ordinary_line(rng)
        lines.append(line)
        total += len(line) + 1
    for item in planted:
        lines.insert(rng.randrange(len(lines) + 1), item.text)
    return "\n".join(lines), planted
