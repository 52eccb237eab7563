#!/usr/bin/env bash
# Makes sure the servers the test suite talks to are installed: redis-server (the ledger's
# RedisStore tests), PostgreSQL (its PostgresStore tests) and Chromium (the lab page's
# browser test, tests/lab/test_web.py, which drives the system /usr/bin/chromium through
# Playwright's Python driver; `playwright install` is never used). The tests start their own
# instances on free loopback ports, with no persistence, and stop them at the end
# (tests/ledger/conftest.py); this script only installs what is missing, from Debian's
# packages (CI runs as root). Without root, it says what to install and fails.
#
# Point the tests at servers you already run instead with
#   FAILOVER_TEST_REDIS_URL=redis://127.0.0.1:6379/15
#   FAILOVER_TEST_POSTGRES_DSN=postgresql://user@127.0.0.1:5432/db
set -euo pipefail

have_postgres() {
  command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

missing=()
if [ -z "${FAILOVER_TEST_REDIS_URL:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
  missing+=(redis-server)
fi
if [ -z "${FAILOVER_TEST_POSTGRES_DSN:-}" ] && ! have_postgres; then
  missing+=(postgresql)
fi

if [ -z "${FAILOVER_TEST_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "== services: redis-server, postgresql and chromium are installed"
  exit 0
fi

if [ "$(id -u)" != "0" ]; then
  echo "services.sh: missing ${missing[*]}; install them (Debian: sudo apt-get install -y ${missing[*]})" >&2
  echo "  or set FAILOVER_TEST_REDIS_URL / FAILOVER_TEST_POSTGRES_DSN to servers you run" >&2
  echo "  (and FAILOVER_TEST_CHROMIUM to a Chromium binary)" >&2
  exit 1
fi

# apt may be busy (a boot-time upgrade, another install): wait for its locks, and retry a step
# that failed meanwhile, for up to 15 minutes, instead of failing the run.
apt_get() {
  local try
  for try in $(seq 1 30); do
    if apt-get -o DPkg::Lock::Timeout=30 "$@"; then
      return 0
    fi
    echo "services.sh: apt-get $1 failed (apt busy?); try $try of 30, again in 10 s" >&2
    sleep 10
  done
  return 1
}

echo "== services: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The packages' own services stay off (policy-rc.d or no init): the tests run their own.
command -v redis-server >/dev/null 2>&1 || [ -n "${FAILOVER_TEST_REDIS_URL:-}" ] || {
  echo "services.sh: redis-server is still missing after apt-get install" >&2
  exit 1
}
[ -n "${FAILOVER_TEST_CHROMIUM:-}" ] || [ -x /usr/bin/chromium ] || {
  echo "services.sh: chromium is still missing after apt-get install" >&2
  exit 1
}
