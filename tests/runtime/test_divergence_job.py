"""A job whose loss diverges says so in its report and summary line (issue 13 §5).

Gradient ascent (a negative learning rate) on a linear regression makes the mean squared error
grow at every step, whatever the timing: the job trains every record and "succeeds", and its
report says the loss diverged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import elasticdl
from elasticdl.runtime.data import generate as gen
from elasticdl.runtime.master.report import summary_line

FAULT_ZOO = Path(__file__).resolve().parents[1] / "support" / "fault_zoo"


@pytest.mark.slow
def test_a_diverging_loss_is_in_the_report_and_the_summary_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    gen.generate("regression", str(data), 256, records_per_file=256)
    result = elasticdl.train(
        model_zoo=str(FAULT_ZOO),
        model_def="faulty.custom_model",
        params="lr=-0.05",
        data=str(data),
        output=str(tmp_path / "model"),
        num_workers=1,
        records_per_task=64,
        minibatch_size=16,
    )
    assert result.succeeded, result.error
    diverged = result.report["diverged"]
    assert diverged is not None, result.report
    assert diverged["final_loss"] > 2 * diverged["first_loss"]
    assert "is more than 2 times that of the first" in diverged["reason"]
    assert "loss_diverged" in {e["kind"] for e in result.report["events"]}
    line = summary_line(result.report)
    assert line.startswith(f"job {result.report['job_name']} succeeded: ")
    assert f", DIVERGED: {diverged['reason']}" in line
