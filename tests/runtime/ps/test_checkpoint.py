"""PS checkpoints: files, validity, pruning, re-sharded restore of optimizer state, real gRPC."""

from __future__ import annotations

import json
import logging
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import fsspec
import keras
import numpy as np
import pytest
import tensorflow as tf

from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.master.ports import choose_port
from elasticdl.runtime.ps import checkpoint as ckpt
from elasticdl.runtime.ps.checkpoint import CheckpointError, ShardState
from elasticdl.runtime.ps.client import PSClient
from elasticdl.runtime.ps.parameters import Parameters, optimizer_state_variables
from elasticdl.runtime.ps.partition import ps_of
from elasticdl.runtime.ps.servicer import restore_at_start, serve, servicer_of, start_server
from elasticdl.runtime.variables import named_variables, values_of
from elasticdl.runtime.zoo_source import builtin_zoo_root

HOST = "127.0.0.1"
SHAPES = {
    "t000/dense/kernel": (4, 3),
    "t001/dense/bias": (3,),
    "t002/dense_1/kernel": (3, 2),
    "t003/dense_1/bias": (2,),
    "t004/out/kernel": (2, 1),
    "t005/out/bias": (1,),
}
BN = "n000/batch_normalization/moving_mean"


def random_values(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in SHAPES.items()}


def split(values: dict[str, np.ndarray], num_ps: int) -> list[dict[str, np.ndarray]]:
    return [{n: v for n, v in values.items() if ps_of(n, num_ps) == i} for i in range(num_ps)]


def synthetic_state(version: int, ps_id: int, num_ps: int, seed: int = 0) -> ShardState:
    values = split(random_values(seed), num_ps)[ps_id]
    return ShardState(
        version=version,
        trainable=values,
        non_trainable={BN: np.arange(3, dtype=np.float32)} if ps_of(BN, num_ps) == ps_id else {},
        slots={f"{n}/momentums": v * 0.5 for n, v in values.items()},
        optimizer={"iterations": np.array(version + ps_id, np.int64)},
        progress={7: 64 + ps_id},
    )


def write_version(directory: str, version: int, num_ps: int, shards=None) -> None:
    for ps_id in range(num_ps) if shards is None else shards:
        ckpt.save_shard(
            directory, version, ps_id, num_ps, synthetic_state(version, ps_id, num_ps), "zoo.M"
        )


# -- files, validity, loading --------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["local", "memory"])
def test_a_version_is_valid_only_when_every_shard_file_is_complete(tmp_path, scheme):
    directory = str(tmp_path / "ckpt") if scheme == "local" else f"memory://{tmp_path.name}/ckpt"
    fs, root = fsspec.core.url_to_fs(directory)
    assert ckpt.latest_valid_version(directory) is None and ckpt.valid_versions(directory) == []
    write_version(directory, 2, num_ps=2)
    write_version(directory, 4, num_ps=2, shards=[0])  # shard 1 has not written version 4 yet
    folder = f"{root}/version-000000000004"
    with fs.open(f"{folder}/ps-1-of-2.npz.tmp-123-abcd", "wb") as half:
        half.write(b"PK\x03\x04 half a zip")  # a writer that died mid-file
    assert sorted(fs.ls(root, detail=False))[-1].endswith("version-000000000004")
    assert ckpt.valid_versions(directory) == [2] and ckpt.latest_valid_version(directory) == 2

    loaded = ckpt.load_all(directory)
    assert (loaded.version, loaded.num_ps, loaded.model_def) == (2, 2, "zoo.M")
    expected = random_values(0)
    assert list(loaded.trainable) == [n for part in split(expected, 2) for n in part]
    for name, value in expected.items():
        np.testing.assert_array_equal(loaded.trainable[name], value)
        np.testing.assert_array_equal(loaded.slots[f"{name}/momentums"], value * 0.5)
    np.testing.assert_array_equal(loaded.non_trainable[BN], np.arange(3, dtype=np.float32))
    assert [int(o["iterations"]) for o in loaded.optimizer] == [2, 3]
    assert loaded.progress == [{7: 64}, {7: 65}]
    with pytest.raises(CheckpointError, match="version 4 is incomplete"):
        ckpt.load_all(directory, 4)

    write_version(directory, 4, num_ps=2, shards=[1])
    assert ckpt.latest_valid_version(directory) == 4
    assert all(not n.endswith("abcd") or "tmp" in n for n in fs.ls(folder, detail=False))


