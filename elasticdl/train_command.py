"""`elasticdl train` flags and `elasticdl.train(...)`: one parser, so both accept the same.

The Python API takes the same arguments as strings (what a CLI or a SQL front end holds) or
as typed values, and parses them with the CLI's own argparse definitions: no second set of
conversions to drift from the first, and no shell in between.
"""

from __future__ import annotations

import argparse
from typing import Any

from elasticdl.runtime.master.options import TrainOptions


def _bool(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true/false)")


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    model = parser.add_argument_group("model")
    model.add_argument("--model_zoo", default=None, help="directory or git URL (default: built-in)")
    model.add_argument(
        "--model_def", required=True, help="e.g. mnist.mnist_functional_api.custom_model"
    )
    model.add_argument("--params", "--model_params", dest="params", default="")
    model.add_argument("--dataset_fn", "--input_fn", dest="dataset_fn", default=None)
    model.add_argument("--loss", default=None)
    model.add_argument("--optimizer", default=None)
    model.add_argument("--eval_metrics_fn", default=None)

    data = parser.add_argument_group("data and output")
    data.add_argument(
        "--data",
        "--training_data",
        dest="training_data",
        default=None,
        help="RecordIO files: path, glob, directory or URL (comma-separated)",
    )
    data.add_argument("--output", required=True, help="where the trained model goes (URL)")
    data.add_argument(
        "--validation_data",
        default="",
        help="RecordIO files to evaluate on, at the end and every --evaluation_steps versions",
    )
    data.add_argument(
        "--evaluation_steps",
        type=int,
        default=0,
        help="also evaluate every N model versions (0: only at the end)",
    )

    from elasticdl.sql_input import add_sql_arguments

    add_sql_arguments(parser, label=True)

    ckpt = parser.add_argument_group("checkpoints")
    ckpt.add_argument(
        "--checkpoint_steps", type=int, default=0, help="checkpoint every N model versions"
    )
    ckpt.add_argument("--keep_checkpoint_max", type=int, default=3)
    ckpt.add_argument(
        "--checkpoint_dir", default="", help="default with --checkpoint_steps: OUTPUT/checkpoints"
    )
    ckpt.add_argument(
        "--checkpoint_dir_for_init", default="", help="start from the latest checkpoint here"
    )
    ckpt.add_argument("--max_ps_relaunches", type=int, default=3)

    job = parser.add_argument_group("job")
    job.add_argument("--num_workers", type=int, default=2, help="workers to start with")
    job.add_argument(
        "--min_workers",
        type=int,
        default=1,
        help="the job goes on while at least this many workers are alive (default 1); "
        "`elasticdl scale` cannot go below it",
    )
    job.add_argument("--num_ps", type=int, default=1)
    job.add_argument("--minibatch_size", type=int, default=64)
    job.add_argument("--num_epochs", type=int, default=1)
    job.add_argument("--records_per_task", type=int, default=1024)
    job.add_argument(
        "--use_async",
        type=_bool,
        default=None,
        help="asynchronous SGD (default, unless --grads_to_wait is given)",
    )
    job.add_argument(
        "--grads_to_wait",
        type=int,
        default=None,
        help="sync SGD: average this many pushes per model version",
    )
    job.add_argument("--lr_staleness_modulation", type=_bool, default=False)
    job.add_argument("--max_worker_relaunches", type=int, default=3)
    job.add_argument("--max_task_retries", type=int, default=3)
    job.add_argument(
        "--task_timeout_floor",
        dest="task_timeout_floor_s",
        type=float,
        default=300.0,
        help="seconds without progress before a task times out",
    )
    job.add_argument("--master_port", type=int, default=0, help="0: any free port")
    job.add_argument("--chaos", default="", help="scripted failures, e.g. worker1:kill@tasks=3")
    job.add_argument("--seed", type=int, default=0)
    job.add_argument("--shuffle", type=_bool, default=True)
    job.add_argument(
        "--intra_op_threads",
        type=int,
        default=0,
        help="TensorFlow threads per worker/PS process (0: TensorFlow decides)",
    )
    job.add_argument("--job_name", default="")
    job.add_argument("--log_dir", default="", help="job logs (default: a new temp directory)")
    job.add_argument(
        "--engine",
        default="local",
        choices=["local", "argo"],
        help="local: this machine; argo: submit the pipeline to --argo_server",
    )


def options_from_namespace(args: argparse.Namespace) -> TrainOptions:
    grads_to_wait = args.grads_to_wait
    use_async = args.use_async
    if use_async is None:
        use_async = grads_to_wait is None
    return TrainOptions(
        model_def=args.model_def,
        training_data=args.training_data,
        output=args.output,
        model_zoo=args.model_zoo,
        validation_data=args.validation_data,
        evaluation_steps=args.evaluation_steps,
        checkpoint_steps=args.checkpoint_steps,
        keep_checkpoint_max=args.keep_checkpoint_max,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_dir_for_init=args.checkpoint_dir_for_init,
        max_ps_relaunches=args.max_ps_relaunches,
        params=args.params,
        dataset_fn=args.dataset_fn,
        loss=args.loss,
        optimizer=args.optimizer,
        eval_metrics_fn=args.eval_metrics_fn,
        num_workers=args.num_workers,
        min_workers=args.min_workers,
        num_ps=args.num_ps,
        minibatch_size=args.minibatch_size,
        num_epochs=args.num_epochs,
        records_per_task=args.records_per_task,
        use_async=use_async,
        grads_to_wait=grads_to_wait or 1,
        lr_staleness_modulation=args.lr_staleness_modulation,
        max_worker_relaunches=args.max_worker_relaunches,
        max_task_retries=args.max_task_retries,
        task_timeout_floor_s=args.task_timeout_floor_s,
        master_port=args.master_port,
        chaos=args.chaos,
        seed=args.seed,
        shuffle=args.shuffle,
        intra_op_threads=args.intra_op_threads,
        job_name=args.job_name,
        log_dir=args.log_dir,
        engine=args.engine,
    )


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(f"elasticdl.train: {message}")


_ALIASES = {"data": "training_data", "input_fn": "dataset_fn", "model_params": "params"}


def namespace_from_kwargs(**kwargs: Any) -> argparse.Namespace:
    """The parsed flags for keyword arguments named like the CLI flags (strings or values)."""
    parser = _RaisingParser(prog="elasticdl.train")
    add_train_arguments(parser)
    argv: list[str] = []
    for name, value in kwargs.items():
        if value is None:
            continue
        flag = _ALIASES.get(name, name)
        argv += [f"--{flag}", str(value)]
    return parser.parse_args(argv)


def options_from_kwargs(**kwargs: Any) -> TrainOptions:
    """TrainOptions from keyword arguments named like the CLI flags (strings or values)."""
    return options_from_namespace(namespace_from_kwargs(**kwargs))


def run_training(args: argparse.Namespace) -> Any:
    """Run `elasticdl train` for parsed flags: converting `--sql` rows first when given."""
    import dataclasses

    from elasticdl.runtime.master.training_job import TrainingJob
    from elasticdl.sql_input import check_data_source, converted

    check_data_source(args.training_data, args.sql, args.db)
    if not args.sql:
        return TrainingJob(options_from_namespace(args)).run()
    with converted(args.sql, args.db, label=args.label) as data:
        options = dataclasses.replace(options_from_namespace(args), training_data=data)
        return TrainingJob(options).run()
