"""deploy/image/Dockerfile read as data: its stages and instructions, for the test that runs its steps."""

from __future__ import annotations

import fnmatch
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "image" / "Dockerfile"


@dataclass
class Stage:
    """One FROM and what follows it: (instruction, arguments) in order."""

    base: str
    name: str
    steps: list[tuple[str, str]] = field(default_factory=list)

    def args(self, instruction: str) -> list[str]:
        return [rest for op, rest in self.steps if op == instruction]

    def env(self) -> dict[str, str]:
        """The stage's ENV, in `K=V` form (values may name $PATH, left for the caller to expand)."""
        env: dict[str, str] = {}
        for rest in self.args("ENV"):
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                env[key] = value
        return env


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = pending + line
        pending = ""
        op, _, rest = line.partition(" ")
        result.append((op.upper(), rest.strip()))
    return result


def stages(text: str) -> tuple[dict[str, str], list[Stage]]:
    """The global ARGs' defaults and the stages, with ${ARG} expanded in each FROM."""
    args: dict[str, str] = {}
    found: list[Stage] = []
    for op, rest in instructions(text):
        if op == "ARG" and not found:
            key, _, value = rest.partition("=")
            args[key] = value
        elif op == "FROM":
            for key, value in args.items():
                rest = rest.replace("${" + key + "}", value)
            words = rest.split()
            found.append(Stage(base=words[0], name=words[2] if len(words) == 3 and words[1].upper() == "AS" else ""))
        elif found:
            found[-1].steps.append((op, rest))
    return args, found


def strip_flags(run: str) -> str:
    """A RUN's command without its leading `--mount=…` style flags."""
    words = run.split(" ")
    while words and words[0].startswith("--"):
        words.pop(0)
    return " ".join(words)


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore's `patterns` leave `path` (a tracked file, relative) out of the build context:
    the last pattern that matches it or one of its parent directories decides, `!` letting it back in."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        glob = pattern[1:] if negate else pattern
        if glob.startswith("**/"):
            hit = any(fnmatch.fnmatchcase(part, glob[3:]) for part in parts)
        else:
            hit = any(fnmatch.fnmatchcase(prefix, glob) and glob.count("/") == prefix.count("/") for prefix in prefixes)
        if hit:
            result = not negate
    return result


def build_context() -> list[str]:
    """The tracked files `docker build` would send, given .dockerignore."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    git = shutil.which("git") or "git"
    tracked = subprocess.run([git, "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [path for path in tracked.splitlines() if not ignored(path, patterns)]