def test_each_shard_file_is_an_npz_with_a_json_header(tmp_path):
    path = ckpt.save_shard(str(tmp_path), 12, 1, 3, synthetic_state(12, 1, 3), "zoo.M")
    assert path == str(tmp_path / "version-000000000012" / "ps-1-of-3.npz")
    with np.load(path) as npz:
        header = json.loads(bytes(npz["__header__"]).decode())
    assert (header["version"], header["ps_id"], header["num_ps"]) == (12, 1, 3)
    assert header["model_def"] == "zoo.M" and header["progress"] == [[7, 65]]
    kinds = {kind for _, kind, *_ in header["entries"]}
    assert kinds <= {"trainable", "non_trainable", "slot", "optimizer"} and "slot" in kinds
    assert sorted(os.listdir(tmp_path / "version-000000000012")) == ["ps-1-of-3.npz"]


def test_re_sharding_partitions_by_ps_of_and_merges_per_shard_state(tmp_path):
    write_version(str(tmp_path), 6, num_ps=2)
    loaded = ckpt.load_all(str(tmp_path))
    same = ckpt.shard_state(loaded, 1, 2)
    assert same.iterations == 7 and same.progress == {7: 65}  # its own, exactly
    parts = [ckpt.shard_state(loaded, i, 3) for i in range(3)]
    assert {n for p in parts for n in p.trainable} == set(SHAPES)
    for ps_id, part in enumerate(parts):
        assert all(ps_of(n, 3) == ps_id for n in [*part.trainable, *part.non_trainable])
        assert {ckpt.slot_owner(k) for k in part.slots} == set(part.trainable)
        assert part.version == 6 and part.iterations == 7 and part.progress == {7: 64}
        # reading only what one shard needs gives the same shard state, and all shapes
        partial = ckpt.load_all(str(tmp_path), only=(ps_id, 3))
        assert set(partial.trainable) == set(part.trainable)
        assert partial.shapes() == loaded.shapes() == {**SHAPES, BN: (3,)}
        own = ckpt.shard_state(partial, ps_id, 3)
        assert set(own.slots) == set(part.slots) and own.optimizer == part.optimizer


def test_prune_keeps_the_newest_valid_versions_and_removes_emptied_directories(tmp_path):
    directory = str(tmp_path)
    for version in (0, 2, 4, 6, 8):
        write_version(directory, version, num_ps=2)
    write_version(directory, 5, num_ps=2, shards=[0])  # incomplete
    write_version(directory, 9, num_ps=2, shards=[0])  # incomplete, newer than all: kept
    write_version(directory, 2, num_ps=3, shards=[2])  # left by a run with 3 shards
    (tmp_path / "version-000000000008" / "ps-1-of-2.npz.tmp-1-dead").write_bytes(b"x")
    assert ckpt.prune(directory, 0, 2, keep=0) == []
    assert ckpt.prune(directory, 0, 2, keep=2) == [0, 2, 4, 5]
    names = {p.name: sorted(os.listdir(p)) for p in tmp_path.iterdir()}
    assert names["version-000000000002"] == ["ps-1-of-2.npz"]
    assert "version-000000000005" not in names  # emptied by shard 0
    assert ckpt.valid_versions(directory) == [6, 8]  # shard 1's leftovers make no valid version
    assert ckpt.prune(directory, 1, 2, keep=2) == [0, 2, 4]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "version-000000000006",
        "version-000000000008",
        "version-000000000009",
    ]
    assert sorted(os.listdir(tmp_path / "version-000000000008")) == [
        "ps-0-of-2.npz",
        "ps-1-of-2.npz",
    ]


