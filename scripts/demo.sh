#!/usr/bin/env bash
# The main job on the embedded default (local engine): generate real handwritten digits as
# sharded RecordIO, then train the mnist model on them as an elastic job with 2 workers and
# 1 parameter server, and show what the job wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
out="${DEMO_OUTPUT:-demo-output}"
rm -rf "$out"
mkdir -p "$out"
set -x
elasticdl data gen digits --output "$out/digits" --num_records 4000 --records_per_file 1000
elasticdl data inspect "$out/digits"
elasticdl train \
  --model_def mnist.mnist_functional_api.custom_model \
  --params "lr=0.05" \
  --data "$out/digits" \
  --output "$out/mnist-model" \
  --num_workers 2 --num_ps 1 \
  --minibatch_size 32 --num_epochs 2 --records_per_task 250 \
  --log_dir "$out/job-logs"
ls "$out/mnist-model"
python -P -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({k: r[k] for k in ('status','records','workers','throughput','final_loss')}, indent=1, default=str)[:1500])" "$out/mnist-model/job_report.json"
