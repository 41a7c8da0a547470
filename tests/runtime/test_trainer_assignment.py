"""A worker assigns the parameters a push answered with inside its next step (one TensorFlow
call a minibatch, runtime/worker/trainer.py `_take`), so every reader of the model must still
see them: the next step's loss is the loss on the parameter servers' values, and evaluation
reads the model as the servers hold it. A real Trainer against a real parameter server over
gRPC on 127.0.0.1, in sync mode (serial: each minibatch computed on the values after the push
before it) and in async mode (overlapped)."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
from tiny_zoo import MODEL

from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.data.recordio import read_records
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.model_build import build_model
from elasticdl.runtime.ps.client import PSClient
from elasticdl.runtime.ps.servicer import ParameterServerServicer, parameters_of, start_server
from elasticdl.runtime.variables import named_variables
from elasticdl.runtime.worker.trainer import Trainer


def _job(tmp_path, use_async: bool):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "tiny.py").write_text(MODEL)
    gen.generate("regression", str(tmp_path / "data"), 256, records_per_file=256)
    (file,) = sorted((tmp_path / "data").glob("*.recordio"))
    config = JobConfig(
        "assign", "tiny.custom_model", str(zoo), minibatch_size=32, use_async=use_async
    )
    return config, list(read_records(str(file))), str(file)


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def trainer(request, tmp_path):
    config, records, file = _job(tmp_path, use_async=request.param)
    server, port = start_server(ParameterServerServicer(parameters_of(config)), 0)
    client = PSClient([f"127.0.0.1:{port}"], timeout_s=30)
    client.wait_ready(10)
    try:
        yield Trainer(config, client, 0), config, records, file, client
    finally:
        client.close()
        server.stop(None)


def _reference(config, records, metadata, values):
    """The same model, built apart, holding `values` (stable name -> array)."""
    instance = config.load_spec().instantiate(context={"worker_id": 9})
    build_model(instance, records[:4], metadata=metadata)
    trainable, non_trainable = named_variables(instance.model)
    for name, variable in {**trainable, **non_trainable}.items():
        variable.assign(values[name])
    return instance


def test_each_step_computes_on_the_values_the_servers_answered(trainer):
    worker, config, records, file, ps = trainer
    metadata = worker.metadata_for(file, records[0])
    worker.ensure_built(records, metadata)
    batches = list(worker.batches(records, metadata))
    losses = []
    for n, (features, labels) in enumerate(batches[:4]):
        result = worker.train_batch(features, labels, 32, 1, 32 * (n + 1))
        losses.append(result.loss)
        if not config.use_async:
            # Serial: minibatch n + 1 is computed on the servers' values after push n.
            values = ps.pull(-1).values
            reference = _reference(config, records, metadata, values)
            following = batches[n + 1]
            expected = reference.loss(following[1], reference.model(following[0], training=True))
            after = worker.train_batch(*following, 32, 1, 32 * (n + 2))
            np.testing.assert_allclose(after.loss, float(expected), rtol=1e-5)
            break
    assert worker.finish_task() > 0
    assert all(np.isfinite(losses))
    # Evaluation reads the model itself: it holds what the servers hold.
    worker.evaluate(records[:64], metadata)
    held = ps.pull(-1).values
    trainable, non_trainable = named_variables(worker.model)
    for name, variable in {**trainable, **non_trainable}.items():
        np.testing.assert_allclose(np.asarray(variable.numpy()), held[name], rtol=1e-6)


def test_a_step_after_evaluation_computes_on_the_model_as_held(trainer):
    """Evaluation assigned the update already: the next step has none pending and computes on
    the variables as they are."""
    worker, config, records, file, ps = trainer
    metadata = worker.metadata_for(file, records[0])
    worker.ensure_built(records, metadata)
    batches = list(worker.batches(records, metadata))
    for n in range(2):
        worker.train_batch(*batches[n], 32, 1, 32 * (n + 1))
    worker.finish_task()
    worker.evaluate(records[:64], metadata)
    reference = _reference(config, records, metadata, ps.pull(-1).values)
    features, labels = batches[2]
    expected = reference.loss(labels, reference.model(features, training=True))
    result = worker.train_batch(features, labels, 32, 2, 32)
    np.testing.assert_allclose(result.loss, float(expected), rtol=1e-5)


@pytest.mark.parametrize("trainer", [False], ids=["sync"], indirect=True)
def test_an_update_a_failed_step_did_not_assign_is_assigned_by_the_next(trainer):
    """A step that raised before it ran (user code refusing the inputs, at trace time) leaves
    the update pending: the next step still computes on the servers' values."""
    worker, config, records, file, ps = trainer  # serial: a step computes after the last push
    metadata = worker.metadata_for(file, records[0])
    worker.ensure_built(records, metadata)
    batches = list(worker.batches(records, metadata))
    worker.train_batch(*batches[0], 32, 1, 32)  # its answer is now to be assigned
    features, labels = batches[1]
    with pytest.raises(ValueError):
        worker.train_batch(features[:, :, None], labels, 32, 1, 64)  # a rank the model refuses
    reference = _reference(config, records, metadata, ps.pull(-1).values)
    expected = reference.loss(labels, reference.model(features, training=True))
    result = worker.train_batch(features, labels, 32, 1, 64)
    np.testing.assert_allclose(result.loss, float(expected), rtol=1e-5)
