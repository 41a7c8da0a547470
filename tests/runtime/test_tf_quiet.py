"""TensorFlow's C++ start-up lines are kept off stderr whatever the CPU prints.

The noisy case (AVX-512 CPUs with oneDNN on) is forced with a stand-in `tensorflow` package
that writes exactly those lines to file descriptor 2 while it is imported, so these tests
prove the same thing on every machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from elasticdl.runtime.tf_quiet import filter_lines

NOISE = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1795507370.854246    2763 port.cc:153] oneDNN custom operations are on. "
    "You may see slightly different numerical results due to floating-point round-off errors "
    "from different computation orders. To turn them off, set the environment variable "
    "`TF_ENABLE_ONEDNN_OPTS=0`.\n"
    "I0000 00:00:1795507370.892895    2763 cpu_feature_guard.cc:227] This TensorFlow binary "
    "is optimized to use available CPU instructions in performance-critical operations.\n"
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other "
    "operations, rebuild TensorFlow with the appropriate compiler flags.\n"
    "W0000 00:00:1795507371.000001    2763 some_file.cc:12] a warning\n"
)
ERROR_LINE = "E0000 00:00:1795507371.000002    2763 other.cc:7] a real error\n"


def test_filter_drops_info_and_warnings_at_the_default_level() -> None:
    text = NOISE + ERROR_LINE + "Traceback (most recent call last):\n"
    assert filter_lines(text, 2) == ERROR_LINE + "Traceback (most recent call last):\n"


def test_filter_levels() -> None:
    assert filter_lines(NOISE, 0) == NOISE
    kept = filter_lines(NOISE + ERROR_LINE, 1)
    assert "port.cc" not in kept and "a warning" in kept and "a real error" in kept
    assert filter_lines(ERROR_LINE, 3) == ""


def _fake_tensorflow(root: Path, own_line: str = "not from TensorFlow's logging") -> Path:
    own = own_line.encode() + b"\n" if own_line else b""
    package = root / "tensorflow"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            f"""
            import os
            os.write(2, {NOISE.encode()!r})
            os.write(2, {own!r})
            os.write(2, {NOISE.encode()!r})
            __version__ = "fake"
            """
        )
    )
    return root


def _run(code: str, root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environ["PYTHONPATH"] = str(root)
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=60
    )


def test_importing_tensorflow_after_elasticdl_prints_no_cpp_lines(tmp_path: Path) -> None:
    root = _fake_tensorflow(tmp_path)
    done = _run("import elasticdl, tensorflow; print(tensorflow.__version__)", root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "fake\n"
    assert done.stderr == "not from TensorFlow's logging\n"


def test_the_user_can_ask_for_every_line(tmp_path: Path) -> None:
    root = _fake_tensorflow(tmp_path)
    done = _run("import elasticdl, tensorflow", root, TF_CPP_MIN_LOG_LEVEL="0")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("port.cc:153") == 2 and "InitializeLog" in done.stderr


def test_cli_error_is_one_line_when_tensorflow_is_noisy(tmp_path: Path) -> None:
    """TensorFlow imported in the CLI's process before the error: still one line."""
    root = _fake_tensorflow(tmp_path, own_line="")
    code = (
        "import sys; from elasticdl.cli import main; import tensorflow; "
        "sys.exit(main(['data', 'inspect', 'no/such/*.recordio']))"
    )
    done = _run(code, root)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2
    assert len(lines) == 1 and lines[0].startswith("elasticdl: error:"), done.stderr


CUINIT = (
    "E0000 00:00:1795891450.326257   27987 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n"
)


def _tensorflow_logging_after_import(root: Path) -> Path:
    """A stand-in `tensorflow` whose device lookup logs the cuInit error as the `tensorflow`
    wheel does on a machine without a GPU: after the import, at ERROR level, and only when
    TF_CPP_MIN_LOG_LEVEL (read from the environment of the process) is below 3 -- TensorFlow
    2.21's rule, seen with that wheel here (level 2: the line; level 3: none)."""
    package = root / "tensorflow"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            f"""
            import os

            def list_physical_devices():
                if int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")) < 3:
                    os.write(2, {CUINIT.encode()!r})
                return ["CPU:0"]
            """
        )
    )
    return root


def test_every_process_and_child_gets_level_3_before_tensorflow(tmp_path: Path) -> None:
    root = _tensorflow_logging_after_import(tmp_path)
    code = (
        "import os, subprocess, sys; import elasticdl, tensorflow; "
        "tensorflow.list_physical_devices(); print(os.environ['TF_CPP_MIN_LOG_LEVEL']); "
        "child = 'import tensorflow, os; tensorflow.list_physical_devices(); "
        'print(os.environ["TF_CPP_MIN_LOG_LEVEL"])\'; '
        "sys.stdout.flush(); subprocess.run([sys.executable, '-c', child], check=True)"
    )
    done = _run(code, root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3\n3\n"
    assert "cuInit" not in done.stderr
    shown = _run("import elasticdl, tensorflow; tensorflow.list_physical_devices()", root,
                 TF_CPP_MIN_LOG_LEVEL="2")  # fmt: skip
    assert shown.stderr == CUINIT  # the user's level is honoured


def test_the_manifests_and_the_image_give_level_3() -> None:
    from elasticdl.runtime import tf_quiet
    from elasticdl.runtime.k8s import manifests as m

    assert tf_quiet.DEFAULT_LEVEL == "3"
    pod = m.worker_pod(m.ClusterSpec("j", "i", "a:1"), 0, [], "x")
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "3"
    dockerfile = (Path(__file__).resolve().parents[2] / "Dockerfile").read_text()
    assert "TF_CPP_MIN_LOG_LEVEL=3" in dockerfile and "TF_CPP_MIN_LOG_LEVEL=2" not in dockerfile
