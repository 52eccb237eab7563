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

echo "== services"
./scripts/services.sh
# The agent runtimes the client end-to-end tests drive (tests/runtimes), pinned and cached
# outside the clone: installed in the background while the checks below run; the tests wait
# for it (scripts/runtimes.sh takes a lock) and fail with its log if it failed.
mkdir -p .cache
./scripts/runtimes.sh >.cache/runtimes.log 2>&1 &

echo "== ruff"
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
echo "== mypy --strict"
.venv/bin/mypy
echo "== pytest: two workers (a test file stays on one), then the serial tests alone"
# The serial tests time a served event loop, run and kill fleets of processes, or fuzz with
# schemathesis (the `serial` marker, tests/conftest.py); beside another worker they could fail.
# Where they are (tests/conftest.py SERIAL, kept in step by tests/test_runner.py): the serial
# run collects only these when no paths are given.
SERIAL=(tests/hostile tests/fleet tests/ledger/test_crash.py tests/state/test_redis.py tests/gateway/test_openapi.py)
status=0
# The agent-runtime tests (tests/runtimes) spend their time waiting on the runtimes' own
# processes and on real-time sleeps (a 60 s outage): with no paths given they run as a third
# process beside the two workers, and are done before the serial tests start. (At a lower CPU
# priority they outlasted the workers by a minute: the whole run took longer.)
runtimes=""
if [ "$#" -eq 0 ]; then
  .venv/bin/pytest -q -p no:cacheprovider tests/runtimes >.cache/runtimes-tests.log 2>&1 &
  runtimes=$!
  set -- --ignore=tests/runtimes
fi
.venv/bin/pytest -q -p no:cacheprovider -n 2 --dist loadfile -m "not serial" "$@" || status=$?
if [ -n "$runtimes" ]; then
  echo "== pytest: the agent runtimes (run beside the workers)"
  wait "$runtimes" || status=$?
  cat .cache/runtimes-tests.log
  set --
fi
if [ "$#" -eq 0 ]; then set -- "${SERIAL[@]}"; fi
.venv/bin/pytest -q -p no:cacheprovider -m serial "$@" || { s=$?; [ "$s" -eq 5 ] || status=$s; }  # 5: none selected
exit "$status"
