"""The repository stands alone: a fresh clone runs its fixture tests, and no tracked file reads a folder beside it.

The clone test clones the committed HEAD, so it tests what is committed, not the working tree: commit
first, then run it. It runs in an empty temporary directory, so nothing can be found beside the clone
(the development checkout once read fixtures and data from a sibling folder a user's clone lacks).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The tests that read the session fixtures, the LoCoMo file and the corpora; none needs PostgreSQL.
CLONE_TESTS = [
    "tests/harvest/test_reader_claude.py",
    "tests/harvest/test_reader_codex.py",
    "tests/harvest/test_reader_pi.py",
    "tests/libs/test_guard.py",
]
RUN_TIMEOUT_S = 120
# Built from pieces so that this file does not match its own patterns.
SIBLING = re.compile(
    "|".join(
        [
            re.escape(".." + "/shared"),
            re.escape("/work" + "/shared"),
            r"\.parent\s*/\s*[\"']" + "shared" + r"[\"']",
        ]
    )
)
# Where the clone's modules and data must come from: printed by a child in the clone's environment.
PROBE = """
import json, mnemo_guard, mnemo_harvest, tests
from tests.harvest import test_reader_claude, test_reader_codex, test_reader_pi
from tests.libs import test_guard
print(json.dumps({
    "tests": tests.__file__,
    "mnemo_guard": mnemo_guard.__file__,
    "mnemo_harvest": mnemo_harvest.__file__,
    "claude_fixtures": str(test_reader_claude.FIXTURES),
    "codex_fixtures": str(test_reader_codex.FIXTURES),
    "pi_fixtures": str(test_reader_pi.FIXTURES),
    "locomo": str(test_guard.LOCOMO),
    "sessions": str(test_guard.SESSIONS),
}))
"""


def _git_env() -> dict[str, str]:
    # A GIT_DIR or GIT_WORK_TREE inherited from a hook would point git at another repository.
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def _git(*args: str, cwd: Path) -> str:
    git = shutil.which("git")
    assert git, "git is needed: the repository is checked from a clone"
    done = subprocess.run(
        [git, *args], cwd=cwd, env=_git_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)} failed in {cwd} (is it a git checkout?): {done.stderr}"
    return done.stdout


def _clone_env(clone: Path) -> dict[str, str]:
    """This environment's venv for the clone, with the clone's sources ahead of the editable installs."""
    env = {k: v for k, v in _git_env().items() if not k.startswith("PYTEST_")}
    # uv would otherwise build a new multi-GB environment for the clone; --no-sync (below) keeps it
    # from re-pointing this venv's editable installs at the clone, which is deleted afterwards.
    env["UV_PROJECT_ENVIRONMENT"] = sys.prefix
    env["VIRTUAL_ENV"] = sys.prefix
    env["HF_HUB_OFFLINE"] = "1"
    # The editable installs point at this checkout; PYTHONPATH puts the clone's packages first.
    sources = sorted(
        [*clone.glob("libs/*/src"), *clone.glob("services/*/src"), clone / "server" / "src", clone / "cli" / "src"]
    )
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in sources)
    return env


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed to run the clone's tests in this environment"
    return uv


def _run_in_clone(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_uv(), "run", "--frozen", "--no-sync", *args],
        cwd=clone,
        env=_clone_env(clone),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def _tracked_text_files() -> list[str]:
    names = _git("ls-files", "-z", cwd=ROOT).split("\0")
    selected = [n for n in names if n.endswith((".py", ".toml", ".md")) or n.startswith(".ci/")]
    # A file deleted but not yet staged is still listed; only what is on disk can be read.
    return [n for n in selected if (ROOT / n).is_file()]


def test_a_fresh_clone_alone_in_an_empty_directory_passes_the_fixture_tests(tmp_path: Path) -> None:
    clone = tmp_path / "mnemo"
    _git("clone", "--quiet", str(ROOT), str(clone), cwd=tmp_path)
    assert _git("rev-parse", "HEAD", cwd=clone) == _git("rev-parse", "HEAD", cwd=ROOT)
    assert [p.name for p in tmp_path.iterdir()] == ["mnemo"], "nothing may sit beside the clone"

    probe = _run_in_clone(clone, "python", "-c", PROBE)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    imported = {name: Path(path) for name, path in json.loads(probe.stdout.strip().splitlines()[-1]).items()}
    for name, path in imported.items():
        assert path.is_relative_to(clone), f"{name} comes from {path}, not from the clone {clone}"
        assert path.exists(), f"{name}: {path} is missing from the clone"

    run = _run_in_clone(clone, "pytest", "-q", "-p", "no:cacheprovider", *CLONE_TESTS)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]
    passed = re.search(r"(\d+) passed", output)
    assert passed and int(passed.group(1)) > 0, f"positive control: the clone's tests ran and passed\n{output[-2000:]}"
    assert not re.search(r"\d+ (failed|errors?)\b", output), output[-2000:]


def test_no_tracked_file_reads_a_folder_beside_the_repository() -> None:
    files = _tracked_text_files()
    # Positive controls: the scan sees the files that once read the sibling folder, and the pattern
    # catches each way they read it.
    for expected in ("tests/harvest/test_reader_claude.py", "bench/guard.py", "bench/README.md", ".ci/run"):
        assert expected in files
    for bad in (
        'DEFAULT_DATA = "' + ".." + '/shared/data/locomo/locomo-dev.json"',
        'FIXTURES = Path(__file__).resolve().parents[2].parent / "' + "shared" + '" / "fixtures"',
        "see /work" + "/shared/data/locomo/README.md",
    ):
        assert SIBLING.search(bad), bad
    assert not SIBLING.search('tags=["beta", "shared"]'), "tags named shared are fine"

    offending = [
        f"{name}:{number}: {line.strip()}"
        for name in files
        for number, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), start=1)
        if SIBLING.search(line)
    ]
    assert offending == [], "\n".join(offending)
