#!/usr/bin/env bash
# The main job on the embedded default (local engine), as a SQL user runs it: create a SQLite
# HR database, train regressor.DNN on the employee table with a TRAIN statement (2 workers,
# 1 parameter server), predict the salaries of the testdata table into a new column with a
# PREDICT statement, and show a few rows, the metrics and the job report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
out="${DEMO_OUTPUT:-demo-output}"
rm -rf "$out"
mkdir -p "$out"
db="sqlite:///$out/hr.db"
set -x
elasticdl data sample_db --db "$db"
elasticdl sql "SELECT name, role, years, salary FROM employee
               TRAIN regressor.DNN
               WITH hidden_units=[10, 100, 20, 5], learning_rate=0.01,
                    train.epoch=10, train.batch_size=64, engine.num_workers=2,
                    train.validation.select='SELECT name, role, years, salary FROM employee WHERE id % 10 = 0'
               INTO my_trained_model;" \
  --db "$db" --model_root "$out/models"
elasticdl sql "SELECT name, role, years FROM testdata
               PREDICT testdata.predicted_salary USING my_trained_model;" \
  --db "$db" --model_root "$out/models"
python -P - "$out/hr.db" "$out/models/my_trained_model" <<'PY'
import json, pathlib, sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT name, role, years, salary, predicted_salary FROM testdata").fetchall()
for row in rows[:5]:
    print("%-28s %-16s %2d years  salary %8.2f  predicted %8.2f" % row)
mse = statistics.fmean((r[3] - r[4]) ** 2 for r in rows)
mean = statistics.fmean(r[3] for r in rows)
naive = statistics.fmean((r[3] - mean) ** 2 for r in rows)
print(f"testdata: {len(rows)} rows, MSE {mse:,.0f} vs {naive:,.0f} for predicting the mean")
run = pathlib.Path(sys.argv[2], "LATEST").read_text().strip()  # TRAIN INTO: the newest run
report = json.loads(pathlib.Path(run, "job_report.json").read_text())
print("training:", json.dumps({k: report[k] for k in ("status", "records", "metrics")}))
PY
