"""The README's commands, run: every command of its ```bash blocks runs, in order, in one
fresh directory, or is listed in NOT_HERE with the reason it cannot run here (and what tests
it instead). The files it shows (`<!-- file: NAME -->` before a block) are written first, so
no command points at data that does not exist; what the commands made is then checked: the
trained model's `model.keras` loads with plain Keras and predicts what the predict job wrote.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(
    r"(?:<!-- file: (?P<file>[\w.-]+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```", re.S | re.M
)
NOT_HERE = {
    "make demo": "scripts/demo.sh trains on 4000 rows for 10 epochs (a minute or more); the "
    "SQL section's TRAIN and PREDICT statements, run here, are the same on a smaller table",
    "make test": "runs the whole suite, this test among them (it is what .ci/run runs)",
    "pip install .": "installs TensorFlow and the rest from PyPI; tests/test_packaging.py "
    "builds this project's wheel and installs it into a fresh virtual environment",
    "pip wheel": "tests/test_packaging.py builds this wheel (and installs it)",
    "docker build": "no container engine here; tests/test_zoo_commands.py checks the Dockerfile",
    "kubectl apply": "needs a Kubernetes cluster; `elasticdl lint` checks install.yaml here",
    "argo submit": "needs Argo Workflows on a cluster; `elasticdl lint` checks train.yaml here",
}


def readme_blocks(text: str) -> list[tuple[str, str, str | None]]:
    """(language, body, file name or None) of each fenced block, in order."""
    return [(m["lang"], m["body"], m["file"]) for m in FENCE.finditer(text)]


def shell_commands(body: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comment lines dropped."""
    commands, current = [], ""
    for line in body.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        commands.append(current + line)
        current = ""
    return commands


LINK = re.compile(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)")
PENDING = {"docs/sqlflow.md": "the SQLFlow guide, written in another change"}
"""Links to pages that other work adds; checked once the page exists."""


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings: lowercase, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


def test_the_readme_links_point_at_files_and_sections():
    text = README.read_text()
    links = LINK.findall(text)
    assert len(links) > 10
    for target, anchor in links:
        if target.startswith("http"):
            continue
        path = ROOT / target
        if target in PENDING and not path.exists():
            continue
        assert path.exists(), target
        if anchor:
            assert anchor in _anchors(path.read_text()), f"{target}#{anchor}"


def _excuse(command: str) -> str | None:
    return next((why for start, why in NOT_HERE.items() if command.startswith(start)), None)


def test_the_readme_starts_with_make_demo_and_make_test():
    lang, body, _ = readme_blocks(README.read_text())[0]
    assert lang == "bash"
    assert [c.split("#")[0].strip() for c in shell_commands(body)] == ["make demo", "make test"]
    # The image the README builds is the one the workflows run by default.
    from elasticdl.runtime.distribution import default_image

    assert f"docker build -t {default_image()} ." in README.read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "demo:" in makefile and "test:" in makefile
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")


@pytest.mark.slow
def test_every_readme_command_runs(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    ran, excused = [], set()
    for lang, body, name in readme_blocks(README.read_text()):
        if name:
            (work / name).write_text(body)
        if lang != "bash":
            continue
        for command in shell_commands(body):
            why = _excuse(command)
            if why:
                excused.add(next(s for s in NOT_HERE if command.startswith(s)))
                continue
            done = subprocess.run(
                ["bash", "-c", f"set -eo pipefail\n{command}"],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            ran.append(command)
    assert excused == set(NOT_HERE), "a NOT_HERE entry matches no README command any more"
    assert len(ran) >= 9, ran

    # What the commands made: a model with its Keras file, which plain Keras loads and which
    # predicts what the predict job wrote.
    report = json.loads((work / "my_model" / "job_report.json").read_text())
    assert report["status"] == "succeeded" and report["keras_file"] == "model.keras"
    rows = []
    for part in sorted((work / "predictions").glob("*.csv")):
        with part.open() as f:
            rows += list(csv.DictReader(f))
    assert len(rows) == 8
    features = [[float(r[c]) for c in ("area", "rooms", "age")] for r in rows]
    plain = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            "import json, sys, keras, numpy as np\n"
            "model = keras.saving.load_model('my_model/model.keras')\n"
            "x = np.asarray(json.loads(sys.argv[1]), dtype=np.float32)\n"
            "print(json.dumps(model.predict(x, verbose=0).reshape(-1).tolist()))\n"
            "assert 'elasticdl' not in sys.modules",
            json.dumps(features),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plain.returncode == 0, plain.stderr[-3000:]
    keras_predictions = json.loads(plain.stdout.strip().splitlines()[-1])
    written = [float(r["prediction"]) for r in rows]
    assert keras_predictions == pytest.approx(written, rel=1e-4, abs=1e-4)
    import sqlite3

    with sqlite3.connect(work / "hr.db") as db:
        filled = db.execute(
            "SELECT COUNT(*) FROM testdata WHERE predicted_salary IS NOT NULL"
        ).fetchone()
    assert filled == (20,)
