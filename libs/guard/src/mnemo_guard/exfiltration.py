"""Exfiltration and remote code: links that carry data out, requests to send secrets, `curl … | sh` as an order."""

from __future__ import annotations

import re
import shlex

from mnemo_guard.model import EXFILTRATION_LINK, EXFILTRATION_REQUEST, REMOTE_EXECUTION
from mnemo_guard.normalize import View
from mnemo_guard.scan import Hit, at_words, line, occurrences, sentence, wordset
from mnemo_redact import dangerous_output_kind, is_secret_path

# A placeholder in a URL: {secret}, {{history}}, ${DATA}, $DATA, <conversation>, [SUMMARY], %s.
_PLACEHOLDER = re.compile(
    r"\{\{?\s*([^{}\s][^{}]{0,60})\}\}?|\$\{([^}]{1,60})\}|\$([a-z_][a-z0-9_]*)|<([a-z_ ]{2,40})>"
    r"|\[([a-z_ ]{2,40})\]|%s"
)
_DATA_WORD = re.compile(
    r"secret|passw|token|api[\W_]?key|\bkey|credential|conversation|chat|history|memor|context|summary|data|info"
    r"|message|prompt|input|question|answer|response|email|phone|ssn|card|env|ssh|session|cookie|previous|content"
    r"|text|details|everything|\ball\b|private|personal|pii|user[\W_]?(?:input|data|message|query)"
)
_STRONG_DATA_WORD = re.compile(
    r"secret|passw|credential|conversation|chat|history|memor|ssh|private|api[\W_]?key|summary|previous|context|cookie"
    r"|user[\W_]?(?:input|data|message|query)|pii|personal"
)
_URL = re.compile(r"(?:https?:)?//[^\s)\"'>]+")
_EXFIL_ORDER = re.compile(
    r"\b(?:append|add|include|insert|put|encode|embed|replace|fill\s+in|substitute)\b[^.\n]{0,80}?\b(?:conversation|chat"
    r"|history|previous\s+messages|secrets?|passwords?|api\s+keys?|tokens?|credentials|the\s+user'?s|user\s+data"
    r"|memor(?:y|ies)|context|summary|everything|personal\s+data|email\s+address)\b[^.\n]{0,80}?\b(?:to|in|into|as"
    r"|inside)\s+(?:the\s+|a\s+|this\s+)?(?:url|link|query(?:\s+string)?|parameter|param|image|src|request|address"
    r"|markdown\s+image)\b"
    r"|\b(?:render|display|show|include|output|print)\s+(?:this|the\s+following|an?)\s+(?:markdown\s+)?image\b[^.\n]{0,80}"
    r"?\b(?:with|containing|including)\b[^.\n]{0,40}?\b(?:conversation|history|secrets?|data|summary|messages?)\b"
)
_SEND = re.compile(
    r"\b(?:send|upload|post|e-?mail|mail|forward|transmit|exfiltrate|leak|copy|paste|submit|report|dump|beam|ship"
    r"|sync|push|share|pipe|attach|curl|wget)\w*\b"
)
_SECRET_THING = re.compile(
    r"~/\.ssh\b|\.ssh/|~/\.aws\b|\.aws/credentials|~/\.gnupg|/etc/(?:passwd|shadow)|~/\.kube|~/\.docker|~/\.netrc"
    r"|\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub)|(?<!public\s)\b(?:private|ssh|gpg|pgp|signing)\s+keys?\b"
    r"|\b(?:api|access|secret|aws)\s+keys?\b|\b(?:session\s+)?tokens?\b|\bpasswords?\b|\bcredentials?\b|\bsecrets\b"
    r"|\benvironment\s+variables\b|\benv\s+vars\b|(?<![\w.])\.env\b(?!\.(?:example|sample|template))|\bcookies\b"
    r"|\b(?:the\s+)?(?:whole\s+|entire\s+|full\s+)?(?:conversation|chat\s+history|system\s+prompt)\b"
    r"|\bthe\s+user'?s\s+(?:data|messages|files|code|secrets|keys|emails?|history)\b|\bmemories\b"
)
_DESTINATION = re.compile(
    r"\b(?:to|at|via|into|on|onto)\s+(?:my\s+|our\s+|this\s+|the\s+following\s+|an?\s+)?(?:https?://\S+"
    r"|[\w.+-]+@[\w-]+\.[\w.]+|\d{1,3}(?:\.\d{1,3}){3}|[\w-]+(?:\.[\w-]+)+(?::\d+)?(?:/\S*)?"
    r"|(?:external\s+|remote\s+|attacker'?s?\s+)?(?:webhook|endpoint|server|pastebin|discord|telegram|ngrok|url"
    r"|address|inbox|gist|bucket))"
)
_NEGATED = re.compile(r"\b(?:never|not|don'?t|dont|avoid|no\s+one|nobody|must\s+not|shouldn'?t|cannot|can'?t)\b")
_PUBLIC = re.compile(r"\bpublic\s+keys?\b|\.pub\b|\bpublishable\b")
_NETWORK_SINK = re.compile(
    r"(?:^|[\s|;&(`$])(?:curl|wget|nc|ncat|netcat|socat|scp|rsync|sftp|ftp|telnet|invoke-webrequest|invoke-restmethod"
    r"|iwr|irm|http|https|xh)\b|requests\.(?:post|put|get)\(|fetch\(|urllib\.request|httpx\.(?:post|put)"
)
_UPLOAD_FILE = re.compile(
    r"(?:-d|--data(?:-binary|-raw|-urlencode)?|-f|--form|-t|--upload-file|--body-file|--post-file)\s*[=\s]\s*"
    r"[\"']?(?:[\w-]+=)?@?(?P<path>[^\s\"'|;&)]+)"
)
_ENV_DUMP = re.compile(r"\$\(\s*(?:env|printenv|set|cat\s+[^)]*)\s*\)|`(?:env|printenv)`|\b(?:env|printenv)\s*\|")
_REMOTE_CODE = re.compile(
    r"(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|fetch)\b[^\n|;]{0,300}\|\s*(?:sudo\s+(?:-\w+\s+)*)?"
    r"(?:ba|z|da|k|fi|c)?sh\b|(?:ba|z)?sh\s+(?:-c\s+)?[\"']?\$\(\s*(?:curl|wget)\b|(?:ba|z)?sh\s+<\(\s*(?:curl|wget)\b"
    r"|\biex\s*\(?\s*(?:\(\s*)?(?:iwr|irm|invoke-webrequest|invoke-restmethod|new-object\s+net\.webclient)"
    r"|(?:curl|wget)\b[^\n|;]{0,300}\|\s*(?:sudo\s+)?(?:python3?|perl|ruby|node)\b(?!\s+-m\s+json)"
    r"|base64\s+(?:-d|--decode)\b[^\n;]{0,40}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b"
)
_SECRET_DIR = re.compile(r"(?:~|\$home|/home/[^/\s]+|/root)/\.(?:ssh|aws|gnupg|kube|docker|config/gh)(?:/|$)")
_AUTH_OPTIONS = frozenset(
    {"-i", "--identity", "--key", "--cert", "--cacert", "-e", "--key-file", "--keyfile", "--ssh-key", "-k", "--capath"}
)
_STANDING = re.compile(
    r"\b(?:always|whenever|every\s+time|each\s+time|every\s+session|at\s+the\s+start\s+of\s+(?:every|each|any)"
    r"|before\s+(?:every|each|any|answering|responding|you\s+(?:answer|respond|reply|start))|first\s+thing"
    r"|from\s+now\s+on|automatically|make\s+sure\s+to|be\s+sure\s+to|must)\b"
)
_STEALTH = re.compile(
    r"\b(?:silently|quietly|secretly|covertly|discreetly|without\s+(?:asking|telling|confirming|mentioning|informing"
    r"|prompting|approval|confirmation|notifying)|(?:do\s+not|don'?t|never)\s+(?:mention|tell|ask|report|show|log))\b"
)
_AI = re.compile(
    r"\b(?:assistants?|ai\s+(?:assistant|agent|model)s?|chat\s?bots?|language\s+models?|llms?|(?:the|an|dear|hey|to)"
    r"\s+ai\b|as\s+an\s+ai|the\s+agent|coding\s+agents?)\b"
)
_SKETCHY_HOST = re.compile(
    r"https?://(?:\d{1,3}(?:\.\d{1,3}){3}|[^/\s]*(?:ngrok|pastebin|paste\.ee|hastebin|termbin|transfer\.sh|0x0\.st"
    r"|bit\.ly|tinyurl|is\.gd|t\.co|duckdns|no-ip|trycloudflare|serveo|localtunnel|\.onion|\.tk|\.top|\.xyz|evil"
    r"|attacker)[^/\s]*)"
)


