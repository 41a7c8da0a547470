"""The master of a job in the job's Keras mode (runtime/keras_mode.py).

The master imports the model file (to check it, to merge metrics, to export the model), so it
must run in the job's mode as its PS and workers do. `resolve(...)` decides the mode; when this
process is in the other one, `ensure(...)` switches it if TensorFlow is not imported yet (the
process's TensorFlow then uses that Keras from there on), else the job runs in a child process
(`run_elsewhere`): `python -P -m elasticdl.runtime.master.keras_switch job KIND OPTIONS RESULT`,
started with the mode's environment, its output on ours; SIGTERM and SIGINT are passed on; its
result (or its bad-input error, raised again here as the same kind) comes back as JSON.

    python -P -m elasticdl.runtime.master.keras_switch probe ZOO_ROOT MODEL_DEF PARAMS

imports and builds the model in this process's mode: exit 0 when it builds, 1 with the error.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from elasticdl.runtime import keras_mode

log = logging.getLogger("elasticdl.master")


def _model_file(zoo_root: Path, model_def: str) -> Path | None:
    module_path = model_def.rpartition(".")[0]
    if not module_path:
        return None
    base = zoo_root.joinpath(*module_path.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _build_error(zoo_root: Path, model_def: str, params: str) -> str:
    """Why the model does not import or build in this process ("" when it does).

    Only failures that another Keras could cure count: an error raised by the model file's
    own code (importing it, constructing the model), not a missing symbol or a bad param."""
    from elasticdl.runtime.model_spec import ModelZooError, load_model_spec
    from elasticdl.runtime.params import ParamsError
    from elasticdl.runtime.zoo_source import ZooSource

    try:
        spec = load_model_spec(model_def, params=params, zoo=ZooSource(zoo_root, str(zoo_root)))
    except ParamsError:
        return ""
    except ModelZooError as err:
        return f"{err}" if err.__cause__ is not None else ""
    try:
        spec.instantiate()
    except (ModelZooError, ParamsError):
        return ""
    except Exception as err:  # noqa: BLE001 - user code: any failure is the answer
        return f"{type(err).__name__}: {err}"
    return ""


def _probe_elsewhere(zoo_root: Path, model_def: str, params: str, mode: str) -> str:
    """`_build_error` in a child process of `mode`."""
    argv = [sys.executable, "-P", "-m", __name__, "probe", str(zoo_root), model_def, params]
    done = subprocess.run(  # noqa: S603 - argv list, no shell
        argv, env=keras_mode.env_for(mode), capture_output=True, text=True, check=False
    )
    if done.returncode == 0:
        return ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"


_decided_by_parent: str | None = None
"""In a job's child master (`run_elsewhere`): the mode the parent decided, which `resolve` and
`likely` answer there. Without it a predict job's child prepared its standbys in the mode the
file looked like (Keras 3), then started a grandchild for Keras 2, which the parent's output
claim refused."""


def resolve(flag: str, zoo_root: Path, model_def: str, params: str) -> str:
    """The job's Keras mode: the flag, else what the model file needs (keras_mode.decide).

    The probe (import and construct the model under Keras 3, then under Keras 2 if that
    failed) runs only for a file with no Keras 2 marker that does not import `keras` itself."""
    if flag in (keras_mode.KERAS2, keras_mode.KERAS3):
        keras_mode.check_installed(flag)
        return flag
    if _decided_by_parent is not None:
        return _decided_by_parent
    source = _source(zoo_root, model_def)
    found = keras_mode.markers(source)
    error, keras2_builds = "", False
    if not found and not keras_mode.imports_keras3(source):
        error = _error_in(keras_mode.KERAS3, zoo_root, model_def, params)
        if error and _tf_keras_installed():
            keras2_builds = not _error_in(keras_mode.KERAS2, zoo_root, model_def, params)
    mode = keras_mode.decide(flag or keras_mode.AUTO, found, error, keras2_builds)
    if mode == keras_mode.KERAS2:
        why = "; ".join(found) or f"fails under Keras 3 ({error[:200]})"
        log.info("%s: Keras 2 (tf_keras): the model file %s", model_def, why)
        keras_mode.check_installed(mode)
    return mode


def likely(flag: str, zoo_root: Path, model_def: str) -> str:
    """The mode `resolve` decides unless the model fails under Keras 3, without importing
    anything: the flag, else Keras 2 for a model file with markers, else Keras 3."""
    if flag in (keras_mode.KERAS2, keras_mode.KERAS3):
        return flag
    if _decided_by_parent is not None:
        return _decided_by_parent
    return (
        keras_mode.KERAS2 if keras_mode.markers(_source(zoo_root, model_def)) else keras_mode.KERAS3
    )


def _source(zoo_root: Path, model_def: str) -> str:
    path = _model_file(zoo_root, model_def)
    return path.read_text() if path else ""


def _error_in(mode: str, zoo_root: Path, model_def: str, params: str) -> str:
    """`_build_error` in `mode`: here when this process is in it, else in a child."""
    if keras_mode.current() == mode:
        return _build_error(zoo_root, model_def, params)
    return _probe_elsewhere(zoo_root, model_def, params, mode)


def _tf_keras_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("tf_keras") is not None


def ensure(mode: str) -> bool:
    """True when this process is (now) in `mode`; False when the job must run elsewhere."""
    if keras_mode.current() == mode:
        return True
    if keras_mode.tensorflow_imported():
        return False
    keras_mode.apply(mode)
    return True


def cannot_switch(mode: str) -> ValueError:
    """The error when the job needs another Keras and its instances cannot follow a child
    master (pods): this process imported TensorFlow with the other Keras already."""
    return ValueError(
        f"the model needs Keras {mode}, and this process imported TensorFlow with Keras "
        f"{keras_mode.current()} while deciding; give --keras_version={mode} (or start it with "
        f"{keras_mode.ENV}={'1' if mode == keras_mode.KERAS2 else '0'})"
    )


_BAD_INPUT = {"ValueError": ValueError, "FileNotFoundError": FileNotFoundError}


def run_elsewhere(kind: str, options: Any, mode: str) -> Any:
    """Run the `kind` job (train, predict, evaluate) of `options` in a child process of `mode`
    and return its result (JobResult / InferenceResult)."""
    with tempfile.TemporaryDirectory(prefix="elasticdl-keras-") as tmp:
        given = Path(tmp) / "options.json"
        result = Path(tmp) / "result.json"
        given.write_text(json.dumps(dataclasses.asdict(options)))
        argv = [sys.executable, "-P", "-m", __name__, "job", kind, str(given), str(result)]
        log.info("the job's master runs in a child process with Keras %s", mode)
        child = subprocess.Popen(argv, env=keras_mode.env_for(mode))  # noqa: S603 - argv list
        with _forwarding(child):
            code = child.wait()
        if not result.exists():
            raise RuntimeError(f"the job's master (Keras {mode}) exited with status {code}")
        data = json.loads(result.read_text())
    if "exception" in data:
        raise _BAD_INPUT.get(data["exception"], RuntimeError)(data["message"])
    return _result_class(kind)(**data)


class _forwarding:
    """Pass SIGTERM and SIGINT on to `child` while it runs (from the main thread only)."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self._child = child
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._forward)

    def _forward(self, signum: int, frame: object) -> None:
        if self._child.poll() is None:
            self._child.send_signal(signum)

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _result_class(kind: str) -> type:
    if kind == "train":
        from elasticdl.runtime.master.training_job import JobResult

        return JobResult
    from elasticdl.runtime.master.inference_job import InferenceResult

    return InferenceResult


