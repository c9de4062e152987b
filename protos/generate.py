"""Regenerates the committed protobuf and gRPC code under libs/protos/src from protos/."""

from __future__ import annotations

import sys
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parent
DEFAULT_OUT = PROTO_ROOT.parent / "libs" / "protos" / "src"


def proto_files() -> list[Path]:
    """Every .proto file under protos/, in a stable order."""
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Writes *_pb2.py, *_pb2.pyi and *_pb2_grpc.py for every proto into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    files = [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            *files,
        ]
    )
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")
    # Regular packages (not namespace packages) so that tools and editable installs agree.
    for proto in proto_files():
        package_dir = out_dir / proto.parent.relative_to(PROTO_ROOT)
        for directory in [package_dir, *package_dir.relative_to(out_dir).parents]:
            init = out_dir / directory / "__init__.py"
            if directory != Path(".") and not init.exists():
                init.write_text("")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT)
