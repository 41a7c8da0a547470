"""Generate the Python code for proto/elasticdl.proto.

The .proto is compiled as `elasticdl/proto/elasticdl.proto` so the generated gRPC module
imports `from elasticdl.proto import elasticdl_pb2`, the installed package path.
Usage: python scripts/gen_proto.py [OUT_DIR]   (default: proto/)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto" / "elasticdl.proto"
GENERATED = ("elasticdl_pb2.py", "elasticdl_pb2.pyi", "elasticdl_pb2_grpc.py")


def generate(out_dir: Path) -> list[Path]:
    """Compile the .proto with grpc_tools and write the generated files into `out_dir`."""
    from grpc_tools import protoc

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        dst = Path(tmp) / "out"
        (src / "elasticdl" / "proto").mkdir(parents=True)
        dst.mkdir()
        shutil.copy(PROTO, src / "elasticdl" / "proto" / "elasticdl.proto")
        include = Path(protoc.__file__).parent / "_proto"
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{src}",
                f"-I{include}",
                f"--python_out={dst}",
                f"--pyi_out={dst}",
                f"--grpc_python_out={dst}",
                "elasticdl/proto/elasticdl.proto",
            ]
        )
        if code != 0:
            raise RuntimeError(f"protoc failed with exit code {code} on {PROTO}")
        written = []
        for name in GENERATED:
            target = out_dir / name
            shutil.copy(dst / "elasticdl" / "proto" / name, target)
            written.append(target)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "proto"
    for path in generate(out):
        print(path)