def _run_job(kind: str, options_path: str, result_path: str) -> int:
    from elasticdl.runtime.master import keras_switch  # this file runs as __main__

    keras_switch._decided_by_parent = keras_mode.current()
    data = json.loads(Path(options_path).read_text())
    try:
        if kind == "train":
            from elasticdl.runtime.master.options import TrainOptions
            from elasticdl.runtime.master.training_job import TrainingJob

            result: Any = TrainingJob(TrainOptions(**data)).run()
        else:
            from elasticdl.runtime.master.inference_job import InferenceJob
            from elasticdl.runtime.master.options import InferenceOptions

            result = InferenceJob(InferenceOptions(**data)).run()
        out = dataclasses.asdict(result)
    except (ValueError, FileNotFoundError) as err:
        kind_name = "FileNotFoundError" if isinstance(err, FileNotFoundError) else "ValueError"
        out = {"exception": kind_name, "message": str(err)}
    except Exception as err:  # noqa: BLE001 - handed to the parent in one line
        out = {"exception": type(err).__name__, "message": f"{type(err).__name__}: {err}"}
    Path(result_path).write_text(json.dumps(out, default=str))
    return 0


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s: %(message)s")
    keras_mode.mark_own_process()
    if argv[:1] == ["probe"] and len(argv) == 4:
        error = _build_error(Path(argv[1]), argv[2], argv[3])
        if error:
            print(error.replace("\n", " "), file=sys.stderr)
            return 1
        return 0
    if argv[:1] == ["job"] and len(argv) == 4:
        return _run_job(argv[1], argv[2], argv[3])
    print(
        "usage: keras_switch probe ZOO MODEL_DEF PARAMS | job KIND OPTIONS RESULT", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
