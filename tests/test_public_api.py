import pytest

import elasticdl
from elasticdl import ElasticDLSpec, Mode


def test_mode_members_and_v02_alias():
    from elasticdl.python.common.constants import Mode as V02Mode

    assert V02Mode is Mode
    assert {m.name for m in Mode} == {"TRAINING", "EVALUATION", "PREDICTION"}
    assert Mode.TRAINING == "training"


def test_spec_is_abstract_and_takes_context_and_params():
    with pytest.raises(TypeError):
        ElasticDLSpec()

    class Spec(ElasticDLSpec):
        def create_model(self):
            return None

        def create_dataset(self, dataset, mode):
            return dataset

        def create_loss(self, outputs=None, labels=None):
            return 0.0

        def create_optimizer(self, lr=0.1):
            return lr

        def create_metrics(self, mode=Mode.TRAINING, outputs=None, labels=None):
            return {}

    spec = Spec(context={"worker_id": 3}, hidden=4)
    assert spec.context == {"worker_id": 3}
    assert spec.params == {"hidden": 4}
    assert elasticdl.__all__
