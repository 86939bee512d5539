#!/usr/bin/env bash
# `make demo`: one governed release of the bundled sample, end to end, with the embedded
# defaults (SQLite and Prefect state in the per-user home — `ehr-release home` prints it —
# and releases under <releases root>/demo/, ./out/demo/ in a new home).
set -euo pipefail
cd "$(dirname "$0")/.."
CLI=.venv/bin/ehr-release
SAMPLE=examples/demo/patients.csv
# Releases may only land under the site's releases root, stored once for the home (the
# dashboard and every command check the same folder). A new home's is ./out here, unless
# EHR_RELEASE_RELEASES_ROOT says otherwise; an existing home keeps its own.
export EHR_RELEASE_RELEASES_ROOT="${EHR_RELEASE_RELEASES_ROOT:-$PWD/out}"
if ! ROOT=$($CLI policy releases-root 2>/dev/null); then
  unset EHR_RELEASE_RELEASES_ROOT  # the home was set up before: keep its root
  ROOT=$($CLI policy releases-root)
fi
OUT=$ROOT/demo
HOME_DIR=$($CLI home --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["home"])')

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Bundled sample extract: $SAMPLE ($(($(wc -l < "$SAMPLE") - 1)) synthetic patients)"
head -n 3 "$SAMPLE" | cut -c1-110

step "2. The data steward requests a release (disassociation, k=5, m=2)"
RUN=$($CLI run --input "$SAMPLE" --algorithm disassociation --param k=5 --param m=2 \
      --requester steward.sam --out "$OUT" --recipient "Demo Research Group" \
      --purpose "demonstration of a governed release" \
      --terms "no re-identification, no linkage, delete after the demo")
$CLI status "$RUN"
echo "for the reviewer: draft certificate (internal) $HOME_DIR/runs/$RUN/certificate-draft.pdf"
echo "                  draft datasheet (goes with the data) $HOME_DIR/runs/$RUN/datasheet-draft.pdf"

step "3. The steward may not approve their own request"
if $CLI approve "$RUN" --reviewer steward.sam --decision approve --reason "mine"; then
  echo "BUG: self-approval was accepted" >&2; exit 1
fi

step "4. The privacy officer approves; recording the decision publishes the release"
$CLI approve "$RUN" --reviewer privacy.officer --decision approve \
     --reason "k^m-anonymity verified independently; utility acceptable for the study"
ls -l "$OUT/releases/$RUN"

step "5. The release can be re-verified and re-attacked independently"
$CLI verify --algorithm disassociation --release "$OUT/releases/$RUN" --original "$SAMPLE" \
     --param k=5 --param m=2 > "$OUT/reverify-$RUN.json" && echo "guarantee holds (report: $OUT/reverify-$RUN.json)"

step "6. The audit trail is intact and every published file matches its hash"
$CLI audit verify
$CLI audit export --run "$RUN" --format csv | cut -d, -f1,3,4 | column -t -s,

printf '\nRelease %s published in %s/releases/%s (release files, datasheet.pdf, manifest.json);\n' "$RUN" "$OUT" "$RUN"
printf 'the internal certificate is filed at %s/runs/%s/certificate.pdf.\n' "$HOME_DIR" "$RUN"
echo "The local Prefect server keeps running for later commands; stop it with: $CLI server stop"
