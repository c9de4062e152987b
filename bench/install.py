"""What a new user meets first: the default install's size, and the time from a clean clone to
the ready banner with an empty uv cache.

Clones this repository's HEAD into a temporary folder, points UV_CACHE_DIR at an empty folder,
runs the README's first command (`uv run mnemo up`, on a fresh data directory and a free port)
and times it until "Mnemo is ready" is printed and until the embedder is ready; then stops it
and measures the `.venv` the command created. Needs the package registry (PyPI), as a new user
does. Prints the figures and writes bench/results/install.json.

    uv run python -m bench.install
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.latency import READY_BANNER, Spawned, free_port

REPO_ROOT = Path(__file__).resolve().parents[1]


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> int:
    uv, git = shutil.which("uv"), shutil.which("git")
    if uv is None or git is None:
        raise SystemExit("uv and git must be on PATH (pip install uv)")
    with tempfile.TemporaryDirectory(prefix="mnemo-install-") as tmp:
        clone, cache, data = Path(tmp) / "mnemo", Path(tmp) / "uv-cache", Path(tmp) / "data"
        subprocess.run([git, "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True)
        port = free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_"))},
            "UV_CACHE_DIR": str(cache),
            "MNEMO_DATA_DIR": str(data),
            "MNEMO_HTTP_PORT": str(port),
            "MNEMO_HARVEST_AGENTS": "",
            "MNEMO_EMBED_CACHE_DIR": str(Path(tmp) / "onnx"),
        }
        print(f"uv run mnemo up in a clean clone ({clone}), uv cache empty …", flush=True)
        os.chdir(clone)
        up = Spawned([uv, "run", "mnemo", "up"], env)
        try:
            deadline = time.perf_counter() + 1800
            while (ready := up.first(READY_BANNER)) is None:
                if up.process.poll() is not None or time.perf_counter() > deadline:
                    raise RuntimeError("mnemo up did not start:\n" + up.tail(30))
                time.sleep(0.1)
            with httpx.Client(timeout=30) as client:
                while client.get(f"http://127.0.0.1:{port}/api/v1/status").json().get("embedder_state") != "ready":
                    time.sleep(0.1)
            embedder_ready = time.perf_counter() - up.started
        finally:
            up.stop()
            os.chdir(REPO_ROOT)
        venv = tree_bytes(clone / ".venv")
        report = {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "clean_clone_to_ready_s": ready,
            "clean_clone_to_embedder_ready_s": embedder_ready,
            "venv_bytes": venv,
            "venv_mb": venv / 1e6,
            "uv_cache_bytes": tree_bytes(cache),
        }
    out = REPO_ROOT / "bench" / "results" / "install.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"  clean clone -> ready banner   {report['clean_clone_to_ready_s']:.1f} s")
    print(f"  clean clone -> embedder ready {report['clean_clone_to_embedder_ready_s']:.1f} s")
    print(f"  .venv                         {report['venv_mb']:.0f} MB")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
