"""`elasticdl train|predict` on the local engine: the job's pipeline definition, run here.

The parsed flags become the pipeline's parameter values (`job_options.values_from_namespace`:
each option the local engine has as a parameter), and `workflows/local.py` runs the steps the
Argo engine would run (SQL conversion with --sql, the job, publishing), each through its own
`python -m` entry point's parser, skipping what only Argo does. Bad input surfaces as the
step raised it (one line, exit status 2 in the CLI); the job's own result is returned.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from typing import Any

from elasticdl.runtime import job_options


def run_pipeline(job: str, args: argparse.Namespace, options: Any) -> Any:
    """Run the `job` pipeline (train or predict) for parsed flags; the job step's result
    (a JobResult or InferenceResult). `options` (the job's options from the same flags) are
    validated first, so bad input reads as it always has, before any step starts."""
    from elasticdl.sql_input import check_data_source
    from elasticdl.workflows.definitions import pipeline
    from elasticdl.workflows.local import run_local

    engine = getattr(args, "engine", job_options.LOCAL)
    if engine != job_options.LOCAL:
        raise ValueError(
            f"--engine {engine!r} is not available here; use --engine local (the Argo engine "
            f"submits with `elasticdl {job} --engine argo` or renders with `elasticdl render`)"
        )
    if getattr(args, "db_secret", ""):
        raise ValueError(
            "--db_secret names a Kubernetes Secret, for --engine argo; on this machine give "
            "the password in the --db URL"
        )
    options.validate()
    data = getattr(args, "training_data", getattr(args, "data", None))
    check_data_source(data, args.sql, args.db)
    values = job_options.values_from_namespace(job_options.JOBS[job], args)
    run_id = getattr(args, "job_name", "") or f"{job}-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix=f"elasticdl-{job}-") as root:
        run = run_local(pipeline(job), values, run_id=run_id, work_dir=root, raise_errors=True)
    return run.step(job).result
