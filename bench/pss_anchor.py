"""The Keras 2 anchor of bench/train_overhead.py: tf_keras + ParameterServerStrategy.

What a Keras 2 user would pick for the same job: `tf.distribute.experimental.
ParameterServerStrategy` with a `ClusterCoordinator` (what tf_keras's `fit` drives under that
strategy), 1 worker and 1 PS as TensorFlow gRPC servers in their own processes, this process
the coordinator (the chief): three processes, like elasticdl's master, PS and worker. Same
records, same parsing (the model zoo's `dataset_fn`, its shuffle a no-op), same batch, the
same network (`regressor.DNN`'s dense layers rebuilt layer for layer in tf_keras, Adam with
its learning rate, mean squared error), updates applied asynchronously as elasticdl's
`--use_async`.

TensorFlow's gRPC servers listen on every interface whatever host the cluster spec names, so
where `unshare -rn` works the servers and the coordinator run in a private network namespace
whose only interface is loopback (127.0.0.1). Needs `pip install -e '.[bench]'` (tf_keras).

Figures: records per second from this process's start (importing TensorFlow, starting the
servers, tracing) to the end of the first epoch, and steady: the second epoch of the same
records (a `fit` epoch ends with the coordinator's join, so its time is complete).

    python -P bench/pss_anchor.py CASE DATA THREADS   (prints `PSS {json}`; CASE: dnn)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SUPPORTED = {"dnn": ("regressor.DNN", "hidden_units=[64, 32], learning_rate=0.01", 256)}
"""Cases the anchor can rebuild in tf_keras: model_def, params, batch (as train_overhead's)."""


def loopback_only_prefix() -> list[str]:
    """`unshare -rn` with loopback up, where this machine allows it; else nothing."""
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("ip") is None:
        return []
    probe = subprocess.run(  # noqa: S603 - fixed argv
        [unshare, "-rn", "sh", "-c", "ip link set lo up"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        return []
    return [unshare, "-rn", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']


def run_anchor(case: str, data: Path, threads: int) -> dict[str, Any]:
    """Run the anchor in a fresh process (in its own network namespace when possible)."""
    prefix = loopback_only_prefix()
    argv = [*prefix, sys.executable, "-P", str(Path(__file__).resolve()), case, str(data)]
    argv.append(str(threads))
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(f"the PSS anchor failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("PSS ")][-1]
    figures = json.loads(line[len("PSS ") :])
    figures["process_s"] = time.perf_counter() - t0
    figures["loopback_namespace"] = bool(prefix)
    return figures


def _serve(job: str, cluster: dict[str, list[str]], threads: int) -> int:
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads, inter_op_parallelism_threads=max(2, threads)
    )
    server = tf.distribute.Server(
        tf.train.ClusterSpec(cluster), job_name=job, task_index=0, protocol="grpc", config=config
    )
    server.join()
    return 0


def _tf_keras_dnn(tf_keras: Any, width: int, hidden: list[int]) -> Any:
    """regressor.DNN's layers on a "dense" input (the generated table has no strings)."""
    inputs = tf_keras.Input(shape=(width,), name="dense")
    x = inputs
    for i, units in enumerate(hidden, start=1):
        x = tf_keras.layers.Dense(units, activation="relu", name=f"hidden_{i}")(x)
    outputs = tf_keras.layers.Dense(1, name="output")(x)
    return tf_keras.Model({"dense": inputs}, outputs)


def coordinate(case: str, data: str, threads: int) -> dict[str, Any]:
    """The coordinator: start the servers, train two epochs with tf_keras `fit`."""
    t_start = time.perf_counter()
    from elasticdl.runtime.master.ports import choose_port

    model_def, params, batch = SUPPORTED[case]
    worker_port = choose_port()
    cluster = {
        "worker": [f"127.0.0.1:{worker_port}"],
        "ps": [f"127.0.0.1:{choose_port(avoid=(worker_port,))}"],
    }
    me = [sys.executable, "-P", str(Path(__file__).resolve()), "--serve"]
    servers = [
        subprocess.Popen([*me, json.dumps([job, cluster, threads])])  # noqa: S603
        for job in ("ps", "worker")
    ]
    try:
        return _train(t_start, model_def, params, batch, cluster, data, threads)
    finally:
        for server in servers:
            server.kill()
            server.wait()


def _train(
    t_start: float,
    model_def: str,
    params: str,
    batch: int,
    cluster: dict[str, list[str]],
    data: str,
    threads: int,
) -> dict[str, Any]:
    import tensorflow as tf
    import tf_keras

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    from elasticdl.mode import Mode
    from elasticdl.runtime.data.files import expand_data_urls
    from elasticdl.runtime.data.metadata import DatasetMetadata
    from elasticdl.runtime.data.recordio import RecordIOReader
    from elasticdl.runtime.model_spec import load_model_spec
    from elasticdl.runtime.worker.pipeline import in_task_order

    records: list[bytes] = []
    for url in expand_data_urls(data):
        with RecordIOReader(url) as reader:
            records.extend(reader)
    spec = load_model_spec(model_def, None, params)
    instance = spec.instantiate()
    metadata = DatasetMetadata.from_example(records[0])
    hidden = list(instance.model.hidden_units)
    learning_rate = float(instance.model.learning_rate)

    def parsed() -> Any:
        dataset = tf.data.Dataset.from_tensor_slices(tf.constant(records, dtype=tf.string))
        with in_task_order():
            return instance.dataset_fn(dataset, Mode.TRAINING, metadata)

    features, _ = next(iter(parsed().batch(1)))
    if set(features) != {"dense"}:
        raise ValueError(f"the anchor rebuilds dense-only tables; got inputs {sorted(features)}")
    width = int(features["dense"].shape[-1])

    def dataset_fn(input_context: Any) -> Any:
        return parsed().batch(batch).repeat().prefetch(1)

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), rpc_layer="grpc"
    )
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = _tf_keras_dnn(tf_keras, width, hidden)
        model.compile(optimizer=tf_keras.optimizers.Adam(learning_rate), loss="mse")

    class Clock(tf_keras.callbacks.Callback):
        marks: list[tuple[str, float]] = []

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.marks.append(("begin", time.perf_counter()))

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.marks.append(("end", time.perf_counter()))

    steps = len(records) // batch
    clock = Clock()
    t_fit = time.perf_counter()
    history = model.fit(
        tf_keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=2,
        steps_per_epoch=steps,
        verbose=0,
        callbacks=[clock],
    )
    (_, b1), (_, e1), (_, b2), (_, e2) = clock.marks
    epoch_records = steps * batch
    return {
        "records_per_epoch": epoch_records,
        "startup_s": t_fit - t_start,
        "records_per_s": epoch_records / (e1 - t_start),
        "first_epoch_s": e1 - b1,
        "steady_records_per_s": epoch_records / (e2 - b2),
        "steady_ms_per_batch": (e2 - b2) / steps * 1e3,
        "final_loss": float(history.history["loss"][-1]),
    }


def main(argv: list[str]) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if argv[0] == "--serve":
        job, cluster, threads = json.loads(argv[1])
        return _serve(job, cluster, threads)
    case, data, threads = argv[0], argv[1], int(argv[2])
    print("PSS " + json.dumps(coordinate(case, data, threads)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