def test_prune_removes_empty_version_folders(tmp_path):
    write_version(str(tmp_path), 3, num_ps=1)
    (tmp_path / "version-000000000001").mkdir()  # a failed write's, say
    (tmp_path / "version-000000000007").mkdir()
    ckpt.prune(str(tmp_path), 0, 1, keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["version-000000000003"]


def test_a_failed_write_is_one_line_counted_and_a_later_write_resets_the_run(tmp_path, caplog):
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"a file where the checkpoint folder should be")
    directory = str(blocker / "ckpt")
    writer = ckpt.CheckpointWriter(directory, 0, 1, keep=2)
    with caplog.at_level(logging.ERROR, logger=ckpt.__name__):
        writer.submit(synthetic_state(1, 0, 1))
        writer.submit(synthetic_state(2, 0, 1))
        assert writer.flush(30)
    assert (writer.failures, writer.failed_in_a_row, writer.last_failed_version) == (2, 2, 2)
    shard = f"{directory}/version-000000000002/ps-0-of-1.npz"
    assert writer.last_error.startswith(f"cannot write checkpoint {shard}: "), writer.last_error
    assert "\n" not in writer.last_error
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors[-1] == f"parameter server 0: {writer.last_error}"
    assert all(r.exc_info is None for r in caplog.records)  # no traceback
    blocker.unlink()
    writer.submit(synthetic_state(3, 0, 1))
    assert writer.flush(30) and writer.close(30)
    assert (writer.failures, writer.failed_in_a_row, writer.written) == (2, 0, [3])
    assert ckpt.valid_versions(directory) == [3]


def test_missing_or_corrupt_checkpoints_are_clear_errors(tmp_path):
    empty = str(tmp_path / "empty")
    with pytest.raises(CheckpointError, match=f"no valid checkpoint in {empty} .no version-"):
        ckpt.load_all(empty)
    write_version(str(tmp_path / "partial"), 3, num_ps=2, shards=[1])
    with pytest.raises(CheckpointError, match=r"only incomplete versions \[3\].*checkpoint_dir_"):
        ckpt.load_all(str(tmp_path / "partial"))
    write_version(str(tmp_path / "bad"), 1, num_ps=1)
    (tmp_path / "bad" / "version-000000000001" / "ps-0-of-1.npz").write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match=r"\(version 1 is not an elasticdl checkpoint\)"):
        ckpt.load_all(str(tmp_path / "bad"))
    with pytest.raises(CheckpointError, match="ps-0-of-1.npz is not an elasticdl checkpoint"):
        ckpt.load_all(str(tmp_path / "bad"), 1)


def test_a_checkpoint_of_another_model_is_a_clear_one_line_error(tmp_path):
    write_version(str(tmp_path), 2, num_ps=1)
    loaded = ckpt.load_all(str(tmp_path))
    ckpt.check_model(loaded, {**{n: s for n, s in SHAPES.items()}, BN: (3,)})
    other = {"t000/conv/kernel": (3, 3, 1, 8), "t001/dense/bias": (5,), BN: (3,)}
    with pytest.raises(CheckpointError) as error:
        ckpt.check_model(loaded, other, "mnist.functional")
    message = str(error.value)
    assert "\n" not in message and str(tmp_path) in message and "version 2" in message
    assert "written for model_def 'zoo.M'" in message and "'mnist.functional'" in message
    assert "['t000/conv/kernel']" in message  # missing from the checkpoint
    assert "'t001/dense/bias': checkpoint (3,), model (5,)" in message
    assert "wrong --checkpoint_dir_for_init" in message
    assert ckpt.check_directory(str(tmp_path), {**SHAPES, BN: (3,)}) == 2  # headers only
    with pytest.raises(CheckpointError, match="'t001/dense/bias': checkpoint"):
        ckpt.check_directory(str(tmp_path), other)


# -- optimizer state -----------------------------------------------------------------------------

OPTIMIZERS = {
    "sgd-momentum": lambda: keras.optimizers.SGD(0.05, momentum=0.9),
    "adam": lambda: keras.optimizers.Adam(0.01),
    "rmsprop": lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    "adagrad": lambda: keras.optimizers.Adagrad(0.1),
}
SLOTS = {
    "sgd-momentum": {"momentums"},
    "adam": {"momentums", "velocities"},
    "rmsprop": {"velocities", "momentums", "average_gradients"},
    "adagrad": {"accumulators"},
}