_HTTP = wordset("http https")
_LINK_WORDS = wordset("url link query parameter param image src")
_SEND_WORDS = wordset(
    "send sends sending upload uploading post posting email mail forward transmit exfiltrate leak copy paste submit",
    "report dump beam ship sync push share attach",
)
_SECRET_WORDS = wordset(
    "ssh aws gnupg passwd shadow kube docker netrc rsa dsa ecdsa ed25519 private key keys token tokens password",
    "passwords credential credentials secret secrets env environment cookies conversation history prompt memories",
    "user",
)
_SHELL_WORDS = wordset("curl wget nc ncat netcat socat scp rsync sftp invoke iwr irm iex requests fetch base64 xh")


def find_exfiltration(view: View) -> list[Hit]:
    """Markdown links and images that smuggle data out, requests to send secrets, and remote code as an order."""
    low = view.low
    words = view.words
    hits: list[Hit] = []
    if view.has("]("):
        hits.extend(_markdown_links(low))
    if not words.isdisjoint(_HTTP) and any(view.has(c) for c in ("{", "$", "<", "%s", "[")):
        hits.extend(_plain_links(low))
    if not words.isdisjoint(_LINK_WORDS):
        for i in at_words(view, _LINK_WORDS):
            start, end = sentence(low, i)
            m = _EXFIL_ORDER.search(low, start, end)
            if m:
                hits.append(Hit(EXFILTRATION_LINK, m.start(), m.end()))
    if not words.isdisjoint(_SEND_WORDS) and not words.isdisjoint(_SECRET_WORDS):
        hits.extend(_send_requests(view))
    if not words.isdisjoint(_SHELL_WORDS):
        hits.extend(_shell(view))
    return hits


