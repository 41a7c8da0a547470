"""One pipeline definition, two engines: structure, values, and the local engine."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from elasticdl.workflows import PipelineError, predict_pipeline, run_local, train_pipeline
from elasticdl.workflows.argo import ArgoOptions, build_workflow
from elasticdl.workflows.definitions import JOB_LABEL, PIPELINES
from elasticdl.workflows.lint import lint_documents
from elasticdl.workflows.steps import Engine, Step, flag
from elasticdl.workflows.values import Is, IsSet, Join, Lit, Param, RunName, TaskOutput

SCHEMAS = Path(__file__).parent.parent / "data" / "argo-schemas"
TRAIN_VALUES = {
    "model_def": "regressor.DNN",
    "data": "gs://b/train/*.recordio",
    "output": "gs://b/models/m",
    "zoo_context": "gs://b/zoo.tar.gz",
    "image_repository": "gcr.io/p/zoo",
}


def test_train_and_predict_steps_run_in_dependency_order():
    train = train_pipeline()
    assert [s.name for s in train.order()] == [
        "resolve-image",
        "build-image",
        "sql-to-recordio",
        "sql-to-recordio-validation",
        "train",
        "publish",
        "update-latest",
    ]
    assert train.exit_step.name == "cleanup"
    assert train.step("build-image").when.describe() == "--image is empty"
    assert train.step("sql-to-recordio").when.describe() == "--sql is given"
    assert not train.step("build-image").runs_on(Engine.LOCAL)
    # The job image comes from a step that always runs, never from the skippable build.
    assert train.step("resolve-image").when is None
    assert train.step("train").image == TaskOutput("resolve-image", "image")
    predict = predict_pipeline()
    assert [s.name for s in predict.order()] == [
        "sql-to-recordio",
        "resolve-image",
        "predict",
        "write-back",
    ]
    assert predict.step("predict").image == TaskOutput("resolve-image", "image")


def test_every_container_step_is_python_m_a_step_module_with_an_argv_list():
    for pipeline in (p() for p in PIPELINES.values()):
        for step in pipeline.all_steps():
            if step.module is not None:
                assert step.argv_command == ("python", "-m", step.module)
                assert importlib.util.find_spec(str(step.module)), step.module
                assert step.module.startswith("elasticdl.steps.") or (
                    step is pipeline.exit_step and step.module == "elasticdl.steps.cleanup"
                )
            assert all(not isinstance(a, str) for a in step.args)


def _fake_step(name: str, **kwargs) -> Step:
    return Step(
        name=name,
        description="test step",
        image=Param("elasticdl_image"),
        module="fake_audit_step",
        args=(flag("model", Param("output")),),
        **kwargs,
    )


def test_a_broken_definition_is_refused_with_the_reason():
    train = train_pipeline()
    with pytest.raises(PipelineError, match="unknown step 'nope'"):
        train.with_step(_fake_step("audit", after=("nope",)))
    with pytest.raises(PipelineError, match="duplicate steps"):
        train.with_step(_fake_step("publish"))
    bad_param = Step(
        name="audit",
        description="",
        image=Param("no_such_param"),
        module="fake_audit_step",
        args=(),
    )
    with pytest.raises(PipelineError, match="unknown parameter 'no_such_param'"):
        train.with_step(bad_param)
    reads_output = Step(
        name="audit",
        description="",
        image=TaskOutput("build-image", "image"),
        module="fake_audit_step",
        args=(),
    )
    with pytest.raises(PipelineError, match="does not run after it"):
        train.with_step(reads_output)
    reads_skippable = dataclasses.replace(reads_output, after=("build-image",))
    with pytest.raises(
        PipelineError,
        match="reads an output of build-image, which is skipped unless --image is empty",
    ):
        train.with_step(reads_skippable)
    cyclic = train.with_step(_fake_step("a", after=("publish",)))
    steps = tuple(
        dataclasses.replace(s, after=(*s.after, "a")) if s.name == "train" else s
        for s in cyclic.steps
    )
    with pytest.raises(PipelineError, match="depend on each other"):
        dataclasses.replace(cyclic, steps=steps)


def test_literals_and_joins_cannot_form_argo_tags():
    with pytest.raises(ValueError, match="not allowed"):
        Lit("{{workflow.name}}")
    with pytest.raises(ValueError, match="adjacent"):
        Join(Param("a"), RunName())
    with pytest.raises(ValueError, match="not allowed"):
        Is("versioned", "it's")


def test_values_are_checked_with_one_line_naming_the_flag():
    train = train_pipeline()
    resolve = train.resolve
    with pytest.raises(PipelineError, match="missing required --model_def, --output"):
        resolve({"data": "d"}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="unknown parameter.*bogus"):
        resolve({**TRAIN_VALUES, "bogus": "1"}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="--num_workers 'two' is not an integer"):
        resolve({**TRAIN_VALUES, "num_workers": "two"}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="--num_workers must be >= 1"):
        resolve({**TRAIN_VALUES, "num_workers": "0"}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="--versioned 'yes': expected one of false, true"):
        resolve({**TRAIN_VALUES, "versioned": "yes"}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="either --data or --sql"):
        resolve({**TRAIN_VALUES, "sql": "SELECT 1"}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="--sql needs --db"):
        resolve({**TRAIN_VALUES, "data": "", "sql": "SELECT a"}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="--image .* or --zoo_context"):
        resolve({**TRAIN_VALUES, "zoo_context": ""}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="needs --versioned true"):
        resolve({**TRAIN_VALUES, "warm_start": "true"}, engine=Engine.ARGO)
    with pytest.raises(PipelineError, match="needs --checkpoint_steps > 0"):
        resolve({**TRAIN_VALUES, "warm_start": "true", "versioned": "true"}, engine=Engine.ARGO)
    # Argo-only checks do not apply locally; images are not needed there.
    local = resolve({"model_def": "m", "data": "d", "output": "o"}, engine=Engine.LOCAL)
    assert local["num_workers"] == "2" and local["image"] == ""
    assert resolve({**TRAIN_VALUES, "num_ps": " 03"}, engine=Engine.ARGO)["num_ps"] == "3"


def test_local_train_pipeline_from_sql_publishes_and_moves_latest(fake_jobs, hr_db, tmp_path):
    output = tmp_path / "models" / "salary"
    values = {
        "model_def": "regressor.DNN",
        "sql": "SELECT name, role, years, salary FROM employee",
        "db": hr_db,
        "label": "salary",
        "output": str(output),
        "versioned": "true",
        "checkpoint_steps": "10",
    }
    first = run_local(train_pipeline(), values, run_id="run-1", work_dir=str(tmp_path / "w1"))
    assert first.succeeded, first.error
    assert first.ran == ["sql-to-recordio", "train", "publish", "update-latest"]
    assert first.step("build-image").reason == "runs on Argo only"
    ((name, args),) = fake_jobs.calls
    assert args.training_data == str((tmp_path / "w1" / "work").resolve() / "run-1" / "train-data")
    assert json.loads((Path(args.training_data) / "schema.json").read_text())["label"] == "salary"
    assert args.output == f"{output}/runs/run-1" and args.job_name == "run-1"
    assert args.instance_manager == "local" and args.init_from_latest == ""
    assert (output / "LATEST").read_text().strip() == f"{output}/runs/run-1"
    summary = json.loads(first.step("publish").outputs["trained_model"])
    assert summary["model"] == f"{output}/runs/run-1" and summary["docker_commit_id"] == ""

    # The next run warm-starts from the checkpoints of the model LATEST names.
    second = run_local(
        train_pipeline(), {**values, "warm_start": "true"}, run_id="run-2", work_dir=str(tmp_path)
    )
    assert second.succeeded, second.error
    _, args = fake_jobs.calls[-1]
    assert args.init_from_latest == f"{output}/LATEST"
    assert second.step("train").result.init == f"{output}/runs/run-1/checkpoints"
    assert (output / "LATEST").read_text().strip() == f"{output}/runs/run-2"
    assert (output / "runs" / "run-1" / "trained_model.pb").exists()


def test_a_failing_step_stops_the_run_and_latest_stays(fake_jobs, tmp_path):
    output = tmp_path / "m"
    values = {"model_def": "m", "data": str(tmp_path / "d"), "output": str(output)}
    sys.modules["elasticdl.steps.train"].run_from_args = lambda args: types.SimpleNamespace(
        succeeded=False, error="worker 0 failed: boom"
    )
    run = run_local(train_pipeline(), {**values, "versioned": "true"}, run_id="r")
    assert not run.succeeded
    assert run.error == "train: worker 0 failed: boom"
    assert [s.name for s in run.steps] == [
        "resolve-image",
        "build-image",
        "sql-to-recordio",
        "sql-to-recordio-validation",
        "train",
    ]
    assert not (output / "LATEST").exists()


def test_local_predict_pipeline_writes_predictions_back_into_a_table(
    fake_jobs, hr_db, tmp_path, model_writer
):
    from sqlalchemy import create_engine, text

    model = tmp_path / "model"
    model_writer(str(model))
    values = {
        "sql": "SELECT name, role, years FROM testdata",
        "db": hr_db,
        "trained_model": str(model),
        "output_table": "scored",
        "result_column": "predicted_salary",
    }
    run = run_local(predict_pipeline(), values, run_id="p1", work_dir=str(tmp_path / "w"))
    assert run.succeeded, run.error
    assert run.ran == ["sql-to-recordio", "predict", "write-back"]
    _, args = fake_jobs.calls[-1]
    assert args.keep_columns == "*"
    assert run.step("write-back").result.rows == 20
    engine = create_engine(hr_db)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT name, years, predicted_salary FROM scored")).all()
    engine.dispose()
    assert len(rows) == 20 and {r[2] for r in rows} == {10.0 * i for i in range(20)}

    # --key: the column is added to the table the SELECT reads, rows matched on the key.
    keyed = {**values, "output_table": "testdata", "key": "name"}
    run = run_local(predict_pipeline(), keyed, run_id="p2", work_dir=str(tmp_path / "w"))
    assert run.succeeded, run.error
    engine = create_engine(hr_db)
    with engine.connect() as conn:
        filled = conn.execute(text("SELECT count(predicted_salary) FROM testdata")).scalar()
    engine.dispose()
    assert filled == 20


def test_a_step_added_to_the_definition_runs_locally_and_appears_in_the_argo_dag(
    fake_jobs, monkeypatch, tmp_path
):
    seen = []
    audit = types.ModuleType("fake_audit_step")

    def add_arguments(parser):
        parser.add_argument("--model", required=True)
        parser.add_argument("--run", required=True)

    def run_from_args(args):
        seen.append((args.model, args.run, Path(args.model, "trained_model.pb").exists()))
        return types.SimpleNamespace(succeeded=True)

    audit.add_arguments, audit.run_from_args = add_arguments, run_from_args
    monkeypatch.setitem(sys.modules, "fake_audit_step", audit)
    step = Step(
        name="audit",
        description="Check the published model",
        image=Param("elasticdl_image"),
        module="fake_audit_step",
        args=(flag("model", Param("output")), Join(Lit("--run="), RunName())),
        when=IsSet("output"),
        after=("publish",),
    )
    pipeline = train_pipeline().with_step(step)

    local = run_local(pipeline, {"model_def": "m", "data": "d", "output": str(tmp_path / "m")})
    assert local.succeeded, local.error
    assert local.ran == ["train", "publish", "audit"]
    assert seen == [(str(tmp_path / "m"), local.run_id, True)]

    values = pipeline.resolve(TRAIN_VALUES, engine=Engine.ARGO)
    workflow = build_workflow(pipeline, values, ArgoOptions()).to_dict()
    tasks = {t["name"]: t for t in workflow["spec"]["templates"][0]["dag"]["tasks"]}
    assert tasks["audit"]["depends"] == "publish"
    assert tasks["audit"]["when"] == "{{=workflow.parameters.output != ''}}"
    template = next(t for t in workflow["spec"]["templates"] if t["name"] == "audit")
    assert template["container"]["command"] == ["python", "-m", "fake_audit_step"]
    assert template["container"]["args"] == [
        "--model={{workflow.parameters.output}}",
        "--run={{workflow.name}}",
    ]
    assert lint_documents([workflow], schema_dir=SCHEMAS) == []


def test_the_cleanup_selects_job_pods_by_the_job_label():
    from elasticdl.runtime.k8s import manifests
    from elasticdl.steps.cleanup import job_selector

    cleanup = train_pipeline().exit_step
    assert cleanup.module == "elasticdl.steps.cleanup"
    assert JOB_LABEL == manifests.LABEL_JOB == "elasticdl-job-name"
    assert not JOB_LABEL.startswith("workflows.argoproj.io")
    # The label value is the master's prefix of the job name, not the name itself.
    name = "Team.ML-" + "x" * 60
    assert job_selector(name) == f"{JOB_LABEL}={manifests.name_prefix(name)}"
    assert len(job_selector(name)) == len(JOB_LABEL) + 1 + 40
