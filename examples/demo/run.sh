#!/usr/bin/env bash
# Disassociation (k^m-anonymity of diagnosis codes) on the bundled synthetic sample, through
# the whole governed flow: request → independent verification and attack audit → utility →
# certificate → self-approval refused → approval publishes → re-verify → audit check.
# Needs `make install` (or `make demo`) first. Overridable: DATA (wide CSV), OUT, CLI, K, M,
# KEEP_SERVER=1; see ../common.sh.
set -euo pipefail
cd "$(dirname "$0")"
source ../common.sh
DATA=${DATA:-patients.csv}
K=${K:-5}
M=${M:-2}

step "the steward requests a release (disassociation, k=$K, m=$M; stops at awaiting_approval)"
RUN=$(request disassociation "$DATA" --param "k=$K" --param "m=$M" \
      --recipient "Demo Research Group" --purpose "demonstration of a governed release" \
      --terms "no re-identification, no linkage, delete after the demo")
$CLI status "$RUN"

step "the steward may not approve their own request"
if $CLI approve "$RUN" --reviewer steward.sam --decision approve --reason "mine" 2>/dev/null
then
  echo "BUG: self-approval was accepted" >&2
  exit 1
fi
echo "refused, as it must be"

step "the privacy officer approves; the decision publishes the release"
approve "$RUN"

step "anyone re-verifies the published release"
$CLI verify --algorithm disassociation --release "$OUT/releases/$RUN" --original "$DATA" \
     --param "k=$K" --param "m=$M" > "$OUT/reverify-$RUN.json"
echo "holds (report: $OUT/reverify-$RUN.json)"

step "audit trail intact, published files unchanged"
$CLI audit verify
echo "published: $OUT/releases/$RUN"