def _markdown_links(low: str) -> list[Hit]:
    hits: list[Hit] = []
    for i in occurrences(low, "]("):
        close = low.find(")", i + 2, i + 2002)
        if close == -1:
            continue
        url = low[i + 2 : close].strip().strip("<>")
        if not url.startswith(("http", "//")):
            continue
        opening = low.rfind("[", max(0, i - 300), i)
        is_image = opening > 0 and low[opening - 1] == "!"
        for p in _PLACEHOLDER.finditer(url):
            name = next((g for g in p.groups() if g), "%s")
            in_query = "?" in url[: p.start()] or "#" in url[: p.start()]
            if (is_image and (in_query or _DATA_WORD.search(name))) or _STRONG_DATA_WORD.search(name):
                start = opening - 1 if is_image else max(opening, 0)
                hits.append(Hit(EXFILTRATION_LINK, start, close + 1))
                break
    return hits


def _plain_links(low: str) -> list[Hit]:
    hits: list[Hit] = []
    for m in (_URL.match(low, i) for i in occurrences(low, "http")):
        if not m or "](" in low[max(0, m.start() - 2) : m.start()]:
            continue
        url = m.group()
        for p in _PLACEHOLDER.finditer(url):
            name = next((g for g in p.groups() if g), "")
            if name and _STRONG_DATA_WORD.search(name) and "?" in url[: p.start()]:
                start, end = sentence(low, m.start())
                if re.search(
                    r"\b(?:visit|open|fetch|load|request|render|include|embed|display|show|append|send|call"
                    r"|ping|curl|wget|click|navigate|browse|go\s+to|get)\b",
                    low[start:end],
                ):
                    hits.append(Hit(EXFILTRATION_LINK, m.start(), m.end()))
                    break
    return hits


def _send_requests(view: View) -> list[Hit]:
    low = view.low
    hits: list[Hit] = []
    seen: set[tuple[int, int]] = set()
    for i in at_words(view, _SEND_WORDS):
        bounds = sentence(low, i)
        if bounds in seen:
            continue
        seen.add(bounds)
        start, end = bounds
        verb = _SEND.match(low, i)
        if not verb or _NEGATED.search(low[max(start, i - 40) : i]):
            continue
        thing = _SECRET_THING.search(low, verb.end(), min(end, verb.end() + 160))
        if not thing or thing.start() - verb.end() > 120 or _PUBLIC.search(low, start, end):
            continue
        destination = _DESTINATION.search(low, thing.end(), end)
        if destination and not _local_destination(destination.group()):
            hits.append(Hit(EXFILTRATION_REQUEST, verb.start(), destination.end()))
    return hits


def _local_destination(text: str) -> bool:
    """`to .env`, `to localhost`, `to the vault`: a copy that stays on the machine or in a secret store."""
    target = text.split(None, 1)[-1]
    return target.startswith((".", "/", "~")) or any(
        w in target for w in ("localhost", "127.0.0.1", "vault", "1password")
    )


def _shell(view: View) -> list[Hit]:
    low = view.low
    hits: list[Hit] = []
    lines = sorted({line(low, i) for i in at_words(view, _SHELL_WORDS)})
    for start, end in lines:
        text = low[start:end]
        if len(text) > 2000:
            continue
        if _NETWORK_SINK.search(text) and _leaks_secret(text):
            hits.append(Hit(EXFILTRATION_REQUEST, start + len(text) - len(text.lstrip()), end))
            continue
        m = _REMOTE_CODE.search(text)
        if m:
            s, e = sentence(low, start + m.start(), start + m.end())
            context = low[max(0, s - 200) : min(len(low), e + 100)]
            order = _STANDING.search(low, s, e) or _STEALTH.search(context) or _AI.search(context)
            if order or _SKETCHY_HOST.search(text) or "base64" in m.group():
                hits.append(Hit(REMOTE_EXECUTION, start + m.start(), start + m.end()))
    return hits


def _leaks_secret(command: str) -> bool:
    """A network command that carries a credential file or the environment out."""
    if _ENV_DUMP.search(command):
        return True
    for m in _UPLOAD_FILE.finditer(command):
        if is_secret_path(m.group("path")):
            return True
    if "|" in command:
        left = command.split("|", 1)[0]
        if dangerous_output_kind(left.strip().strip("`$(")):
            return True
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    # Any credential file or directory in the pipeline is carried out, unless it only authenticates the
    # connection (`scp -i ~/.ssh/id_ed25519 …`, `curl --cert …`).
    for k, word in enumerate(words):
        path = word.lstrip("<@")
        if (is_secret_path(path) or _SECRET_DIR.match(path)) and (k == 0 or words[k - 1] not in _AUTH_OPTIONS):
            return True
    return False
