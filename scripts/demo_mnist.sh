#!/usr/bin/env bash
# Train the mnist model on real handwritten digits (three files) as an elastic job with 2
# workers and 1 parameter server, evaluated on the fourth, then evaluate and predict with the
# trained model on the held-out file, and show what the jobs wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
out="${DEMO_OUTPUT:-demo-output}/mnist"
rm -rf "$out"
mkdir -p "$out"
set -x
elasticdl data gen digits --output "$out/digits" --num_records 4000 --records_per_file 1000
elasticdl data inspect "$out/digits"
elasticdl train \
  --model_def mnist.mnist_functional_api.custom_model \
  --params "lr=0.05" \
  --data "$out/digits/digits-0000[0-2]-of-00004.recordio" \
  --validation_data "$out/digits/digits-00003-of-00004.recordio" \
  --output "$out/mnist-model" \
  --num_workers 2 --num_ps 1 \
  --minibatch_size 32 --num_epochs 4 --records_per_task 250 \
  --log_dir "$out/job-logs"
elasticdl evaluate --data "$out/digits/digits-00003-of-00004.recordio" \
  --trained_model "$out/mnist-model" --num_workers 2 --records_per_task 250
elasticdl predict --data "$out/digits/digits-00003-of-00004.recordio" \
  --trained_model "$out/mnist-model" --output "$out/predictions" --output_format csv \
  --num_workers 2 --records_per_task 250
ls "$out/predictions"
head -3 "$out"/predictions/part-00000-0000000000-*.csv | cut -c1-120
