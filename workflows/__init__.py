"""The pipelines: one definition each, run by the local engine or built into Argo objects.

* `definitions`: the train and predict pipelines (parameters, steps, order, conditions);
* `values`, `parameters`, `steps`, `pipeline`: the small typed model they are written in;
* `local`: `run_local(pipeline, values)` runs a definition on this machine;
* `argo`: the same definition as hera objects (Workflow, WorkflowTemplate, CronWorkflow);
* `render`, `rbac`: YAML for `argo submit` and `kubectl apply`;
* `schema`, `lint`: offline validation against the Argo CRD schemas plus a semantic lint.
"""

from elasticdl.workflows.definitions import JOB_LABEL, predict_pipeline, train_pipeline
from elasticdl.workflows.local import LocalRun, run_local
from elasticdl.workflows.pipeline import Pipeline, PipelineError

__all__ = [
    "JOB_LABEL",
    "LocalRun",
    "Pipeline",
    "PipelineError",
    "predict_pipeline",
    "run_local",
    "train_pipeline",
]
