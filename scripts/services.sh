#!/usr/bin/env bash
# Makes sure the servers and tools the test suite uses are installed: redis-server (the ledger's
# RedisStore tests), PostgreSQL (its PostgresStore tests) and Chromium (the lab page's
# browser test, tests/lab/test_web.py, which drives the system /usr/bin/chromium through
# Playwright's Python driver; `playwright install` is never used). The tests start their own
# instances on free loopback ports, with no persistence, and stop them at the end
# (tests/ledger/conftest.py); this script only installs what is missing, from Debian's
# packages (CI runs as root). Without root, it says what to install and fails.
#
# Also promtool, Prometheus's rule checker (the alert rules' unit tests,
# tests/telemetry/test_alerts.py): only the binary, taken out of Debian's prometheus package.
# Installing the package itself would add a system user, pull in its web assets and start a
# Prometheus server; the tests need none of that.
#
# And node with npm, which scripts/runtimes.sh installs the agent runtimes with.
#
# Point the tests at servers you already run instead with
#   FAILOVER_TEST_REDIS_URL=redis://127.0.0.1:6379/15
#   FAILOVER_TEST_POSTGRES_DSN=postgresql://user@127.0.0.1:5432/db
# and at a promtool of your own with FAILOVER_TEST_PROMTOOL=/path/to/promtool.
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

# node and npm: scripts/runtimes.sh installs the agent runtimes (Claude Code, Codex) from npm
if ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

need_promtool=0
if [ -z "${FAILOVER_TEST_PROMTOOL:-}" ] && ! command -v promtool >/dev/null 2>&1; then
  need_promtool=1
fi

if [ ${#missing[@]} -eq 0 ] && [ "$need_promtool" = 0 ]; then
  echo "== services: redis-server, postgresql, chromium, promtool and npm are installed"
  exit 0
fi

if [ "$(id -u)" != "0" ]; then
  if [ ${#missing[@]} -gt 0 ]; then
    echo "services.sh: missing ${missing[*]}; install them (Debian: sudo apt-get install -y ${missing[*]})" >&2
    echo "  or set FAILOVER_TEST_REDIS_URL / FAILOVER_TEST_POSTGRES_DSN to servers you run" >&2
    echo "  (and FAILOVER_TEST_CHROMIUM to a Chromium binary)" >&2
  fi
  if [ "$need_promtool" = 1 ]; then
    echo "services.sh: missing promtool; run this script as root, or set FAILOVER_TEST_PROMTOOL to a promtool" >&2
    echo "  (Debian: apt-get download prometheus && dpkg-deb -x prometheus_*.deb x && x/usr/bin/promtool)" >&2
  fi
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

# promtool alone: `apt-get download` fetches Debian's prometheus package without installing it
# (no maintainer script runs: no user, no service, none of its dependencies), and dpkg-deb
# unpacks it into a scratch directory, from which only /usr/bin/promtool is kept.
install_promtool() {
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && apt_get -o APT::Sandbox::User=root download prometheus >/dev/null)
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
  install -m 0755 "$tmp/root/usr/bin/promtool" /usr/local/bin/promtool
  rm -rf "$tmp"
  promtool --version | head -1
}

export DEBIAN_FRONTEND=noninteractive
apt_get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  echo "== services: installing ${missing[*]}"
  apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$need_promtool" = 1 ]; then
  echo "== services: installing promtool (from Debian's prometheus package, the binary only)"
  install_promtool
fi
# The packages' own services stay off (policy-rc.d or no init): the tests run their own.
command -v redis-server >/dev/null 2>&1 || [ -n "${FAILOVER_TEST_REDIS_URL:-}" ] || {
  echo "services.sh: redis-server is still missing after apt-get install" >&2
  exit 1
}
[ -n "${FAILOVER_TEST_CHROMIUM:-}" ] || [ -x /usr/bin/chromium ] || {
  echo "services.sh: chromium is still missing after apt-get install" >&2
  exit 1
}
