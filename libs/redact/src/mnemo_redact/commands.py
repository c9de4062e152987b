"""Commands whose whole output is secret (environment dumps, credential files) and dropping it."""

from __future__ import annotations

import fnmatch
import re
import shlex

from mnemo_redact.core import redact
from mnemo_redact.model import MARKER_RE, Finding, Redaction, digest, marker
from mnemo_redact.patterns import is_secret_key_name

ENVIRONMENT_DUMP = "environment-dump"
SECRET_FILE = "secret-file"  # noqa: S105 (a kind name, not a password)

# Programs that print the files named in their arguments (or on stdin).
_READERS = frozenset(
    [
        "cat",
        "bat",
        "batcat",
        "less",
        "more",
        "most",
        "head",
        "tail",
        "nl",
        "tac",
        "strings",
        "xxd",
        "od",
        "hexdump",
        "base64",
        "jq",
        "yq",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "sed",
        "awk",
        "gawk",
        "mawk",
        "cut",
        "sort",
        "uniq",
        "column",
        "fold",
        "fmt",
        "pr",
        "paste",
        "iconv",
        "tee",
        "diff",
        "view",
        "get-content",
        "gc",
        "type",
        "openssl",
        "dd",
    ]
)
# Programs that run the rest of their arguments as a command, with their flags that take a
# value (`sudo -u root`, `nice -n 10`, `xargs -I {}`).
_WRAPPERS: dict[str, frozenset[str]] = {
    name: frozenset(flags.split())
    for name, flags in {
        "sudo": "-u -g -C -h -p -r -t -U -D -R -T",
        "doas": "-u -C",
        "nohup": "",
        "time": "-f -o",
        "command": "",
        "builtin": "",
        "exec": "-a",
        "nice": "-n",
        "ionice": "-c -n -p",
        "stdbuf": "-i -o -e",
        "chronic": "",
        "unbuffer": "",
        "timeout": "-s -k",
        "watch": "-n -d -x",
        "xargs": "-I -L -n -P -d -a -E -s",
    }.items()
}
_SHELLS = frozenset(["sh", "bash", "zsh", "dash", "ksh", "fish", "busybox"])
_TEMPLATE_SUFFIXES = frozenset(
    ["example", "sample", "template", "dist", "defaults", "default", "schema", "tmpl", "tpl", "skel"]
)
_SECRET_NAMES = frozenset(
    {
        ".npmrc",
        ".yarnrc.yml",
        ".pypirc",
        ".netrc",
        "_netrc",
        ".pgpass",
        ".my.cnf",
        ".git-credentials",
        ".vault-token",
        ".htpasswd",
        ".envrc",
        "auth.json",
        ".credentials.json",
        "credentials.json",
        "application_default_credentials.json",
        "credentials",
        "credentials.db",
        "access_tokens.db",
        "kubeconfig",
        ".secrets",
        "secrets.json",
        "secrets.yaml",
        "secrets.yml",
        "secrets.toml",
        "secrets.env",
        "terraform.tfvars",
        "terraform.tfstate",
    }
)
# A secret file's name only under a given directory (`~/.docker/config.json`, not any config.json).
_SECRET_IN_DIR = {("config.json", ".docker"), ("config", ".kube"), ("hosts.yml", "gh"), ("hub", ".config")}
_KEY_FILE = re.compile(
    r"(?i)^(?:id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?|.*\.(?:key|p12|pfx|jks|keystore|ppk)|.*(?:key|priv).*\.pem"
    r"|client_secret.*\.json|service[-_]?account.*\.json|.*credentials.*\.(?:json|ya?ml|toml|ini|txt))$"
)
# Sample names a glob such as `.env*` or `*.pem` is tried against.
_GLOB_SAMPLES = (".env", ".env.local", "prod.env", "id_rsa", "auth.json", ".credentials.json", "server.key", "key.pem")

