#!/usr/bin/env bash
# DiffGen (ε-differential privacy for classification) on UCI Adult, ε = 1, h = 10, through the
# whole governed flow: prepare adult.csv → request → independent verification and attack
# audit → utility (the paper's accuracy protocol, 10 runs) → certificate → approval
# publishes → re-verify → audit check.
# Needs `make install` (or `make demo`) first. Overridable: DATA (a wide CSV with an
# `income` column; default adult.csv, written by prepare.py from $SHARED_DATA/adult when
# missing), OUT, CLI, RUN_FLAGS, KEEP_SERVER=1; see ../common.sh.
set -euo pipefail
cd "$(dirname "$0")"
source ../common.sh
DATA=${DATA:-adult.csv}
PARAMS=(--param epsilon=1 --param h=10 --param score=max --param taxonomies=adult)

if [ ! -f "$DATA" ]; then
  step "prepare $DATA from $SHARED_DATA/adult"
  "$REPO/.venv/bin/python" prepare.py "$SHARED_DATA/adult" "$DATA"
fi

step "the steward requests a release (diffgen, ε=1, h=10; stops at awaiting_approval)"
RUN=$(request diffgen "$DATA" --class-column income "${PARAMS[@]}")
$CLI status "$RUN"

step "the privacy officer approves; the decision publishes the release"
approve "$RUN"

step "anyone re-verifies the published release"
$CLI verify --algorithm diffgen --release "$OUT/releases/$RUN" --original "$DATA" \
     --class-column income "${PARAMS[@]}" > "$OUT/reverify-$RUN.json"
echo "holds (report: $OUT/reverify-$RUN.json)"

step "audit trail intact, published files unchanged"
$CLI audit verify
echo "published: $OUT/releases/$RUN"