def make_shards(make_optimizer, num_ps: int) -> list[Parameters]:
    initial = {**random_values(0), BN: np.zeros(3, np.float32)}
    shards = []
    for part in split(initial, num_ps):
        params = Parameters(make_optimizer)
        params.initialize(part, non_trainable={BN} & set(part))
        shards.append(params)
    return shards


def apply(shards: list[Parameters], grads: dict[str, np.ndarray]) -> None:
    for ps_id, part in enumerate(split(grads, len(shards))):
        shards[ps_id].push_gradients(part, shards[ps_id].version, task_id=1, records_end=8)


def merged(states: list[ShardState]) -> ShardState:
    out = ShardState(version=states[0].version)
    for state in states:
        out.trainable.update(state.trainable)
        out.non_trainable.update(state.non_trainable)
        out.slots.update(state.slots)
    return out


def assert_same(actual: ShardState, expected: ShardState) -> None:
    for group in ("trainable", "non_trainable", "slots"):
        got, want = getattr(actual, group), getattr(expected, group)
        assert set(got) == set(want), group
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_restore_into_another_num_ps_continues_exactly_like_an_uninterrupted_run(tmp_path, name):
    make_optimizer = OPTIMIZERS[name]
    (running,) = make_shards(make_optimizer, 1)
    for seed in (1, 2):
        apply([running], random_values(seed))
    saved = running.state()
    assert {k.rsplit("/", 1)[1] for k in saved.slots} == SLOTS[name]
    assert len(saved.slots) == len(SHAPES) * len(SLOTS[name])
    assert saved.iterations == 2 and saved.version == 2
    ckpt.save_shard(str(tmp_path), saved.version, 0, 1, saved)

    loaded = ckpt.load_all(str(tmp_path))
    restored = []
    for ps_id in range(2):
        params = Parameters(make_optimizer)
        params.restore(ckpt.shard_state(loaded, ps_id, 2), str(tmp_path))
        restored.append(params)
    assert all(p.version == 2 and p.optimizer.iterations.numpy() == 2 for p in restored)
    assert restored[1].applied_progress([1]) == {1: 8}
    assert_same(merged([p.state() for p in restored]), saved)

    step = random_values(3)
    apply([running], step)
    apply(restored, step)
    after = merged([p.state() for p in restored])
    assert_same(after, running.state())  # bit for bit: values and every slot
    assert not np.array_equal(
        after.trainable["t000/dense/kernel"], saved.trainable["t000/dense/kernel"]
    )


def test_every_optimizer_variable_is_mapped_to_a_stable_name():
    variables = {n: keras.Variable(v) for n, v in random_values(0).items()}
    for make in [
        lambda: keras.optimizers.Nadam(),
        lambda: keras.optimizers.Adam(amsgrad=True, use_ema=True),
        lambda: keras.optimizers.Ftrl(),
        lambda: keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(momentum=0.5)),
    ]:
        optimizer = make()
        optimizer.build(list(variables.values()))
        slots, others = optimizer_state_variables(optimizer, variables)
        assert {ckpt.slot_owner(k) for k in slots} == set(variables)
        assert "learning_rate" not in others and any(k.endswith("iterations") for k in others)
        lr = [v for v in optimizer.variables if "learning_rate" in v.path]
        assert len(slots) + len(others) + len(lr) == len(optimizer.variables)


def test_restore_from_another_optimizer_keeps_parameters_and_starts_it_fresh(caplog):
    (adam,) = make_shards(OPTIMIZERS["adam"], 1)
    state = adam.state()
    state.slots = {k: np.ones_like(v) for k, v in state.slots.items()}
    params = Parameters(OPTIMIZERS["sgd-momentum"])
    with caplog.at_level(logging.WARNING):
        params.restore(state, "gs://old")
    assert "optimizer state in checkpoint gs://old does not fit SGD" in caplog.text
    assert_same(ShardState(0, params.state().trainable), ShardState(0, state.trainable))
    assert params.state().slots and all(not v.any() for v in params.state().slots.values())


