#!/usr/bin/env bash
# The main job on the embedded default: generate real handwritten digits as sharded RecordIO,
# inspect them, plan the training tasks, and resolve the mnist model that trains on them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
out="${DEMO_OUTPUT:-demo-output}"
rm -rf "$out/digits"
set -x
elasticdl data gen digits --output "$out/digits" --num_records 5000 --records_per_file 2000
elasticdl data inspect "$out/digits/*.recordio"
elasticdl data plan "$out/digits" --records_per_task 1024
elasticdl zoo --model_def mnist.mnist_functional_api.custom_model --params "lr=0.05"
