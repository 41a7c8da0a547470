#!/usr/bin/env bash
# Set everything up and run the whole test suite (what CI runs). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ELASTICDL_SETUP_DB_SERVERS=1 scripts/setup.sh
. .venv/bin/activate
echo "== ruff"
ruff check .
ruff format --check .
echo "== pytest"
# The slowest tests are listed at the end: where the 30-minute budget goes.
python -P -m pytest -q -p no:cacheprovider --durations=30 "$@"
