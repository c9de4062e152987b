"""The regex pack: provider key shapes and keyed assignments, each yielding the span of a secret."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

# Kinds in order of precedence: when spans of several kinds overlap, the merged finding takes the
# earliest kind here, so a provider key inside `API_KEY=…` reports `anthropic-key`, not the
# generic `secret-assignment`.
KINDS: tuple[str, ...] = (
    "private-key",
    "anthropic-key",
    "openrouter-key",
    "openai-key",
    "huggingface-token",
    "github-token",
    "gitlab-token",
    "npm-token",
    "pypi-token",
    "aws-access-key",
    "aws-secret-key",
    "slack-webhook",
    "slack-token",
    "google-api-key",
    "google-oauth-secret",
    "google-oauth-token",
    "stripe-key",
    "discord-token",
    "telegram-token",
    "twilio-key",
    "sendgrid-key",
    "mailchimp-key",
    "artifactory-token",
    "azure-storage-key",
    "square-secret",
    "jwt",
    "basic-auth",
    "bearer-token",
    "url-credentials",
    "secret-assignment",
    "secret",
)
PRECEDENCE = {kind: rank for rank, kind in enumerate(KINDS)}


class Span(NamedTuple):
    """A candidate secret at `start:end`, found by a match covering `outer_start:outer_end`."""

    start: int
    end: int
    kind: str
    outer_start: int
    outer_end: int


Locate = Callable[[re.Match[str], str], "tuple[int, int] | None"]

_WORD = frozenset(string.ascii_letters + string.digits)
# Before a key shape there is no letter or digit, nor a marker's closing bracket: a second pass
# over redacted text then sees what the first one saw, so redaction stays idempotent.
_NOT_BEFORE = _WORD | {"]"}


@dataclass(frozen=True, slots=True)
class Rule:
    """A pattern and how to find the secret inside each of its matches.

    `lower` rules are written in lower case and run over the ASCII-lower-cased text (a `(?i)`
    alternation is ten times slower in `re`); `bounded` rules must not start inside a word,
    which is checked here rather than with a look-behind, because a leading look-behind stops
    `re` from searching for the pattern's literal prefix (thirty times slower).

    `needles` are strings of which every match contains one (in the text the rule runs over):
    rule_spans does not run a rule over a text holding none. `str.__contains__` looks for a
    literal many times faster than `re` walks a pattern, and most notes hold no secret; tests
    check that each match the corpus finds contains a needle.
    """

    kind: str
    pattern: re.Pattern[str]
    locate: Locate
    lower: bool = False
    bounded: bool = False
    needles: tuple[str, ...] = ()

    def spans(self, text: str, lowered: str) -> Iterator[Span]:
        for match in self.pattern.finditer(lowered if self.lower else text):
            if self.bounded and match.start() and text[match.start() - 1] in _NOT_BEFORE:
                continue
            found = self.locate(match, text)
            if found is not None and found[0] < found[1]:
                yield Span(found[0], found[1], self.kind, match.start(), match.end())


def lower_ascii(text: str) -> str:
    """`text` lower-cased with every offset kept (so spans found in it are spans of `text`)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        # lower() never shrinks a character; equal length means one character for one.
        return lowered
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


# --- value heuristics -------------------------------------------------------------------------

