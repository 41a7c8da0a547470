"""What `elasticdl train` and `elasticdl sql ... TRAIN` print when a training job has ended:
the final metrics, the training loss with its units, and the command that shows the curves.

    trained model written to models/m1
    metrics: mae=0.1683, mse=0.04400 (evaluation at model version 95)
    training loss: 0.05973 (last minibatch)
    training curves: tensorboard --logdir models/m1/tensorboard
"""

from __future__ import annotations

import os
import shlex
from typing import Any

import fsspec


def tensorboard_dir(report: dict[str, Any], output: str) -> str:
    """Where the job's TensorBoard event files are: the report's `tensorboard_dir` when it
    names one, else `OUTPUT/tensorboard` (what the job publishes with the model)."""
    return str(report.get("tensorboard_dir") or f"{output.rstrip('/')}/tensorboard")


def ended_lines(report: dict[str, Any], output: str) -> list[str]:
    """The lines after "trained model written to OUTPUT" (pure but for one existence check
    of a local TensorBoard folder)."""
    lines = []
    metrics = report.get("metrics") or {}
    if metrics:
        evaluation = report.get("evaluation") or []
        version = evaluation[-1]["model_version"] if evaluation else report.get("model_version")
        values = ", ".join(f"{name}={value:.4g}" for name, value in sorted(metrics.items()))
        lines.append(f"metrics: {values} (evaluation at model version {version})")
    loss = report.get("final_loss")
    if loss is not None:
        text = f"training loss: {loss:.4g} (last minibatch)"
        if report.get("loss_units"):
            text += f", in {report['loss_units']}"
        lines.append(text)
    learned = report.get("learning")
    if learned:
        lines.append(f"note: {learned['reason']}: {learned['hint']}")
    board = tensorboard_dir(report, output)
    protocol, path = fsspec.core.split_protocol(board)
    if protocol not in (None, "file", "local") or os.path.isdir(path):
        lines.append(f"training curves: tensorboard --logdir {shlex.quote(board)}")
    return lines
