#!/usr/bin/env bash
# DiffGen (ε-differential privacy for classification) on the MIMIC-III demo, ε = 1, h = 5,
# through the whole governed flow: request → independent verification and attack audit →
# utility (the paper's accuracy protocol) → certificate → approval publishes → re-verify →
# audit check.
# On 100 patients at ε = 1 the noise dominates every count, so the classifier trained on the
# release is no better than always guessing the majority class (alive): the flow refuses such
# a release unless waived. This example waives it (--allow-low-utility) to show the flow, the
# ε ledger and the verification; the certificate prints the waiver for the reviewer.
# Needs `make install` (or `make demo`) first. Overridable: DATA (MIMIC-III folder), OUT,
# CLI, RUN_FLAGS (default --allow-low-utility), KEEP_SERVER=1; see ../common.sh.
set -euo pipefail
cd "$(dirname "$0")"
source ../common.sh
DATA=${DATA:-$SHARED_DATA/mimic3-demo}
RUN_FLAGS=${RUN_FLAGS---allow-low-utility}
PARAMS=(--param epsilon=1 --param h=5 --param score=max --param taxonomies=mimic-demo)

step "the steward requests a release (diffgen, ε=1, h=5; stops at awaiting_approval)"
RUN=$(request diffgen "$DATA" "${PARAMS[@]}")
$CLI status "$RUN"

step "the privacy officer approves; the decision publishes the release"
approve "$RUN"

step "anyone re-verifies the published release"
$CLI verify --algorithm diffgen --release "$OUT/releases/$RUN" --original "$DATA" \
     "${PARAMS[@]}" > "$OUT/reverify-$RUN.json"
echo "holds (report: $OUT/reverify-$RUN.json)"

step "audit trail intact, published files unchanged"
$CLI audit verify
echo "published: $OUT/releases/$RUN"
