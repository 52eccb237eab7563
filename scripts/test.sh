#!/usr/bin/env bash
# Installs the project with its test extras into .venv and runs everything CI runs:
# ruff, mypy --strict, and the whole pytest suite. Safe to run on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'

# tiktoken encodings: use the workspace's offline copy when present (CI has no network
# beyond the package registries); users online download them as tiktoken normally does.
if [ -z "${TIKTOKEN_CACHE_DIR:-}" ] && [ -d ../shared/tiktoken ]; then
  export TIKTOKEN_CACHE_DIR="$(cd ../shared/tiktoken && pwd)"
fi

echo "== ruff"
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
echo "== mypy --strict"
.venv/bin/mypy
echo "== services"
./scripts/services.sh
echo "== pytest"
.venv/bin/pytest -q -p no:cacheprovider "$@"
