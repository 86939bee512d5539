# Sourced by every examples/*/run.sh after it has changed into its own folder: finds the CLI,
# sends releases to the example's folder under the releases root, and stops the local Prefect server on exit
# if this example started it (a server that was already running is left alone).
#
# Overridable: CLI (default <repo>/.venv/bin/ehr-release, made by `make install` or
# `make demo`), OUT (default <releases root>/examples/<example>: releases may only land under
# the site's releases root, `ehr-release policy releases-root`), SHARED_DATA (default
# examples/data: the public data shipped with the examples, licences in its README),
# KEEP_SERVER=1 (leave the local Prefect server running).
# EHR_RELEASE_HOME is not set here: the examples' runs live in the same home as every other
# command and the dashboard. Set it yourself to keep an example's runs apart.

REPO=$(cd ../.. && pwd)
CLI=${CLI:-$REPO/.venv/bin/ehr-release}
SHARED_DATA=${SHARED_DATA:-$REPO/examples/data}
if ! command -v "${CLI%% *}" >/dev/null 2>&1; then
  echo "no CLI at ${CLI%% *}: run 'make install' (or 'make demo') in $REPO first" >&2
  exit 1
fi
# Releases may only land under the site's releases root (stored once for the home, so the
# dashboard and every command check the same folder): by default, a folder under it.
OUT=${OUT:-$($CLI policy releases-root)/examples/$(basename "$PWD")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# The first `run` starts a local Prefect server unless one runs already: stop only ours.
if $CLI server status >/dev/null 2>&1; then SERVER_WAS_RUNNING=1; else SERVER_WAS_RUNNING=0; fi
stop_server() {
  if [ "${KEEP_SERVER:-0}" != 1 ] && [ "$SERVER_WAS_RUNNING" = 0 ]; then
    $CLI server stop >/dev/null 2>&1 || true
  fi
}
trap stop_server EXIT

step() { printf '\n== %s\n' "$*"; }

# request ALGORITHM DATA [run options...]: the steward's request; prints the run id only.
# RUN_FLAGS (e.g. --allow-low-utility) is added to every request.
request() {
  local algorithm=$1 data=$2; shift 2
  # shellcheck disable=SC2086  # RUN_FLAGS holds zero or more options
  $CLI run --input "$data" --algorithm "$algorithm" "$@" --requester steward.sam \
       --out "$OUT" ${RUN_FLAGS:-}
}

# approve RUN: the privacy officer's decision, which publishes the release.
approve() {
  $CLI approve "$1" --reviewer privacy.officer --decision approve \
       --reason "guarantee verified independently; utility acceptable for the study"
  ls "$OUT/releases/$1"
}