# Code that prints the whole environment (`python -c 'print(os.environ)'`, PowerShell's env: drive).
_ENV_PRINT = re.compile(
    r"os\.environ\s*\)|os\.environ\.(?:items|copy)\(\)|process\.env\s*\)|JSON\.stringify\(\s*process\.env"
    r"|\bENV\.to_h\b|System\.getenv\(\s*\)|(?i:\b(?:get-childitem|gci|dir|ls)\s+env:)"
)
_PS_WITH_ENV = re.compile(r"[auxwfjlmrsvTSHcLn]*e[auxewfjlmrsvTSHcLn]*")
_VAR_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def secret_path_kind(path: str) -> str | None:
    """The kind of secret a file at `path` holds (`secret-file`, `environment-dump`), or None.

    `.env.example` and other templates, and public keys (`*.pub`), are not secret files.
    """
    path = path.strip().replace("\\", "/")
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    name, parent = parts[-1].lower(), (parts[-2].lower() if len(parts) > 1 else "")
    if name == "environ" and "proc" in (p.lower() for p in parts):
        return ENVIRONMENT_DUMP
    if any(c in name for c in "*?["):
        return SECRET_FILE if any(fnmatch.fnmatch(sample, name) for sample in _GLOB_SAMPLES) else None
    if name.endswith(".pub"):
        return None
    if name == ".env" or name.endswith(".env"):
        return SECRET_FILE
    if name.startswith(".env."):
        return None if name.rsplit(".", 1)[-1] in _TEMPLATE_SUFFIXES else SECRET_FILE
    if name in _SECRET_NAMES or (name, parent) in _SECRET_IN_DIR or _KEY_FILE.match(name):
        return SECRET_FILE
    return None


def is_secret_path(path: str) -> bool:
    """True when reading the file at `path` would print secrets (`.env`, `~/.aws/credentials`, `id_rsa`…)."""
    return secret_path_kind(path) is not None


def _tokens(command: str) -> list[str]:
    # Backticks and newlines separate commands as far as we are concerned.
    text = command.replace("`", " ; ").replace("\n", " ; ").replace("$(", " ; (")
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        # Unbalanced quotes: a rough split still finds `env` and `cat .env`.
        return re.findall(r"[|&;()<>]+|[^\s|&;()<>]+", text)


_SEPARATOR = re.compile(r"^[|&;()]+$")
_REDIRECT = re.compile(r"^\d*(?:>>?|>&|&>>?|<>?|<<<?|<&)$")
_LEADING_KEYWORDS = frozenset(["!", "{", "}", "if", "then", "else", "elif", "do", "while", "until", "$", "time"])


def _simple_commands(command: str) -> tuple[list[list[str]], list[str]]:
    """The argv of each simple command in `command`, and the files redirected into them."""
    commands: list[list[str]] = [[]]
    inputs: list[str] = []
    tokens = _tokens(command)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if _SEPARATOR.match(token):
            commands.append([])
        elif _REDIRECT.match(token):
            if token.lstrip("0123456789") in ("<", "<>") and i + 1 < len(tokens):
                inputs.append(tokens[i + 1])
            i += 1  # the redirect's target is not an argument
        elif commands[-1] or token not in _LEADING_KEYWORDS:
            commands[-1].append(token)
        i += 1
    return [argv for argv in commands if argv], inputs


def _strip_wrappers(argv: list[str]) -> list[str]:
    """`argv` without leading `VAR=value` assignments and wrappers such as `sudo -u root`."""
    while argv:
        head = argv[0]
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", head):
            argv = argv[1:]
            continue
        name = head.rsplit("/", 1)[-1].lower()
        if name not in _WRAPPERS:
            return argv
        rest = argv[1:]
        while rest and rest[0].startswith("-"):
            flag = rest.pop(0)
            if flag in _WRAPPERS[name] and rest:
                rest.pop(0)
        if name == "timeout" and rest:
            rest = rest[1:]  # the duration
        argv = rest
    return argv


def _env_kind(args: list[str], depth: int) -> str | None:
    """`env` alone prints the environment; `env -i FOO=1 cmd` runs `cmd`."""
    rest = list(args)
    while rest and (rest[0].startswith("-") or "=" in rest[0]):
        flag = rest.pop(0)
        if flag in ("-u", "-C", "-S", "--unset", "--chdir", "--split-string") and rest:
            rest.pop(0)
    return ENVIRONMENT_DUMP if not rest else _argv_kind(rest, depth + 1)


