"""The step entry points: publish (record / latest / image), train, predict, write-back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from elasticdl.proto import elasticdl_pb2 as pb
from elasticdl.steps import predict, publish, train, write_back
from elasticdl.train_command import options_from_kwargs


def _pb(model: Path) -> pb.TrainedModel:
    return pb.TrainedModel.FromString((model / "trained_model.pb").read_bytes())


def test_record_writes_the_image_into_the_trained_model_and_a_summary(tmp_path, model_writer):
    model = tmp_path / "m"
    model_writer(str(model))
    summary = tmp_path / "out" / "trained_model"
    image = "gcr.io/p/zoo@sha256:" + "a" * 64
    result = publish.run(str(model), image, str(summary))
    assert _pb(model).docker_commit_id == image
    assert _pb(model).model_def == "regressor.DNN" and _pb(model).model_version == 7
    facts = json.loads(summary.read_text())
    assert facts == {
        "created_time": "2026-01-01T00:00:00Z",
        "docker_commit_id": image,
        "elasticdl_version": "",
        "metrics": {"mse": 0.25},
        "model": str(model),
        "model_def": "regressor.DNN",
        "model_version": 7,
        "model_zoo": "",
    }
    assert result.docker_commit_id == image
    assert sorted(p.name for p in model.iterdir()) == ["params.npz", "trained_model.pb"]
    # Again (a retried step): the same result; without an image the id is left alone.
    publish.run(str(model), image, str(summary))
    publish.run(str(model), "", "")
    assert _pb(model).docker_commit_id == image


def test_record_refuses_an_unfinished_model(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(ValueError, match="has no trained_model.pb: it is not a finished model"):
        publish.run(str(tmp_path / "m"), "img")
    (tmp_path / "m" / "trained_model.pb").write_bytes(b"\xff\xff garbage")
    with pytest.raises(ValueError, match="corrupt|not an ElasticDL model"):
        publish.run(str(tmp_path / "m"), "img")


def test_latest_points_at_finished_models_only(tmp_path, model_writer):
    output = tmp_path / "out"
    with pytest.raises(ValueError, match="not a finished model"):
        publish.update_latest(str(output), str(output / "runs" / "r1"))
    assert not (output / "LATEST").exists()
    model_writer(str(output / "runs" / "r1"))
    publish.update_latest(str(output), str(output / "runs" / "r1"))
    assert publish.read_latest(str(output / "LATEST")) == str(output / "runs" / "r1")
    model_writer(str(output / "runs" / "r2"))
    publish.update_latest(str(output), str(output / "runs" / "r2"))
    assert (output / "LATEST").read_text() == f"{output}/runs/r2\n"
    assert [p.name for p in output.iterdir() if p.name.startswith("LATEST")] == ["LATEST"]
    assert publish.read_latest(str(tmp_path / "nowhere" / "LATEST")) is None


def test_image_comes_from_the_flag_or_the_trained_model(tmp_path, model_writer):
    model = tmp_path / "m"
    model_writer(str(model))
    with pytest.raises(ValueError, match="records no image .* pass --image"):
        publish.resolve_image(str(model))
    assert publish.resolve_image(str(model), "given:1", str(tmp_path / "f")) == "given:1"
    model_writer(str(model), image="reg/zoo@sha256:" + "b" * 64)
    assert publish.resolve_image(str(model), "", str(tmp_path / "f")).endswith("b" * 64)
    assert (tmp_path / "f").read_text() == "reg/zoo@sha256:" + "b" * 64


def test_image_of_a_training_run_is_the_flag_or_what_the_build_step_pushes(tmp_path, capsys):
    """The train pipeline's resolve-image: always runs, so nothing reads the build's output."""
    out = tmp_path / "image"
    argv = ["image", "--repository", "gcr.io/p/zoo", "--tag", "run-1", "--image_file", str(out)]
    assert publish.main(argv) == 0
    assert out.read_text() == "gcr.io/p/zoo:run-1"
    assert publish.main([*argv, "--image", "zoo:given"]) == 0
    assert out.read_text() == "zoo:given"
    capsys.readouterr()
    assert publish.main(["image", "--repository", "gcr.io/p/zoo", "--image_file", str(out)]) == 2
    assert "--repository needs --tag" in capsys.readouterr().err
    assert publish.main(["image", "--image_file", str(out)]) == 2
    assert "give --image, --repository with --tag, or --trained_model" in capsys.readouterr().err


def test_publish_main_exit_status_and_one_line_errors(tmp_path, model_writer, capsys):
    assert publish.main(["record", "--model", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("publish record: error: ")
    model_writer(str(tmp_path / "m"))
    assert publish.main(["latest", "--output", str(tmp_path), "--model", str(tmp_path / "m")]) == 0
    assert capsys.readouterr().out.strip() == f"{tmp_path}/LATEST -> {tmp_path / 'm'}"


def test_publish_runs_as_a_container_entry_point(tmp_path, model_writer):
    model_writer(str(tmp_path / "m"))
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "elasticdl.steps.publish",
            "record",
            f"--model={tmp_path / 'm'}",
            "--image=reg/zoo@sha256:1",
            f"--summary_file={tmp_path / 's'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"published {tmp_path / 'm'} (docker_commit_id reg/zoo@sha256:1)"


def _options(tmp_path, **kwargs):
    return options_from_kwargs(
        model_def="regressor.DNN", data=str(tmp_path / "d"), output=str(tmp_path / "o"), **kwargs
    )


def test_train_step_on_kubernetes_needs_the_master_pod_ip(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MY_POD_IP", raising=False)
    with pytest.raises(ValueError, match="MY_POD_IP is not set"):
        train.run(_options(tmp_path), instance_manager="kubernetes")
    argv = [
        "--model_def=m",
        f"--data={tmp_path}",
        f"--output={tmp_path / 'o'}",
        "--instance_manager=kubernetes",
    ]
    assert train.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MY_POD_IP is not set" in err[0]
    with pytest.raises(SystemExit):
        train.main([*argv[:3], "--instance_manager=yarn"])


def test_warm_start_reads_latest(tmp_path, model_writer):
    latest = str(tmp_path / "out" / "LATEST")
    assert train.checkpoint_dir_from_latest(latest) == ""  # the first run: a cold start
    model_writer(str(tmp_path / "out" / "runs" / "r1"))
    publish.update_latest(str(tmp_path / "out"), str(tmp_path / "out" / "runs" / "r1"))
    with pytest.raises(ValueError, match="has no checkpoints; train with --checkpoint_steps"):
        train.checkpoint_dir_from_latest(latest)
    (tmp_path / "out" / "runs" / "r1" / "checkpoints" / "v-3").mkdir(parents=True)
    assert train.checkpoint_dir_from_latest(latest) == f"{tmp_path}/out/runs/r1/checkpoints"
    with pytest.raises(ValueError, match="not both"):
        train.run(_options(tmp_path, checkpoint_dir_for_init="x"), init_from_latest=latest)


def test_predict_step_keeps_every_column_of_converted_sql_data(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"needs --data to be a directory with schema.json"):
        predict.schema_columns(str(tmp_path))
    schema = {"columns": [{"name": "name", "dtype": "bytes"}, {"name": "years", "dtype": "int64"}]}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    assert predict.schema_columns(str(tmp_path)) == ["name", "years"]
    from elasticdl.predict_command import options_from_kwargs as predict_options

    options = predict_options(
        "predict", data=str(tmp_path), trained_model="m", output="o", keep_columns="*"
    )
    # Outside a pod the Kubernetes instance manager is refused up front, for want of MY_POD_IP.
    monkeypatch.delenv("MY_POD_IP", raising=False)
    with pytest.raises(ValueError, match="MY_POD_IP is not set"):
        predict.run(options, instance_manager="kubernetes")


def test_write_back_refuses_bad_input_before_writing(tmp_path, hr_db, capsys):
    data = tmp_path / "data"
    data.mkdir()
    schema = {"columns": [{"name": "name", "dtype": "bytes"}, {"name": "years", "dtype": "int64"}]}
    (data / "schema.json").write_text(json.dumps(schema))
    common = {"db": hr_db, "predictions": str(tmp_path / "p"), "data": str(data)}
    with pytest.raises(ValueError, match="no write_back.json"):
        write_back.run(**common)
    from elasticdl.runtime.sql.predict_writer import plan_prediction, save_plan

    with pytest.raises(ValueError, match="invalid SQL name"):
        plan_prediction(
            hr_db, "SELECT name FROM testdata", "t; DROP TABLE employee", "c", None, None
        )
    replaced = plan_prediction(hr_db, "SELECT name, years FROM testdata", "t", "years", None, None)
    assert replaced.drop == ("years",)  # SQLFlow's: the prediction replaces a selected column
    save_plan(str(data), plan_prediction(hr_db, "SELECT name FROM testdata", "t", "c", None, None))
    with pytest.raises(ValueError, match="holds no prediction parts"):
        write_back.run(**common)
    argv = [
        "--db",
        "postgresql://u:secret@h/db",
        "--predictions",
        "p",
        "--data",
        str(tmp_path),
    ]
    assert write_back.main(argv) == 2
    err = capsys.readouterr().err
    assert "secret" not in err and err.startswith("write-back: error: ")


@pytest.mark.slow
def test_real_pipelines_train_then_predict_into_the_table_locally(hr_db, tmp_path):
    """The real steps end to end on the local engine: SQL -> train (TensorFlow) -> publish ->
    LATEST, then SQL -> predict -> write-back into the table the SELECT reads."""
    from sqlalchemy import create_engine, text

    from elasticdl.workflows import predict_pipeline, run_local, train_pipeline

    output = tmp_path / "models" / "salary"
    trained = run_local(
        train_pipeline(),
        {
            "model_def": "regressor.DNN",
            "params": "hidden_units=[8]",
            "sql": "SELECT name, role, department, years, salary FROM employee",
            "db": hr_db,
            "label": "salary",
            "output": str(output),
            "versioned": "true",
            "num_workers": "1",
            "records_per_task": "32",
        },
        run_id="nightly-1",
        work_dir=str(tmp_path / "w"),
    )
    assert trained.succeeded, trained.error
    model = f"{output}/runs/nightly-1"
    assert publish.read_latest(f"{output}/LATEST") == model
    assert json.loads(trained.step("publish").outputs["trained_model"])["model"] == model
    predicted = run_local(
        predict_pipeline(),
        {
            "sql": "SELECT name, role, department, years FROM testdata",
            "db": hr_db,
            "trained_model": model,
            "output_table": "testdata",
            "key": "name",
            "result_column": "predicted_salary",
            "num_workers": "1",
        },
        run_id="score-1",
        work_dir=str(tmp_path / "w"),
    )
    assert predicted.succeeded, predicted.error
    engine = create_engine(hr_db)
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(predicted_salary) FROM testdata")).scalar()
    engine.dispose()
    assert count == 20


def test_a_retried_train_attempt_resumes_from_its_own_checkpoints(
    tmp_path, model_writer, monkeypatch
):
    import elasticdl.runtime.master.training_job as job

    started = []

    class FakeJob:
        def __init__(self, options):
            started.append(options.checkpoint_dir_for_init)

        def run(self):
            return "ran"

    monkeypatch.setattr(job, "TrainingJob", FakeJob)
    output = tmp_path / "out" / "runs" / "r2"
    assert train.interrupted_checkpoints(str(output)) == ""
    model_writer(str(tmp_path / "out" / "runs" / "r1"))
    (tmp_path / "out" / "runs" / "r1" / "checkpoints" / "v-1").mkdir(parents=True)
    publish.update_latest(str(tmp_path / "out"), str(tmp_path / "out" / "runs" / "r1"))
    latest = str(tmp_path / "out" / "LATEST")
    options = options_from_kwargs(model_def="m", data="d", output=str(output))
    assert train.run(options, init_from_latest=latest, resume=True) == "ran"
    assert started[-1] == f"{tmp_path}/out/runs/r1/checkpoints"  # first attempt: warm start
    (output / "checkpoints" / "v-5").mkdir(parents=True)  # ... then its pod was killed
    options = options_from_kwargs(model_def="m", data="d", output=str(output))
    train.run(options, init_from_latest=latest, resume=True)
    assert started[-1] == f"{output}/checkpoints"  # the retry continues its own job
    (output / "trained_model.pb").write_bytes(b"")
    assert train.interrupted_checkpoints(str(output)) == ""  # published: nothing to resume
