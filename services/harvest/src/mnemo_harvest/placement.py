"""Which workspace a session belongs to: the registered root that is the longest prefix of its cwd."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# A directory holding this file (or under one that does) is Mnemo's own: sessions run there are
# Mnemo's tools talking to agents (tests, benchmarks, the summarizer), never harvested.
INTERNAL_MARKER = ".mnemo-internal"
INTERNAL_PROMPT_PREFIX = "[mnemo-internal]"
# Mnemo's own temporary directories (data dirs of tests and benchmarks, embedded PostgreSQL)
# are made with this prefix directly under the system temp dir.
INTERNAL_TEMP_PREFIX = "mnemo-"


def main_worktree(cwd: str) -> str | None:
    """For a path inside a git worktree, the main repository's root (a worktree maps to it).

    A linked worktree has a `.git` *file* saying `gitdir: <main>/.git/worktrees/<name>`. The
    directory may be gone by the time a session is harvested; then there is nothing to map.
    """
    path = Path(cwd)
    for directory in (path, *path.parents):
        git = directory / ".git"
        try:
            if git.is_dir():
                return None
            if git.is_file():
                line = git.read_text(encoding="utf-8", errors="replace").strip()
                if line.startswith("gitdir:"):
                    gitdir = Path(line.removeprefix("gitdir:").strip())
                    if not gitdir.is_absolute():
                        gitdir = (directory / gitdir).resolve()
                    if gitdir.parent.name == "worktrees" and gitdir.parent.parent.name == ".git":
                        return str(gitdir.parent.parent.parent)
                return None
        except OSError:
            return None
    return None


def is_internal(cwd: str | None, first_prompt: str, data_dir: Path) -> bool:
    """Sessions run by Mnemo itself, or inside its data directory, are never captured (no loops)."""
    if first_prompt.lstrip().startswith(INTERNAL_PROMPT_PREFIX):
        return True
    if not cwd:
        return False
    path = Path(cwd)
    try:
        data, resolved = data_dir.resolve(), path.resolve()
        if resolved == data or data in resolved.parents:
            return True
        temp = Path(tempfile.gettempdir()).resolve()
        if temp in resolved.parents and resolved.relative_to(temp).parts[0].startswith(INTERNAL_TEMP_PREFIX):
            return True
        return any((d / INTERNAL_MARKER).exists() for d in (path, *path.parents))
    except OSError:
        return False


def lookup_paths(cwd: str) -> list[str]:
    """The paths to resolve, best first: the main repository for a worktree, then the cwd itself."""
    paths = []
    main = main_worktree(cwd)
    if main:
        paths.append(main)
    paths.append(os.path.normpath(cwd))
    return paths