def _prints_secret_variable(args: list[str]) -> bool:
    return any(is_secret_key_name(name, env_style=True) for arg in args for name in _VAR_REF.findall(arg))


def _has_output_format(args: list[str]) -> bool:
    for i, arg in enumerate(args):
        if arg in ("-o", "--output") and i + 1 < len(args):
            return args[i + 1] not in ("name", "wide")
        if (arg.startswith("-o") and len(arg) > 2) or arg.startswith("--output="):
            return not arg.endswith(("name", "wide"))
    return False


def _tool_kind(name: str, args: list[str]) -> str | None:
    """Clouds, clusters and secret managers whose subcommands print credentials."""
    words = [a.lower() for a in args if not a.startswith("-")]
    flags = [a for a in args if a.startswith("-")]
    joined = " ".join(words)
    if name in ("docker", "podman", "nerdctl"):
        if "inspect" in words[:2]:
            return ENVIRONMENT_DUMP
        if words[:2] == ["compose", "config"]:
            return ENVIRONMENT_DUMP
    if name == "docker-compose" and words[:1] == ["config"]:
        return ENVIRONMENT_DUMP
    if name in ("kubectl", "oc", "k"):
        if words[:1] == ["get"] and any(w.startswith("secret") for w in words[1:3]) and _has_output_format(args):
            return SECRET_FILE
        if words[:1] == ["view-secret"] or words[:2] == ["create", "token"]:
            return SECRET_FILE
        if words[:2] == ["config", "view"] and ("--raw" in flags or "--flatten" in flags):
            return SECRET_FILE
    if name == "heroku" and words[:1] and words[0].startswith("config") and words[0] not in ("config:unset",):
        return ENVIRONMENT_DUMP
    if name == "gh" and (words[:2] == ["auth", "token"] or (words[:2] == ["auth", "status"] and "-t" in flags)):
        return SECRET_FILE
    if name == "gh" and words[:2] == ["auth", "status"] and "--show-token" in flags:
        return SECRET_FILE
    if name == "gcloud" and re.search(r"\bprint-(?:access|identity|refresh)-token\b", joined):
        return SECRET_FILE
    if name == "az" and words[:2] == ["account", "get-access-token"]:
        return SECRET_FILE
    if name == "aws" and (
        words[:2] in (["configure", "export-credentials"], ["ecr", "get-login-password"])
        or (words[:2] == ["configure", "get"] and re.search(r"secret|token", joined))
        or words[:2] in (["sts", "get-session-token"], ["sts", "assume-role"], ["sts", "get-federation-token"])
    ):
        return SECRET_FILE
    secret_tools = {
        "vault": (["read"], ["kv", "get"], ["token", "create"], ["write"]),
        "op": (["read"], ["item", "get"], ["inject"]),
        "pass": (["show"],),
        "gopass": (["show"],),
        "bw": (["get"],),
        "doppler": (["secrets"],),
        "infisical": (["secrets"], ["export"]),
        "sops": (),
        "ansible-vault": (["view"], ["decrypt"]),
        "security": (["find-generic-password"], ["find-internet-password"]),
        "npm": (["token", "create"],),
        "vercel": (["env", "pull"],),
    }
    if name in secret_tools:
        if name == "sops":
            return SECRET_FILE if any(f in ("-d", "--decrypt") for f in flags) else None
        if name == "pass" and words and words[0] not in ("ls", "list", "find", "search", "init", "git", "generate"):
            return SECRET_FILE
        if any(words[: len(prefix)] == list(prefix) for prefix in secret_tools[name]):
            return SECRET_FILE
    return None


