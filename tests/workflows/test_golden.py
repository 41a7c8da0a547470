"""Golden YAML for each object kind, compared exactly.

After an intended change, regenerate and review the diff:

    ELASTICDL_REGENERATE_GOLDEN=1 python -P -m pytest -q -p no:cacheprovider \\
        tests/workflows/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from elasticdl.workflows.argo import ArgoOptions, Schedule
from elasticdl.workflows.lint import lint_file
from elasticdl.workflows.render import install_objects, render_objects, to_yaml

GOLDEN = Path(__file__).parent.parent / "data" / "golden"
SCHEMAS = Path(__file__).parent.parent / "data" / "argo-schemas"
REGENERATE = os.environ.get("ELASTICDL_REGENERATE_GOLDEN") == "1"

TRAIN = {
    "model_def": "regressor.DNN",
    "params": "hidden_units=[10, 100, 20, 5], learning_rate=0.01",
    "data": "gs://elasticdl-demo/employee/*.recordio",
    "output": "gs://elasticdl-demo/models/salary",
    "zoo_context": "gs://elasticdl-demo/zoo/context.tar.gz",
    "image_repository": "gcr.io/elasticdl-demo/zoo",
    "num_workers": "4",
}
PREDICT = {
    "sql": "SELECT name, role, years FROM testdata",
    "db": "postgresql+psycopg://elasticdl@db.internal/hr",
    "work_dir": "gs://elasticdl-demo/work",
    "trained_model": "gs://elasticdl-demo/models/salary/runs/elasticdl-train-cron-1767225600",
    "output_table": "scored",
    "result_column": "predicted_salary",
}


def _cases() -> dict[str, str]:
    options = ArgoOptions(namespace="ml")
    schedule = Schedule(("0 3 * * *",), timezone="Europe/Berlin")
    cron = {**TRAIN, "checkpoint_steps": "200", "warm_start": "true"}
    return {
        "workflow_train.yaml": to_yaml(render_objects("train", TRAIN, options=options)),
        "workflow_predict.yaml": to_yaml(render_objects("predict", PREDICT, options=options)),
        "template_train.yaml": to_yaml(
            render_objects("train", {}, kind="template", options=options)
        ),
        "template_predict.yaml": to_yaml(
            render_objects("predict", {}, kind="template", options=options)
        ),
        "cron_train.yaml": to_yaml(
            render_objects("train", cron, kind="cron", options=options, schedule=schedule)
        ),
        "install.yaml": to_yaml(install_objects(options, max_concurrent_jobs=2)),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
def test_rendered_yaml_matches_the_golden_file(name):
    text = _cases()[name]
    path = GOLDEN / name
    if REGENERATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing; regenerate with ELASTICDL_REGENERATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"{name} differs from the golden file; if the change is intended, regenerate with "
        "ELASTICDL_REGENERATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("version", ["4", "3.7"])
def test_golden_files_pass_the_linter(version):
    for path in sorted(GOLDEN.glob("*.yaml")):
        assert [str(p) for p in lint_file(path, argo_version=version, schema_dir=SCHEMAS)] == []
