"""The (k, k^m) verifier against a brute-force checker written here, on random releases.

Random releases are derived from the worked example's honest ArtUC release by keeping a
random subset of records, moving records into other clusters (taking their demographics)
and dropping generalized codes — each keeps the release well-formed, so the privacy
requirements are always evaluated, and each can make them fail. The oracle regroups the
records by identical demographics and counts every itemset of ≤ m generalized codes.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.artuc import artuc, release_files
from ehr_release.configuration.constraints import rt_data
from ehr_release.privacy.kkm import check_kkm
from tests.kkm_release import read_records, to_files
from tests.test_artuc_worked_example import SEED, worked_example

K, M = 2, 2


@pytest.fixture(scope="module")
def honest():
    ds, cfg = worked_example()
    anon = artuc(rt_data(ds, cfg), cfg, k=K, m=M, delta=0.6, epsilon=2,
                 rng=np.random.default_rng(SEED))
    return ds, cfg, read_records(release_files(anon))


def _supports_ok(records: list[dict], k: int, m: int) -> bool:
    """Every ≤ m-itemset of generalized codes present in ``records`` has support ≥ k."""
    counts: Counter[tuple] = Counter()
    for r in records:
        items = sorted({tuple(sorted(code)) for code in r["codes"]})
        for size in range(1, min(m, len(items)) + 1):
            counts.update(combinations(items, size))
    return all(n >= k for n in counts.values())


def brute_force(records: list[dict], k: int, m: int) -> dict[str, bool]:
    classes: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        classes[json.dumps(r["demographics"], sort_keys=True)].append(r)
    sizes_ok = all(len(c) >= k for c in classes.values())
    return {
        "(k, k^m)-anonymity": sizes_ok and all(_supports_ok(c, k, m) for c in classes.values()),
        "k-anonymity of the demographics alone": sizes_ok,
        "k^m-anonymity of the codes alone": _supports_ok(records, k, m),
    }


@st.composite
def mutated(draw, n: int):
    keep = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    moves = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                          max_size=3))
    drops = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 5)), max_size=4))
    return sorted(keep), moves, drops


def test_verifier_agrees_with_brute_force(honest) -> None:
    """The verdicts agree on every random release, and both verdicts are seen often
    (counted here, so the test stands alone in any order or selection)."""
    seen: Counter[str] = Counter()

    @settings(max_examples=300, deadline=None)
    @given(data=st.data())
    def agrees(data) -> None:
        seen[_check(honest, data)] += 1

    agrees()
    assert seen["accepted"] >= 10 and seen["rejected"] >= 10, seen


def _check(honest, data) -> str:
    """Assert the verifier's verdicts are the oracle's; say which verdict it was."""
    ds, cfg, base = honest
    keep, moves, drops = data.draw(mutated(len(base)))
    records = [json.loads(json.dumps(r)) for r in base]
    for target, source in moves:  # a record joins another record's cluster
        records[target]["cluster"] = base[source]["cluster"]
        records[target]["demographics"] = dict(base[source]["demographics"])
    for i, j in drops:
        codes = records[i]["codes"]
        if codes:
            del codes[j % len(codes)]
    records = [records[i] for i in keep]
    report = check_kkm(to_files(records, canonical=True), ds, cfg, algorithm="artuc", k=K, m=M,
                        delta=0.6, epsilon=2, constrained=True)
    found = {r.name: r.passed for r in report.requirements}
    for name, expected in brute_force(records, K, M).items():
        assert found[name] == expected, (name, records)
    return "accepted" if found["(k, k^m)-anonymity"] else "rejected"
