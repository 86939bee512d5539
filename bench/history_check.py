"""Benchmark of the release-history check (issue 31): 100 earlier releases of one source.

Goal: judging a new release with its history costs no more than the new release's own
verification. The source is a generated extract of ``--patients`` patients; the history is
``--earlier`` earlier releases (disassociation k=5 m=2) parked in a fresh home: most are
releases of random halves of the source (they overlap the new extract by thousands of
patients on each side: linked, not differencing pairs), and ``--differencing`` of them are
the whole extract minus 1, 2, … patients (differencing pairs, which the history attack
reads byte for byte). Distinct releases are made once and their bytes parked under each run
that shares them, so the table times the check, not the making of a hundred releases.

Prints one table: linkage (hashing the new extract), the history check (overlap with every
earlier release, the weakening rule, the attack on the differencing pairs), and the new
release's own verification (closed world, model, source ids), with their ratio.

Usage: ``python bench/history_check.py [--patients 100000] [--earlier 100]
[--differencing 3]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("EHR_RELEASE_HOME", tempfile.mkdtemp(prefix="ehr-bench-history-"))
os.environ.setdefault("EHR_RELEASE_TEST_MODE", "1")

from ehr_release import registry  # noqa: E402
from ehr_release.core.files import sha256_bytes  # noqa: E402
from ehr_release.history.checks import check_history  # noqa: E402
from ehr_release.history.linkage import link_patients  # noqa: E402
from ehr_release.model.dataset import Dataset  # noqa: E402
from ehr_release.release.bundle import candidate_dir  # noqa: E402
from ehr_release.release.verification import verify_release  # noqa: E402
from ehr_release.samples.sample import generate_sample  # noqa: E402
from ehr_release.storage import links, runs  # noqa: E402
from ehr_release.storage.models import DatasetRecord  # noqa: E402
from ehr_release.storage.runs import Status  # noqa: E402

PARAMS = {"k": "5", "m": "2", "seed": "1"}
PARKED = [Status.ANONYMIZED, Status.VERIFIED, Status.EVALUATED, Status.CERTIFIED,
          Status.AWAITING_APPROVAL]


def _subset(d: Dataset, keep: list[str]) -> Dataset:
    return Dataset(d.patients.loc[keep],
                   d.diagnoses[d.diagnoses["patient_id"].isin(set(keep))].reset_index(
                       drop=True))


def _release(d: Dataset) -> dict[str, bytes]:
    entry = registry.get("disassociation")
    return entry.anonymize(d, entry.parse(PARAMS), np.random.default_rng(1))


def _park(d: Dataset, files: dict[str, bytes]) -> None:
    record = DatasetRecord(fingerprint=d.fingerprint(), rows=d.n_patients,
                           codes=len(d.diagnoses), columns_json="{}", source="bench")
    run_id = runs.create_run(run_id=runs.new_run_id(), dataset=record, requester="steward",
                             algorithm="disassociation", parameters=PARAMS,
                             out_dir="/tmp").id
    links.save_links(run_id, links.RUN, "default", link_patients(d, "default"))
    runs.pin_candidate(run_id, {n: (sha256_bytes(b), len(b)) for n, b in files.items()})
    folder = candidate_dir(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    for status in PARKED:
        runs.transition(run_id, status, actor="bench")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--patients", type=int, default=100_000)
    ap.add_argument("--earlier", type=int, default=100)
    ap.add_argument("--differencing", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    source = generate_sample(args.patients, seed=4)
    ids = source.patient_ids
    made = time.perf_counter() - t
    print(f"source: {args.patients:,} patients, {len(source.diagnoses):,} codes "
          f"(generated in {made:.1f} s)", file=sys.stderr)
    halves = [_subset(source, sorted(rng.choice(ids, len(ids) // 2, replace=False)))
              for _ in range(2)]
    half_files = [_release(h) for h in halves]
    for i in range(args.earlier - args.differencing):
        _park(halves[i % 2], half_files[i % 2])
    for j in range(1, args.differencing + 1):
        minus = _subset(source, ids[j:])
        _park(minus, _release(minus))
    print(f"history parked in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    files = _release(source)
    entry = registry.get("disassociation")
    parsed = entry.parse(PARAMS)
    t = time.perf_counter()
    new_links = link_patients(source, "default")
    linkage = time.perf_counter() - t
    t = time.perf_counter()
    verdict = check_history("rel-" + "f" * 32, "disassociation", parsed, files, new_links)
    history = time.perf_counter() - t
    t = time.perf_counter()
    report = verify_release(entry, files, source, parsed, "rel-" + "f" * 32)
    verification = time.perf_counter() - t
    assert verdict is not None and report.holds
    print("| patients | earlier | differencing pairs | linkage s | history check s | "
          "verification s | (linkage+history)/verification | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.patients:,} | {len(verdict.earlier)} | {len(verdict.differencing)} | "
          f"{linkage:.2f} | {history:.2f} | {verification:.2f} | "
          f"{(linkage + history) / verification:.2f} | "
          f"{'holds' if verdict.holds else 'refused'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
