#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv with everything the product
# and its tests need. Safe to run again: pip skips what is installed already.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
      PYTHON="$candidate"
      break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  echo "setup: need Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

if ! command -v git >/dev/null 2>&1; then
  echo "setup: installing git (model zoos may be git repositories)"
  apt-get update -qq && apt-get install -y -qq git >/dev/null
fi

# PostgreSQL and MariaDB servers for the SQL tests (Debian packages; skipped when installed).
# The demo needs only SQLite: scripts/test.sh asks for the servers.
if [ "${ELASTICDL_SETUP_DB_SERVERS:-0}" = "1" ]; then
  scripts/install_db_servers.sh
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # The project's dependencies and the dev extra, with TensorFlow as `tensorflow-cpu` (274 MB)
  # instead of the declared `tensorflow` (572 MB: it carries the CUDA kernels): the same
  # version and code, half the download on every fresh machine (CI). Then the project itself,
  # editable, without resolving its dependencies again (pip would fetch `tensorflow`).
  .venv/bin/python - >.venv/requirements-dev.txt <<'PY'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
    print(re.sub(r"^tensorflow(?=[=<>~!\[ ]|$)", "tensorflow-cpu", requirement))
PY
  .venv/bin/python -m pip install --quiet -r .venv/requirements-dev.txt
  # The project installed as `elasticdl` before it took the name elasticdl-argo (and PyPI's
  # `elasticdl` is ElasticDL 0.2): neither may stay beside it.
  .venv/bin/python -m pip uninstall --quiet --yes elasticdl 2>/dev/null || true
  .venv/bin/python -m pip install --quiet --no-deps -e .
  # Keras 2 model files (the keras2 extra) without tf_keras's `tensorflow` requirement:
  # tensorflow-cpu provides it.
  .venv/bin/python -m pip install --quiet --no-deps 'tf_keras==2.21.*'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