def test_a_pushed_model_that_differs_from_the_restored_one_is_refused():
    (shard,) = make_shards(OPTIMIZERS["sgd-momentum"], 1)
    params = Parameters(OPTIMIZERS["sgd-momentum"])
    params.restore(shard.state(), "/ckpt")
    same = {**random_values(5), BN: np.ones(3, np.float32)}
    assert params.initialize(same, non_trainable={BN}) is False  # a racing worker: ignored
    with pytest.raises(ValueError, match="restored from checkpoint /ckpt version 0.*t001"):
        params.initialize({**same, "t001/dense/bias": np.ones(4, np.float32)}, {BN})
    with pytest.raises(RuntimeError, match="already initialized"):
        params.restore(shard.state())


def test_checkpoint_write_time(tmp_path, capsys):
    """Capture and write time of ~1 MB and ~10 MB shards with Adam (printed, not asserted)."""
    rows = []
    for megabytes in (1, 10):
        size = megabytes * (1 << 20) // 4 // 4
        values = {f"t{i:03d}/dense/kernel": np.full(size, 0.5, np.float32) for i in range(4)}
        params = Parameters(lambda: keras.optimizers.Adam(0.01))
        params.initialize(values)
        start = time.perf_counter()
        state = params.state()
        captured = time.perf_counter() - start
        start = time.perf_counter()
        ckpt.save_shard(str(tmp_path), megabytes, 0, 1, state)
        written = time.perf_counter() - start
        path = ckpt.shard_path(str(tmp_path), megabytes, 0, 1)
        rows.append(
            f"[ps] checkpoint of a {megabytes:>2} MB shard (Adam, file "
            f"{os.path.getsize(path) / 2**20:.0f} MB): capture {captured * 1e3:.1f} ms, "
            f"write {written * 1e3:.1f} ms"
        )
    with capsys.disabled():
        print("\n" + "\n".join(rows))


# -- over gRPC -----------------------------------------------------------------------------------


def job_config(num_ps: int, **overrides) -> JobConfig:
    return JobConfig(
        job_name="ckpt-test",
        model_def="regressor.DNN",
        model_zoo_root=str(builtin_zoo_root()),
        params="hidden_units=[8, 4], learning_rate=0.05",
        optimizer="",
        num_ps=num_ps,
        **overrides,
    )


@pytest.fixture(scope="module")
def model():
    instance = job_config(1).load_spec().instantiate()
    rng = np.random.default_rng(0)
    features = {"dense": rng.standard_normal((16, 3)).astype(np.float32)}
    labels = rng.standard_normal((16, 1)).astype(np.float32)
    instance.model(features)
    trainable, _ = named_variables(instance.model)
    with tf.GradientTape() as tape:
        loss = instance.loss(labels, instance.model(features, training=True))
    grads = tape.gradient(loss, list(trainable.values()))
    return values_of(trainable), {n: g.numpy() for n, g in zip(trainable, grads, strict=True)}


def start(config: JobConfig, ports: list[int]):
    servers = [serve(config, ps_id, port) for ps_id, port in enumerate(ports)]
    client = PSClient([f"{HOST}:{p}" for p in ports], timeout_s=20)
    client.wait_ready(10)
    return servers, client


def old_leftovers(directory: str) -> list[int]:
    """Versions that are not valid but still hold a file (of the shard that wrote first)."""
    valid = ckpt.valid_versions(directory)
    return [
        int(n.split("-")[1])
        for n in sorted(os.listdir(directory))
        if int(n.split("-")[1]) not in valid
    ]


def wait_until(condition, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.02)