def _argv_kind(argv: list[str], depth: int = 0) -> str | None:
    """What a simple command prints that must be dropped whole, or None."""
    argv = _strip_wrappers(argv)
    if not argv or depth > 4:
        return None
    name = argv[0].rsplit("/", 1)[-1].lower()
    args = argv[1:]
    if name == "printenv":
        return ENVIRONMENT_DUMP
    if name == "env":
        return _env_kind(args, depth)
    if name == "set" and not args:
        return ENVIRONMENT_DUMP
    if name == "export" and all(a == "-p" for a in args):
        return ENVIRONMENT_DUMP
    if name in ("declare", "typeset") and args and all(re.fullmatch(r"-[px]+", a) for a in args):
        return ENVIRONMENT_DUMP
    if name in ("declare", "typeset") and not args:
        return ENVIRONMENT_DUMP
    # BSD-style `ps e`, `ps auxe`, `ps eww` (not `ps -e`, which lists all processes); macOS `ps -E`.
    if name == "ps" and ("-E" in args or any(_PS_WITH_ENV.fullmatch(a) for a in args)):
        return ENVIRONMENT_DUMP
    if name in ("echo", "printf", "print") and _prints_secret_variable(args):
        return ENVIRONMENT_DUMP
    if name in _SHELLS or name == "eval":
        return _shell_kind(name, args, depth)
    if name == "ssh":
        return _remote_kind(args, depth)
    if name in ("docker", "podman", "nerdctl", "kubectl", "oc", "docker-compose") and "exec" in args[:2]:
        return _exec_kind(args, depth)
    if (
        name == "git"
        and args
        and args[0] in ("show", "diff", "cat-file", "blame", "log")
        and any(secret_path_kind(a.rsplit(":", 1)[-1]) for a in args[1:] if not a.startswith("-"))
    ):
        return SECRET_FILE
    if name in _READERS:
        kinds = [secret_path_kind(a) for a in args if not a.startswith("-")]
        for kind in kinds:
            if kind:
                return kind
    return _tool_kind(name, args)


def _shell_kind(name: str, args: list[str], depth: int) -> str | None:
    if name == "eval":
        return _command_kind(" ".join(args), depth + 1)
    for i, arg in enumerate(args):
        if arg.startswith("-") and "c" in arg.lstrip("-") and not arg.startswith("--") and i + 1 < len(args):
            return _command_kind(args[i + 1], depth + 1)
    return None


def _remote_kind(args: list[str], depth: int) -> str | None:
    rest = list(args)
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if len(flag) == 2 and flag[1] in "bcDEeFIiJLlmOopQRSWw" and rest:
            rest.pop(0)
    return _command_kind(" ".join(rest[1:]), depth + 1) if len(rest) > 1 else None


def _exec_kind(args: list[str], depth: int) -> str | None:
    if "--" in args:
        return _command_kind(" ".join(args[args.index("--") + 1 :]), depth + 1)
    rest = args[args.index("exec") + 1 :]
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag in ("-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "-c", "--container") and rest:
            rest.pop(0)
    return _argv_kind(rest[1:], depth + 1) if len(rest) > 1 else None


def _command_kind(command: str, depth: int = 0) -> str | None:
    if depth > 4:
        return None
    if _ENV_PRINT.search(command):
        return ENVIRONMENT_DUMP
    commands, inputs = _simple_commands(command)
    for path in inputs:
        if kind := secret_path_kind(path):
            return kind
    for argv in commands:
        if kind := _argv_kind(argv, depth):
            return kind
    # `find . -name .env | xargs cat`, `cat $(ls .env*)`: a reader given no file of its own
    # prints what another part of the command names.
    stdin_readers = [argv for argv in commands if (a := _strip_wrappers(argv)) and a[0] in _READERS and len(a) == 1]
    if stdin_readers:
        for argv in commands:
            for token in argv:
                if kind := secret_path_kind(token):
                    return kind
    return None


def dangerous_output_kind(command: str) -> str | None:
    """`environment-dump` or `secret-file` when `command`'s whole output must be dropped, else None."""
    return _command_kind(command)


def is_dangerous_command(command: str) -> bool:
    """True when `command` prints an environment or a credential file (`env | sort`, `cat .env`…)."""
    return dangerous_output_kind(command) is not None


def redact_command_output(command: str, output: str) -> Redaction:
    """The output of a dangerous command replaced whole by one marker; any other output redacted."""
    kind = dangerous_output_kind(command)
    if kind is None:
        return redact(output)
    if not output or MARKER_RE.fullmatch(output):
        return Redaction(output)
    return Redaction(marker(kind), (Finding(kind, 0, len(output), digest(output)),))
