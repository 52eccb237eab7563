#!/usr/bin/env bash
# Installs the agent runtimes the client end-to-end tests drive (tests/runtimes): Claude Code
# and the Codex CLI from npm, at pinned versions, into a cache directory shared by every run
# and every clone: ${FAILOVER_RUNTIMES_DIR:-~/.cache/failover/runtimes}/<versions>. An install
# that is already there is used as it is; a new one is built beside it and renamed into place
# when complete, so a run that is cut off never leaves half an install. Concurrent callers wait
# for one another (flock). The Python runtimes (claude-agent-sdk, openai-agents) are pinned in
# pyproject's test extra instead. Prints the install's directory as its last line.
#
# Bump a version here and the tests use a fresh install; re-capture the runtimes' requests in
# the same change (python -m tests.runtimes.capture: it rewrites tests/inbound/captured/, which
# the parser and gateway tests of tests/inbound/test_captured_requests.py read).
set -euo pipefail

CLAUDE_CODE=2.1.197
CODEX=0.171.0

root=${FAILOVER_RUNTIMES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/failover/runtimes}
dir="$root/claude-code-$CLAUDE_CODE-codex-$CODEX"
mkdir -p "$root"

if ! command -v npm >/dev/null 2>&1; then
  echo "runtimes.sh: npm is missing; scripts/services.sh installs it (Debian: apt-get install -y nodejs npm)" >&2
  exit 1
fi

exec 9>"$root/.lock"
flock 9
if [ ! -f "$dir/.complete" ]; then
  echo "== runtimes: installing @anthropic-ai/claude-code@$CLAUDE_CODE and @openai/codex@$CODEX into $dir" >&2
  tmp=$(mktemp -d "$dir.partial.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # no telemetry, no update check, no funding or audit calls: the package registry only
  DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 npm install --prefix "$tmp" --no-audit --no-fund \
    --no-update-notifier --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_CODE" "@openai/codex@$CODEX" >&2
  "$tmp/node_modules/.bin/claude" --version >&2
  "$tmp/node_modules/.bin/codex" --version >&2
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "$dir"
