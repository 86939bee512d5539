"""Random RT-datasets through ArtUC, ArtUC without constraints and Baseline: every release
must pass the verifier (RmR's own property test is in ``test_rmr.py``).

The verifier shares no code with the algorithms, so agreement on random inputs — and on the
measures both compute (NCP, UL, suppressed codes) — is evidence that neither is wrong.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.artuc import artuc, artuc_unconstrained, baseline, release_files
from ehr_release.configuration.constraints import parse_config, rt_data
from ehr_release.core.errors import ParameterError
from ehr_release.model.dataset import Dataset
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.privacy.kkm import check_kkm, suppressed_occurrences
from ehr_release.utility.artuc import Release, record_ul

CODES = ["001.0", "001.1", "003.0", "250.00", "250.01", "272.4", "401.9", "410.01", "428.0",
         "V45.81"]
ORIGIN = {"All": {"North": ["Oslo", "Riga"], "South": ["Rome", "Nice"]}}
ATTRS = {"age": {"type": "numerical", "domain": [0, 60], "weight": 0.5},
         "origin": {"type": "categorical", "hierarchy": ORIGIN, "weight": 0.3},
         "sex": {"type": "categorical", "hierarchy": {"All": ["F", "M"]}, "weight": 0.2}}
TEMPLATES = [
    [{"name": "bands", "age": {"bands": 20, "from": 0, "to": 60}, "codes": "chapters"}],
    [{"name": "one", "codes": "all"}],
    [{"name": "split", "age": [[0, 29], [30, 60]], "origin": ["North", "South"],
      "codes": "all"}],
]

records = st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["Oslo", "Riga", "Rome", "Nice"]),
                             st.sampled_from(["F", "M"]),
                             st.sets(st.sampled_from(CODES), max_size=5)),
                   min_size=6, max_size=40)


def _dataset(rows):
    demo = pd.DataFrame([r[:3] for r in rows], columns=["age", "origin", "sex"])
    return Dataset.from_records([sorted(r[3]) for r in rows], demo)


def _ambiguous(anon, n: int) -> bool:
    """Whether some record's demographics lie inside two clusters' generalizations."""
    space, boxes = anon.space, [c.box.key() for c in anon.clusters]
    return any(sum(space.join(c.box, space.record_box(row)).key() == box
                   for c, box in zip(anon.clusters, boxes, strict=True)) > 1
               for row in range(n))


#: Found by this property in CI (stop 27): two clusters' generalizations hold the same
#: record, the verifier's matching releases another record than ArtUC did, and recovers 7
#: suppressed occurrences for UL where ArtUC lost 6. Both assignments are truthful; the release
#: cannot say which is ArtUC's, so UL is compared only where the assignment is unique.
OVERCOUNTED = dict(
    rows=[(0, "Oslo", "F", set()), (0, "Riga", "F", set()), (0, "Riga", "F", {"001.0"}),
          (0, "Oslo", "F", set()), (54, "Oslo", "F", {"001.0", "001.1"}),
          (58, "Oslo", "F", {"001.0"}), (31, "Oslo", "F", set()), (0, "Oslo", "F", set()),
          (0, "Oslo", "F", {"001.0"}), (45, "Oslo", "F", {"001.0", "001.1", "401.9"}),
          (0, "Oslo", "F", set()), (15, "Oslo", "F", {"001.0"}), (23, "Oslo", "F", set()),
          (34, "Rome", "M", {"001.0"}),
          (41, "Oslo", "F", {"001.0", "001.1", "250.00", "003.0"}),
          (32, "Oslo", "M", set()),
          (39, "Oslo", "F", {"001.0", "401.9", "001.1", "250.00", "V45.81"}),
          (49, "Oslo", "F", {"001.0", "001.1", "003.0"}), (13, "Oslo", "F", set()),
          (27, "Oslo", "M", set()), (58, "Oslo", "F", set()), (0, "Nice", "F", set()),
          (50, "Oslo", "F", set())],
    template=0, k=2, m=1, delta=0.2, seed=1)


@settings(max_examples=40, deadline=None, derandomize=True)
@example(**OVERCOUNTED)
@given(rows=records, template=st.sampled_from(range(len(TEMPLATES))), k=st.integers(2, 3),
       m=st.integers(1, 2), delta=st.floats(0.2, 1.0), seed=st.integers(0, 2**16))
@example(rows=[(0, "Oslo", "F", set())] * 5 + [(0, "Rome", "F", set()),
                                                (0, "Oslo", "F", {"001.0"}),
                                                (1, "Oslo", "F", {"001.0"})],
         template=0, k=2, m=1, delta=0.25, seed=1)  # two clusters publish equal demographics
def test_every_release_verifies_and_measures_agree(rows, template, k, m, delta, seed) -> None:
    ds = _dataset(rows)
    cfg = parse_config({"attributes": ATTRS, "constraints": TEMPLATES[template]},
                       lambda ref: icd9_hierarchy())
    data = rt_data(ds, cfg)
    runs = {"artuc-baseline": lambda: baseline(data, cfg, k=k, m=m, epsilon=1e9)}
    for name, algo in (("artuc", artuc), ("artuc-unconstrained", artuc_unconstrained)):
        runs[name] = lambda algo=algo: algo(data, cfg, k=k, m=m, delta=delta, epsilon=1e9,
                                            rng=np.random.default_rng(seed))
    for name, run in runs.items():
        try:
            anon = run()
        except ParameterError as exc:  # Step 16: the k-clustering alone exceeds δ
            assert exc.parameter == "delta" and name != "artuc-baseline"
            continue
        files = release_files(anon)
        # ε = the anonymizer's own count. The verifier sees only the release: where a
        # record's demographics fall inside more than one cluster's generalization (equal or
        # overlapping) it cannot tell which record went where, so an honest release must hold
        # whichever truthful assignment its matching starts from (when that one exceeds ε it
        # solves for the least-suppressing one; OVERCOUNTED is a case).
        report = check_kkm(files, ds, cfg, algorithm=name, k=k, m=m,
                            delta=None if name == "artuc-baseline" else delta,
                            epsilon=anon.suppressed_codes,
                            constrained=name != "artuc-unconstrained")
        assert report.holds, (name, report.failures)
        reqs = {r.name: r for r in report.requirements}
        assert reqs["suppression bound ε"].evidence["suppressed_codes"] <= anon.suppressed_codes
        # Σ s(r) is not published: recovered from the matching's assignment, a complete
        # truthful one — the anonymizer's own where only one fits.
        lost = suppressed_occurrences(files, data, cfg)
        own = sum(round(g.ul_suppression) for g in anon.codes)
        if not _ambiguous(anon, len(rows)):
            assert reqs["suppression bound ε"].evidence["suppressed_codes"] \
                == anon.suppressed_codes
            assert lost == own
        if name != "artuc-baseline":
            assert reqs["NCP bound δ"].evidence["ncp"] == pytest.approx(anon.ncp)
            assert anon.ncp <= delta + 1e-9
        gen = record_ul(Release.parse(files))  # UL's generalization part agrees exactly
        assert (float(gen.mean()) + own / len(gen) if len(gen) else 0.0) == pytest.approx(anon.ul)
        assert anon.released + len(anon.suppressed_rows) == len(rows)


@settings(max_examples=15, deadline=None)
@given(rows=records, seed=st.integers(0, 2**16))
def test_same_seed_same_bytes(rows, seed) -> None:
    ds = _dataset(rows)
    cfg = parse_config({"attributes": ATTRS, "constraints": TEMPLATES[1]},
                       lambda ref: icd9_hierarchy())
    data = rt_data(ds, cfg)
    first, second = (release_files(artuc(data, cfg, k=2, m=2, delta=1.0, epsilon=1e9,
                                     rng=np.random.default_rng(seed))) for _ in range(2))
    assert first == second


def test_a_release_with_every_group_suppressed_has_no_class_to_fail() -> None:
    """Found by the property above: three pairs of records, k = 3, Baseline suppresses all
    of them (Step 2); the verifier used to report a class of 0 records and fail."""
    rows = [(0, "Oslo", "F", set())] * 2 + [(20, "Oslo", "F", set())] * 2 \
        + [(40, "Oslo", "F", set())] * 2
    ds = _dataset(rows)
    cfg = parse_config({"attributes": ATTRS, "constraints": TEMPLATES[0]},
                       lambda ref: icd9_hierarchy())
    anon = baseline(rt_data(ds, cfg), cfg, k=3, m=2, epsilon=1e9)
    assert anon.released == 0
    report = check_kkm(release_files(anon), ds, cfg, algorithm="artuc-baseline",
                        k=3, m=2, delta=None, epsilon=1e9, constrained=True)
    assert report.holds, report.failures
    reqs = {r.name: r for r in report.requirements}
    assert reqs["k-anonymity of the demographics alone"].evidence["smallest_class"] is None
