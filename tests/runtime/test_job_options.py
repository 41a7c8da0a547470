"""The option spec: each option declared once, and every surface derived from it."""

from __future__ import annotations

import argparse
import dataclasses
import sys

import pytest

from elasticdl.runtime import job_options as spec
from elasticdl.runtime.job_config import JobConfig
from elasticdl.runtime.k8s.options import KUBERNETES, KubernetesOptions
from elasticdl.runtime.master.options import InferenceOptions, TrainOptions, options_from_kwargs
from elasticdl.workflows import predict_pipeline, run_local, train_pipeline
from elasticdl.workflows.local import step_parser
from elasticdl.workflows.parameters import PipelineParam
from elasticdl.workflows.steps import Engine


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    return {a.dest for a in parser._actions if a.option_strings and a.dest != "help"}


@pytest.mark.parametrize("job", ["train", "predict", "evaluate"])
def test_each_option_is_declared_once_per_job_kind(job):
    names = [o.name for o in spec.JOBS[job]]
    assert len(names) == len(set(names))
    for option in spec.JOBS[job]:
        assert option.help, f"--{option.name} has no help"
        if option.choices and not option.required:
            assert option.text(option.default) in option.choices


@pytest.mark.parametrize(
    ("job", "options_class", "positional"),
    [("train", TrainOptions, ()), ("predict", InferenceOptions, ("job_type",))],
)
def test_the_dataclass_fields_are_the_options_it_takes(job, options_class, positional):
    fields = {f.name for f in dataclasses.fields(options_class)}
    declared = {o.dest for o in spec.JOBS[job] if spec.FIELD in o.takes}
    assert fields - {"master_host", *positional} == declared


def test_cli_and_step_flags_come_from_the_spec():
    from elasticdl.steps import train as train_step
    from elasticdl.train_command import add_train_arguments

    cli = argparse.ArgumentParser()
    add_train_arguments(cli)
    assert _dests(cli) == {o.dest for o in spec.TRAIN if spec.CLI in o.takes}
    step = argparse.ArgumentParser()
    train_step.add_arguments(step)
    wanted = {o.dest for o in spec.TRAIN if spec.STEP in o.takes} | {o.dest for o in KUBERNETES}
    assert _dests(step) == wanted
    # Old spellings still parse, into the one field.
    args = cli.parse_args(["--model_def=m", "--output=o", "--training_data=d", "--input_fn=f"])
    assert (args.training_data, args.dataset_fn) == ("d", "f")
    # ElasticDL's command lines: --num_ps_pods is --num_ps; its strategy flag names the only one.
    elastic = ["--model_def=m", "--output=o", "--training_data=d", "--num_ps_pods=2"]
    args = cli.parse_args([*elastic, "--distribution_strategy=ParameterServerStrategy"])
    options = TrainOptions(**spec.copy_fields(TrainOptions, args))
    assert (options.num_ps, options.model_def) == (2, "m")
    with pytest.raises(SystemExit):
        cli.parse_args([*elastic, "--distribution_strategy=AllreduceStrategy"])


def test_every_cli_job_option_reaches_the_local_job_step():
    """What `elasticdl train` accepts locally is a local pipeline parameter that the job step
    receives (args or local_args), or is handled by the front end (job name, engine, SQL)."""
    for job, pipeline in (("train", train_pipeline()), ("predict", predict_pipeline())):
        local = {p.name for p in pipeline.params_on(Engine.LOCAL)}
        step = pipeline.step(job)
        passed = {
            leaf.name
            for value in step.argv_args(Engine.LOCAL)
            for leaf in value.refs()
            if hasattr(leaf, "name")
        }
        for option in spec.JOBS[job]:
            if spec.CLI in option.takes and option.engines:
                assert option.name in local, option.name
            if spec.STEP in option.takes and spec.LOCAL in option.engines:
                assert option.name in passed, option.name


def test_local_only_options_stay_out_of_the_argo_templates():
    train = train_pipeline()
    argo = {p.name for p in train.params_on(Engine.ARGO)}
    assert {"chaos", "seed", "loss", "task_timeout_floor"}.isdisjoint(argo)
    assert {"num_workers", "model_def", "worker_resource_request"} <= argo
    assert "chaos" in {p.name for p in train.params_on(Engine.LOCAL)}
    with pytest.raises(ValueError, match="unknown parameter"):
        train.resolve({"model_def": "m", "output": "o", "chaos": "x"}, engine=Engine.ARGO)


def test_a_pipeline_parameter_is_the_option_described():
    option = spec.pick(spec.TRAIN, "num_workers")[0]
    param = PipelineParam.of(option)
    assert (param.description, param.default, param.kind, param.minimum) == (
        option.help,
        "2",
        "int",
        1,
    )
    manager = PipelineParam.of(spec.INSTANCE_MANAGER)
    assert (manager.default, manager.default_on(Engine.LOCAL), manager.enum) == (
        "kubernetes",
        "local",
        ("local", "kubernetes"),
    )
    shuffle = PipelineParam.of(spec.pick(spec.TRAIN, "shuffle")[0])
    assert (shuffle.enum, shuffle.local_only) == (("false", "true"), True)
    policy = PipelineParam.of(spec.pick(KUBERNETES, "image_pull_policy")[0])
    assert policy.argo_only and policy.default == KubernetesOptions.image_pull_policy