def test_serve_checkpoints_every_n_versions_and_a_relaunched_ps_resumes(tmp_path, model):
    values, gradients = model
    directory = str(tmp_path / "ckpt")
    config = job_config(2, checkpoint_dir=directory, checkpoint_steps=2, keep_checkpoint_max=2)
    ports = [choose_port(HOST), choose_port(HOST)]
    servicers = [servicer_of(config, ps_id) for ps_id in range(2)]
    servers = [start_server(s, port)[0] for s, port in zip(servicers, ports, strict=True)]
    client = PSClient([f"{HOST}:{p}" for p in ports], timeout_s=20)
    try:
        client.push_model(values)
        wait_until(lambda: ckpt.valid_versions(directory) == [0], "checkpoint at version 0")
        for version in range(7):
            assert client.push_gradients(gradients, [version] * 2).versions == [version + 1] * 2
        wait_until(lambda: ckpt.valid_versions(directory) == [4, 6], "checkpoints 4 and 6 only")
        assert all(s.writer.flush(10) for s in servicers)
        assert [s.writer.written for s in servicers] == [[0, 2, 4, 6]] * 2
        assert all(v < 4 for v in old_leftovers(directory))  # at most the first writer's file
        assert all(s.close(10) for s in servicers)  # a last prune on the way out
        assert sorted(os.listdir(directory)) == ["version-000000000004", "version-000000000006"]
        at_6 = ckpt.load_all(directory)
        assert at_6.version == 6 and set(at_6.trainable) == set(values)
        assert len(at_6.slots) == 0 or {ckpt.slot_owner(k) for k in at_6.slots} <= set(values)
        assert [int(o["iterations"]) for o in at_6.optimizer] == [6, 6]

        servers[1].stop(None).wait()  # shard 1 crashes at version 7 ...
        servers[1] = serve(config, 1, ports[1])  # ... and is relaunched: back at version 6
        wait_until(lambda: client.pull().initialized, "the relaunched shard")
        pulled = client.pull()
        assert pulled.versions == [7, 6]
        for name in at_6.trainable:
            if ps_of(name, 2) == 1:
                np.testing.assert_array_equal(pulled.values[name], at_6.trainable[name])
        assert client.push_gradients(gradients, [7, 6]).versions == [8, 7]
    finally:
        client.close()
        for server in servers:
            server.stop(None)

    # a new job with three shards starts from that checkpoint, re-sharded
    init = job_config(3, checkpoint_dir_for_init=directory)
    latest = ckpt.load_all(directory)
    servers, client = start(init, [choose_port(HOST) for _ in range(3)])
    try:
        pulled = client.pull()
        assert pulled.initialized and pulled.versions == [latest.version] * 3
        assert set(pulled.values) == set(latest.trainable)
        for name, value in latest.trainable.items():
            np.testing.assert_array_equal(pulled.values[name], value)
    finally:
        client.close()
        for server in servers:
            server.stop(None)


def test_restore_at_start_errors_are_one_line(tmp_path, model):
    values, _ = model
    empty = job_config(1, checkpoint_dir_for_init=str(tmp_path / "none"))
    with pytest.raises(CheckpointError, match="no valid checkpoint in .*none"):
        restore_at_start(empty, Parameters(OPTIMIZERS["adam"]), 0)
    assert restore_at_start(job_config(1), Parameters(OPTIMIZERS["adam"]), 0) is None

    ckpt.save_shard(str(tmp_path / "dnn"), 3, 0, 1, ShardState(3, dict(values)), "regressor.DNN")
    mnist = JobConfig(
        job_name="ckpt-test",
        model_def="mnist.mnist_functional_api.custom_model",
        model_zoo_root=str(builtin_zoo_root()),
        checkpoint_dir_for_init=str(tmp_path / "dnn"),
    )
    with pytest.raises(CheckpointError) as error:
        restore_at_start(mnist, Parameters(OPTIMIZERS["adam"]), 0)
    message = str(error.value)
    assert "\n" not in message and "does not match the model" in message
    assert "written for model_def 'regressor.DNN'" in message


def test_main_exits_1_with_one_line_when_there_is_nothing_to_restore(tmp_path, monkeypatch, capsys):
    from elasticdl.runtime import process_guard
    from elasticdl.runtime.ps import main as ps_main

    monkeypatch.setattr(ps_main.signal, "signal", lambda *_: None)
    monkeypatch.setattr(process_guard, "exit_when_orphaned", lambda: None)
    config = job_config(1, checkpoint_dir_for_init=str(tmp_path / "none"))
    path = config.write(tmp_path / "job.json")
    code = ps_main.main(["--config", str(path), "--ps_id", "0", "--port", str(choose_port(HOST))])
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"parameter server 0: no valid checkpoint in {tmp_path / 'none'}")