# Values that only name or stand in for a secret; redacting them would hide useful text and
# protect nothing. `changeme` and friends are documentation defaults, not anyone's secret.
_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        \$\{\{.*\}\}|\$\{[^}]*\}|\$\([^)]*\)?|\$[A-Za-z_]\w*|%[A-Za-z_]\w*%|\{\{.*\}\}|\{[A-Za-z_][\w.]*\}
      | <[^<>]*> | \[[A-Z_ ]+\]
      | x{3,}\w{0,4} | \*+ | \.{3,} | •+ | -+ | _+ | \?+ | 0+
      | changeme | change[-_]?me | changeit | redacted | removed | hidden | masked | secret | password | passwd
      | pass | token | none | null | nil | true | false | undefined | empty | dummy | placeholder | example
      | todo | tbd | fixme | test | include | omit | same-origin | bearer | basic | oauth2? | required | optional
      | your[-_ ].* | .*[-_]here | .*(?:…|\.\.\.) | value | string
      | (?-i:.*EXAMPLE.*)
      | .*<[^<>\s]*>.* | \[[A-Za-z0-9_ ]+\] | \|[^|]+\| | __\w+__      # tokenizer specials: </s>, [MASK], <|eot|>
      | \#[0-9a-f]{3,8}                                          # a colour
      | .*\*{3,}.* | .*\{\}.* | pwd                               # masked (`hf_***`), format strings
      | (?:my|the)[-_]?(?:pass(?:word)?|secret|token|key)\w*
    )$"""
)
# A bare reference to other code (`os.environ["X"]`, `self.token`, `get_key()`), not a literal.
_CODE = re.compile(r"^(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|.*[()\[\]{}].*)$")
# Lower-case dotted or slashed paths: a file that holds a secret, not the secret itself.
_PATH = re.compile(r"^(?:~|\.{1,2})?/(?:[a-z0-9._-]+/)*[a-z0-9._-]+/?$|^(?:~|\.{1,2})/.*$")
# Identifiers, not passwords: `send_message`, `TILE_GLOBAL`, `OAuthFlowClientCredentials`.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SNAKE_NAME = re.compile(r"[a-z]+(?:_[a-z]+)+|[A-Z]+(?:_[A-Z]+)*")
# Words of two or more lower-case letters, capitalised or not, and acronyms before a word.
_CAMEL_WORDS = re.compile(r"(?:[A-Z]+(?=[A-Z][a-z]{2})|[A-Z]{2,}$|[A-Z]?[a-z]{2,})+")
_SYMBOLS = frozenset("!@#%^&*+=~?")


# printf-style specifiers: `'%s:%s' % (user, pw)` fills a template; the template is no secret.
_FORMAT_SPEC = re.compile(r"%(?:\([A-Za-z_]\w*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifx]")


def _is_format_template(value: str) -> bool:
    """Specifiers with only punctuation or lower-case words around them (`%s:%s`, `user_%s`); a
    password that happens to contain `%r` keeps digits or capitals beside it."""
    rest, found = _FORMAT_SPEC.subn("", value)
    return found > 0 and re.fullmatch(r"[a-z_\W]*", rest) is not None


def is_placeholder(value: str) -> bool:
    """`is_placeholder` is true for empty values, references like `${VAR}` and stand-ins like `<token>`."""
    value = value.strip()
    # Few distinct characters (`ACxxxxxxxxxxxxxxxx`, `aaaaaaaaaaaa`) is a pattern, not a key.
    return (
        not value
        or _PLACEHOLDER.match(value) is not None
        or (len(value) >= 12 and len(set(value)) <= 3)
        or _is_format_template(value)
    )


def looks_random(value: str) -> bool:
    """A value that plausibly came from a generator or a person choosing a password, not from prose or code."""
    if len(value) < 6 or any(c.isspace() for c in value):
        return False
    letters = sum(c.isalpha() for c in value)
    if not letters:
        return False
    if any(c.isdigit() for c in value) or any(c in _SYMBOLS for c in value):
        return True
    # Long mixed-case strings without digits are rare in prose but common in keys (Hugging
    # Face), unless they are CamelCase words (`OAuthFlowClientCredentials`, a type name).
    return (
        len(value) >= 20
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and not _CAMEL_WORDS.fullmatch(value)
    )


def _random_key_body(value: str) -> bool:
    """Provider keys are random: digits and letters, and either both cases or long lower-case hex."""
    digits = sum(c.isdigit() for c in value)
    letters = sum(c.isalpha() for c in value)
    if digits < 2 or letters < 2:
        return False
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return mixed or re.fullmatch(r"[0-9a-f_-]{32,}", value) is not None


# --- building blocks --------------------------------------------------------------------------

_STOP = r"(?![A-Za-z0-9\[])"


def _group(name: str | int = 0, accept: Callable[[str], bool] | None = None) -> Locate:
    def locate(match: re.Match[str], text: str) -> tuple[int, int] | None:
        start, end = match.span(name)
        if start < 0:
            return None
        if accept is not None and not accept(text[start:end]):
            return None
        return start, end

    return locate


def _token(kind: str, regex: str, needles: tuple[str, ...], accept: Callable[[str], bool] | None = None) -> Rule:
    """A rule whose whole match, not starting inside a word, is the secret."""
    return Rule(kind, re.compile(regex), _group(0, accept), bounded=True, needles=needles)


def _not_example(value: str) -> bool:
    # AWS documents its example credentials (AKIAIOSFODNN7EXAMPLE); they are not anyone's secret.
    return "EXAMPLE" not in value


def _key_start(text: str, end: int) -> int:
    """Where the key that ends at `end` begins: back over letters, digits and `_.-@$`."""
    start = end
    while start > 0 and (text[start - 1] in _KEY_CHARS or text[start - 1].isalnum()):
        start -= 1
    return start


_KEY_CHARS = frozenset("_.-@$")

# --- keyed assignments ------------------------------------------------------------------------

# The last word of a secret-looking key, in lower case; `is_secret_key_name` is the exact test.
_KEY_WORDS = r"(?:token|secret|passw(?:or)?d|pwd|pass|key|credentials?|auth|base)"
_KEY_WORD_NEEDLES = ("token", "secret", "pass", "pwd", "key", "credential", "auth", "base")
_SECRET_KEY = re.compile(
    r"""(?x)(?:
        (?i:token|secret|passw(?:or)?d|pwd|api[_-]?key|private[_-]?key|access[_-]?key|secret[_-]?key
           |credentials?|key[_-]?base|client[_-]?key|auth[_-]?key|signing[_-]?key|encryption[_-]?key
           |master[_-]?key|session[_-]?key)
      | (?:^|[_.-])(?i:auth|pass)
      | (?<=[a-z])(?:Auth|Pass)
    )$"""
)
_ENV_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")
_PUBLIC_KEY = re.compile(r"(?i)(?:public|publishable|pub)[_-]?key(?:[_-]?token)?$")


def is_secret_key_name(key: str, env_style: bool) -> bool:
    """True when `key` names a secret (`DB_PASSWORD`, `apiKey`, `client_secret`; `*_KEY` when `env_style`)."""
    if _PUBLIC_KEY.search(key):
        return False
    if _SECRET_KEY.search(key):
        return True
    # In an environment line any *_KEY is a credential (STRIPE_KEY=…); in code `sort_key = …` is not.
    return env_style and key.endswith("_KEY")


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _names_its_key(key: str, word: str, value: str) -> bool:
    """True when the value only names its key (`"tiktoken": "tiktoken"`, `api_key="fal-ai-api-key"`,
    `'pass': 'bandpass'`): a value without digits that contains the key's last word, or that
    the key contains."""
    if any(c.isdigit() for c in value):
        return False
    normal = _normal(value)
    return bool(normal) and (_normal(word) in normal or normal in _normal(key))


def _value_span(match: re.Match[str], text: str, *, key: str, strict: bool) -> tuple[int, int] | None:
    """The span of an assignment's value when it is plausibly a literal secret.

    `strict` (code, YAML, flags) demands a random-looking unquoted value; environment lines
    (`API_KEY=…`) are taken as they are, because there every value is a literal.
    """
    word = match.group("kw") if "kw" in match.re.groupindex else key
    if match.start("qv") >= 0:
        start, end = match.span("qv")
        value = text[start:end]
        if len(value) < 4 or is_placeholder(value) or _PATH.match(value) or _SNAKE_NAME.fullmatch(value):
            return None
        if strict and _names_its_key(key, word, value):
            return None
        if match.group("q") == "`" and _CODE.match(value):
            return None  # Markdown code: `get_token()`
        if any(c.isspace() for c in value) and (value != value.strip() or len(value.split()) < 2):
            return None  # `"class "`, `' + access_key + '`: code, not a passphrase
        # A quoted value with spaces is a passphrase only under an exact secret key (the caller
        # checked the key); UI strings such as "Enter your password" are the accepted cost.
        return start, end
    start, end = match.span("uv")
    value = text[start:end]
    trimmed = value.rstrip(",;)]}")
    if strict:
        end -= len(value) - len(trimmed)
        if _CODE.match(trimmed) or _PATH.match(trimmed) or not looks_random(trimmed):
            return None
        if _names_its_key(key, word, trimmed) or (_IDENTIFIER.fullmatch(trimmed) and _normal(word) in _normal(trimmed)):
            return None  # `entity_mask2_token=entity_mask2_token`
        if re.match(r"[ \t]+(?:\||=[^=])", text[end : end + 3]):
            return None  # a type annotation: `private_key: Ed25519PrivateKey | None = None`
    elif "(" in value:
        return None
    # An environment value keeps its trailing punctuation (it may be part of the secret), but
    # is judged without it: `(STRIPE_KEY=…)` in prose is a placeholder.
    if len(trimmed) < 3 or is_placeholder(value) or is_placeholder(trimmed) or (trimmed.isdigit() and len(trimmed) < 6):
        return None
    return start, end


# A bare value stops at a backslash too, so `TOKEN=x\\nNEXT=y` in JSON-escaped text takes only `x`.
_QUOTED_OR_BARE = r"""(?:(?P<q>["'`])(?P<qv>(?:\\.|(?!(?P=q))[^\\\r\n])*)(?P=q)|(?P<uv>[^\s"'`\\]+))"""

# `key = value`, `KEY=value`, `key: value`, `"key": "value"`, `key := value`, `key => value`,
# found from the key's last word (run over lower-cased text) and checked against the whole key.
_ASSIGNMENT = re.compile(
    rf"""(?P<kw>{_KEY_WORDS})(?P<kq>["'`]?)(?P<sep>[ \t]*(?::=|=>|=(?!=)|:(?![:/]))[ \t]*){_QUOTED_OR_BARE}"""
)


def _locate_assignment(match: re.Match[str], text: str) -> tuple[int, int] | None:
    key_end = match.end("kw")
    start = _key_start(text, key_end)
    key = text[start:key_end].lstrip("-$@")
    quote = match.group("kq")
    if not key or (quote and (start == 0 or text[start - 1] != quote)):
        return None
    sep = match.group("sep")
    if sep.strip() == ":" and not quote and match.start("uv") >= 0 and not sep.endswith((" ", "\t")):
        # `user:password@host`, `host:port`: a YAML or header value follows `: ` with a space.
        return None
    env_style = sep == "=" and _ENV_KEY.match(key) is not None
    if not is_secret_key_name(key, env_style):
        return None
    found = _value_span(match, text, key=key, strict=not env_style)
    if found and start and text[start - 1] in "?&":
        # A query parameter (`?access_token=…&page=2`): the value ends at the next parameter.
        cut = re.search(r"[&#]", text[found[0] : found[1]])
        found = (found[0], found[0] + cut.start()) if cut else found
        if is_placeholder(text[found[0] : found[1]]):
            return None
    return found


# `--password hunter2`, `--api-key "…"`: a flag whose value follows after a space.
_FLAG = re.compile(rf"(?P<kw>{_KEY_WORDS})[ \t]+(?=[^\s-]){_QUOTED_OR_BARE}")


def _locate_flag(match: re.Match[str], text: str) -> tuple[int, int] | None:
    key_end = match.end("kw")
    start = _key_start(text, key_end)
    flag = text[start:key_end]
    if not flag.startswith("-") or (start and not text[start - 1].isspace()):
        return None
    if not is_secret_key_name(flag.lstrip("-"), env_style=False):
        return None
    return _value_span(match, text, key=flag.lstrip("-"), strict=True)


# `.netrc`: `machine h login u password p`, on one line or spread over several.
_NETRC = re.compile(r"password[ \t]+(?P<uv>[^\s\"'`\\]+)")


def _locate_netrc(match: re.Match[str], text: str) -> tuple[int, int] | None:
    line_start = text.rfind("\n", 0, match.start()) + 1
    before = text[line_start : match.start()]
    inline = re.search(r"(?i)\blogin[ \t]+\S+[ \t]+$", before) is not None
    if not inline and before.strip():
        return None
    value = text[match.start("uv") : match.end("uv")]
    if len(value) < 3 or is_placeholder(value) or not (inline or looks_random(value)):
        return None
    return match.span("uv")


# --- headers and URLs -------------------------------------------------------------------------

_AUTH_HEADER = re.compile(
    r"""authorization["']?[ \t]*[:=][ \t]*["']?[ \t]*"""
    r"(?:(?P<scheme>bearer|token|bot|basic|apikey|api-key|sso-key|key|jwt|dpop)[ \t]+)?"
    r"(?!(?:bearer|basic|token|digest|negotiate)\b)"
    r"(?P<v>[a-z0-9._~+/=:-]{8,})"
)


def _auth_header_rule(kind: str, basic: bool) -> Rule:
    def locate(match: re.Match[str], text: str) -> tuple[int, int] | None:
        scheme = match.group("scheme") or ""
        if (scheme == "basic") != basic:
            return None
        value = text[match.start("v") : match.end("v")]
        # Without a scheme only a long random value is a credential (`Authorization: auth_header`
        # in code is not).
        if is_placeholder(value) or not (scheme or (len(value) >= 16 and looks_random(value))):
            return None
        return match.span("v")

    return Rule(kind, _AUTH_HEADER, locate, lower=True, bounded=True, needles=("authorization",))


def _locate_bearer(match: re.Match[str], text: str) -> tuple[int, int] | None:
    if match.start() and (text[match.start() - 1].isalnum() or text[match.start() - 1] in "_-"):
        return None
    value = text[match.start("v") : match.end("v")]
    return match.span("v") if looks_random(value) and not is_placeholder(value) else None


_SCHEME_TAIL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}$")
# Found from `://` (a literal, so `re` can search for it fast); the scheme is checked backwards.
_URL_CREDENTIALS = re.compile(r"""://(?P<user>[^\s:/@"'<>]*):(?P<v>[^\s/"'<>]+)@(?P<host>[^\s/@"'<>?#]+)""")


def _locate_url_password(match: re.Match[str], text: str) -> tuple[int, int] | None:
    if not _SCHEME_TAIL.search(text, max(0, match.start() - 31), match.start()):
        return None
    value = match.group("v")
    return None if is_placeholder(value) else match.span("v")


_CURL_USER = re.compile(r"""(?:-u|--user)[ \t]*=?[ \t]*(?P<q>["']?)[^\s:"'`]*:(?P<v>[^\s"'`\\]+)(?P=q)""")


def _locate_curl_user(match: re.Match[str], text: str) -> tuple[int, int] | None:
    if match.start() and not text[match.start() - 1].isspace():
        return None
    return None if is_placeholder(match.group("v")) else match.span("v")


# --- the pack ---------------------------------------------------------------------------------

# Between the lines of a PEM body: newlines, JSON-escaped newlines (`\n` in a JSON string), or
# spaces (a key squeezed onto one line).
_PEM_GAP = r"(?:\r?\n|(?:\\r)?\\n|[ \t])+"
# One more line of a PEM body: base64, or a header such as `Proc-Type: 4,ENCRYPTED`.
_B64_LINE = rf"{_PEM_GAP}(?:[A-Za-z0-9+/=]{{4,}}|[A-Za-z-]+:[ \t]*[A-Za-z0-9,-]+)"

RULES: tuple[Rule, ...] = (
    # PEM: the whole block; a block cut off before its END line (truncated tool output) up to
    # the last line that still looks like key material.
    Rule(
        "private-key",
        # Only PEM lines between the markers: a key cut off earlier in the text must not reach
        # across prose to a later key's END line.
        re.compile(
            rf"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:{_B64_LINE})*{_PEM_GAP}"
            r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
        ),
        _group(),
        needles=("-----BEGIN",),
    ),
    Rule(
        "private-key",
        re.compile(rf"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:{_B64_LINE})+"),
        _group(),
        needles=("-----BEGIN",),
    ),
    Rule(
        "private-key",
        re.compile(r"Private-Lines:[ \t]*\d+(?:\r?\n[A-Za-z0-9+/=]{4,})+"),
        _group(),
        needles=("Private-Lines:",),
    ),
    _token("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    _token("openrouter-key", r"sk-or-[A-Za-z0-9_-]{20,}", ("sk-or-",)),
    _token("openai-key", r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}", ("sk-",)),
    _token("openai-key", r"sk-[A-Za-z0-9_-]{20,}", ("sk-",), lambda s: _random_key_body(s[3:])),
    _token(
        "huggingface-token",
        r"hf_[A-Za-z0-9]{30,}",
        ("hf_",),
        # Issued tokens have exactly 34 characters after `hf_`, which may happen to spell CamelCase.
        lambda s: len(s) == 37 or _random_key_body(s[3:]) or looks_random(s[3:]),
    ),
    _token("github-token", r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{30,}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _token("github-token", r"github_pat_[A-Za-z0-9_]{30,}", ("github_pat_",)),
    _token(
        "gitlab-token", r"(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-[A-Za-z0-9_-]{20,}", ("gl",)
    ),
    _token("gitlab-token", r"GR1348941[A-Za-z0-9_-]{20,}", ("GR1348941",)),
    _token("npm-token", r"npm_[A-Za-z0-9]{36,}", ("npm_",)),
    _token("pypi-token", r"pypi-AgE[A-Za-z0-9_-]{40,}", ("pypi-AgE",)),
    _token(
        "aws-access-key",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}" + _STOP,
        ("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
        _not_example,
    ),
    Rule(
        "aws-secret-key",
        re.compile(
            r"""(?:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key)["']?[ \t]*(?::|=>?)[ \t]*["']?"""
            r"(?P<s>[a-z0-9/+]{40})(?![a-z0-9/+=])"
        ),
        _group("s", _not_example),
        lower=True,
        needles=("secret",),
    ),
    # A key id followed by its secret (credentials.csv, `aws configure list` pasted by hand).
    Rule(
        "aws-secret-key",
        re.compile(r"""(?:AKIA|ASIA)[A-Z0-9]{16}["']?[\s,;:|]+["']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"""),
        _group("s", lambda s: _not_example(s) and _random_key_body(s)),
        bounded=True,
        needles=("AKIA", "ASIA"),
    ),
    Rule(
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]+"),
        _group(),
        needles=("https://hooks.slack.com/",),
    ),
    _token("slack-token", r"xox[abposre]-[A-Za-z0-9-]{10,}", ("xox",), lambda s: any(c.isdigit() for c in s)),
    _token("slack-token", r"xapp-\d-[A-Za-z0-9-]{10,}", ("xapp-",)),
    _token("google-api-key", r"AIza[0-9A-Za-z_-]{35,}", ("AIza",)),
    _token("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_-]{20,}", ("GOCSPX-",)),
    _token("google-oauth-token", r"ya29\.[0-9A-Za-z_-]{20,}", ("ya29.",)),
    _token("stripe-key", r"[rs]k_(?:live|test)_[0-9A-Za-z]{10,}", ("k_live_", "k_test_")),
    _token("stripe-key", r"whsec_[A-Za-z0-9+/=]{20,}", ("whsec_",)),
    _token("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]+)*", ("eyJ",)),
    _auth_header_rule("basic-auth", basic=True),
    _auth_header_rule("bearer-token", basic=False),
    Rule(
        "bearer-token",
        re.compile(r"bearer[ \t]+(?P<v>[a-z0-9._~+/-]{16,}=*)"),
        _locate_bearer,
        lower=True,
        needles=("bearer",),
    ),
    Rule("basic-auth", _CURL_USER, _locate_curl_user, needles=("-u",)),
    Rule("url-credentials", _URL_CREDENTIALS, _locate_url_password, needles=("://",)),
    Rule("secret-assignment", _ASSIGNMENT, _locate_assignment, lower=True, needles=_KEY_WORD_NEEDLES),
    Rule("secret-assignment", _FLAG, _locate_flag, lower=True, needles=_KEY_WORD_NEEDLES),
    Rule("secret-assignment", _NETRC, _locate_netrc, lower=True, needles=("password",)),
)


# Each needle once, with the rules it lets run: a few dozen `in` tests pick the rules for a text.
_NEEDLES: dict[tuple[str, bool], list[int]] = {}
for _index, _rule in enumerate(RULES):
    for _needle in _rule.needles:
        _NEEDLES.setdefault((_needle, _rule.lower), []).append(_index)


def rule_spans(text: str) -> Iterator[Span]:
    """Every candidate the regex pack finds in `text` (overlapping; merging happens later)."""
    lowered = lower_ascii(text)
    due = {i for (needle, lower), rules in _NEEDLES.items() if needle in (lowered if lower else text) for i in rules}
    for index in sorted(due):
        yield from RULES[index].spans(text, lowered)