def test_adding_an_option_is_one_line():
    table = (*spec.TRAIN, spec.Option("warmup_steps", "steps of LR warm-up", int, 0, minimum=0))

    @spec.options_class(table, positional=("model_def", "training_data", "output"))
    class Options:
        pass

    parser = spec.RaisingParser(prog="x")
    spec.add_arguments(parser, table, spec.CLI)
    args = parser.parse_args(["--model_def=m", "--output=o", "--warmup_steps=5"])
    assert Options(**spec.copy_fields(Options, args)).warmup_steps == 5
    with pytest.raises(ValueError, match="x: argument --warmup_steps: invalid int value"):
        parser.parse_args(["--model_def=m", "--output=o", "--warmup_steps=five"])
    assert PipelineParam.of(table[-1]).local_only
    with pytest.raises(ValueError, match="--warmup_steps must be >= 0, got -1"):
        spec.check_ranges(table, Options("m", "d", "o", warmup_steps=-1))


def test_keywords_parse_as_the_flags_and_resolve_like_the_master():
    options = options_from_kwargs(model_def="m", data="d", output="o", grads_to_wait=4)
    assert (options.training_data, options.use_async, options.grads_to_wait) == ("d", False, 4)
    assert options_from_kwargs(model_def="m", data="d", output="o").use_async is True
    assert options_from_kwargs(model_def="m", data="d", output="o", shuffle="no").shuffle is False
    with pytest.raises(ValueError, match="elasticdl.train: unrecognized arguments: --sql"):
        options_from_kwargs(model_def="m", data="d", output="o", sql="SELECT 1")
    with pytest.raises(ValueError, match="--num_ps must be >= 1, got 0"):
        options_from_kwargs(model_def="m", data="d", output="o", num_ps=0).validate()


def test_job_config_takes_the_shared_fields_by_name():
    options = options_from_kwargs(model_def="m", data="d", output="o", seed=7, num_workers=3)
    config = JobConfig.from_options(options, job_name="j", model_zoo_root="/z")
    assert (config.seed, config.num_workers, config.model_def, config.job_type) == (
        7,
        3,
        "m",
        "train",
    )
    assert JobConfig.from_json(config.to_json()) == config
    assert {o.dest for o in spec.config_options()} <= {f.name for f in dataclasses.fields(config)}


def test_the_local_api_runs_the_train_pipeline(tmp_path, fake_steps):
    """`elasticdl.train(...)` runs the pipeline's steps with its local-only options passed."""
    import elasticdl

    data = tmp_path / "d.recordio"
    data.write_bytes(b"")
    elasticdl.train(
        model_def="regressor.DNN", data=str(data), output=str(tmp_path / "m"), chaos="x", seed=3
    )
    ((kind, args),) = fake_steps.calls
    assert kind == "train"
    assert (args.chaos, args.seed, args.training_data) == ("x", 3, str(data))
    assert args.job_name.startswith("train-") and args.instance_manager == "local"


@pytest.fixture
def fake_steps(monkeypatch):
    """The train step module replaced by one that records its parsed flags."""
    import types

    from elasticdl.steps import train

    calls = []
    module = types.ModuleType("fake_train_step")
    module.__dict__.update({k: v for k, v in vars(train).items() if not k.startswith("__")})

    def run_from_args(args):
        calls.append(("train", args))
        return types.SimpleNamespace(succeeded=True, output=args.output, error="")

    module.run_from_args = run_from_args
    monkeypatch.setitem(sys.modules, "elasticdl.steps.train", module)
    monkeypatch.setattr("elasticdl.steps.publish.run", lambda *a, **k: None)
    return types.SimpleNamespace(calls=calls)


def test_the_step_parser_reads_what_the_local_engine_passes(tmp_path):
    pipeline = train_pipeline()
    run = run_local(
        pipeline,
        {"model_def": "m", "output": str(tmp_path / "o"), "data": "/nonexistent/*.recordio"},
        work_dir=str(tmp_path / "w"),
    )
    assert run.status == "failed" and "no data file matches" in run.error
    argv = run.step("train").argv
    args = step_parser(pipeline.step("train")).parse_args(argv)
    assert args.loss is None and args.use_async is None and args.task_timeout_floor_s == 15.0


def test_an_option_for_both_engines_reaches_the_argo_step_too(monkeypatch):
    """One line in the spec: the pipeline gets the parameter and the job step the flag."""
    new = spec.Option("warmup_steps", "Steps of LR warm-up", int, 0, minimum=0, engines=spec.BOTH)
    monkeypatch.setattr(spec, "TRAIN", (*spec.TRAIN, new))
    pipeline = train_pipeline()
    assert pipeline.param("warmup_steps").description == "Steps of LR warm-up"
    for engine in (Engine.LOCAL, Engine.ARGO):
        assert "warmup_steps" in {p.name for p in pipeline.params_on(engine)}
        step = pipeline.step("train")
        argv = [getattr(getattr(v, "parts", [v])[0], "text", "") for v in step.argv_args(engine)]
        assert argv.count("--warmup_steps=") == 1
    args = step_parser(pipeline.step("train")).parse_args(["--model_def=m", "--output=o"])
    assert args.warmup_steps == 0
