"""The disassociation attack's vectorized reading (issue 37 goal 5) against plain loops.

The attack lost its loops over clusters, joint clusters and patients (items and joint
members as CSR, one lookup per run of a patient's rows); each vectorized form here is checked
against the loop it replaced, written out plainly, on releases that hold joint clusters.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release import registry
from ehr_release.model.dataset import CODE, PATIENT_ID, Dataset
from ehr_release.privacy.attacks.disassociation import candidates, original, positions, release
from ehr_release.privacy.attacks.disassociation.arrays import ranges, tiled
from ehr_release.samples.sample import generate_sample


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=4), max_size=8),
       st.lists(st.integers(0, 3), min_size=8, max_size=8))
def test_tiled_and_ranges_are_the_loops(rows, times):
    times = np.array(times[:len(rows)], dtype=np.int64)
    indptr = np.r_[0, np.cumsum([len(x) for x in rows])].astype(np.int64)
    values = np.array([v for x in rows for v in x], dtype=np.int64)
    run, got = tiled(indptr, values, times)
    assert got.tolist() == [v for x, t in zip(rows, times, strict=True) for _ in range(t)
                            for v in x]
    assert run.tolist() == [i for i, (x, t) in enumerate(zip(rows, times, strict=True))
                            for _ in range(t * len(x))]
    lengths = [len(x) for x in rows]
    run, offset = ranges(np.array(lengths, dtype=np.int64))
    assert list(zip(run.tolist(), offset.tolist(), strict=True)) == \
        [(i, j) for i, n in enumerate(lengths) for j in range(n)]


@pytest.fixture(scope="module", params=[(300, 5, 3), (2000, 2, 2)])
def read(request):
    n, seed, k = request.param
    entry = registry.get("disassociation")
    dataset = generate_sample(n, seed=seed)
    files = entry.anonymize(dataset, entry.parse({"k": str(k), "m": "2"}),
                            np.random.default_rng(seed))
    names, _, _ = original.original_records(dataset)
    r = release.read_release(files["release.parquet"], names)
    assert r.n_joints > 0 and r.unit_shared.any()     # the joint paths are exercised
    return r


def test_joint_members_and_items_read_as_the_loops_would(read):
    r = read
    for j in range(r.n_joints):
        assert r.members_of(j).tolist() == np.flatnonzero(r.joint_of == j).tolist()
    assert sum(len(r.items_of(p)) for p in range(len(r.size))) == len(r.item_codes)


def test_domain_is_the_loop_over_clusters(read):
    """Every cluster's domain: its record chunks' codes, its joint cluster's shared codes
    (each with its support in the chunk) and its item codes (valued |P|)."""
    r = read
    d = candidates.build_domain(r)
    lengths = np.diff(r.sub_indptr)
    support: dict[tuple[int, int], int] = {}
    for s, u in enumerate(r.sub_unit.tolist()):
        for t in r.sub_codes[r.sub_indptr[s]:r.sub_indptr[s] + lengths[s]].tolist():
            support[(u, t)] = support.get((u, t), 0) + 1
    expected = []
    for (u, t), n in support.items():
        owner = int(r.unit_owner[u])
        holders = r.members_of(owner).tolist() if r.unit_shared[u] else [owner]
        expected += [(p, t, u, n) for p in holders]
    for p in range(len(r.size)):
        expected += [(p, t, -1, int(r.size[p])) for t in r.items_of(p).tolist()]
    got = list(zip(d.cluster.tolist(), d.code.tolist(), d.unit.tolist(), d.value.tolist(),
                   strict=True))
    assert got == sorted(expected)


def test_positions_of_shared_subrecords_follow_the_members(read):
    r = read
    got = positions.positions_of(r, r.sub_pos)
    for s, u in enumerate(r.sub_unit.tolist()):
        owner, at = int(r.unit_owner[u]), int(r.sub_pos[s])
        if not r.unit_shared[u]:
            assert got[s] == r.base[owner] + at
            continue
        laid = [int(r.base[p]) + i for p in r.members_of(owner).tolist()
                for i in range(int(r.size[p]))]
        assert got[s] == laid[at]


def _plain_records(dataset: Dataset):
    diag = dataset.diagnoses
    rec = dataset.patients.index.get_indexer(diag[PATIENT_ID])
    code, names = pd.factorize(diag[CODE].astype(str), sort=True)
    rows = {}
    for r, c in zip(rec.tolist(), code.tolist(), strict=True):
        if r >= 0:
            rows.setdefault(r, set()).add(c)
    return [str(x) for x in names], [sorted(rows.get(i, ())) for i in range(dataset.n_patients)]


@pytest.mark.parametrize("shape", ["grouped", "shuffled", "numbers", "unknown patient"])
def test_original_records_match_the_plain_lookup(shape):
    dataset = generate_sample(200, seed=3)
    diag = dataset.diagnoses
    if shape == "shuffled":
        diag = diag.sample(frac=1.0, random_state=1)
    elif shape == "numbers":
        diag = diag.assign(**{CODE: np.arange(len(diag)) % 17})
    elif shape == "unknown patient":
        diag = diag.copy()
        diag.iloc[::7, diag.columns.get_loc(PATIENT_ID)] = "nobody"
    dataset = Dataset(dataset.patients, diag.reset_index(drop=True), source="test")
    names, indptr, codes = original.original_records(dataset)
    plain_names, plain_rows = _plain_records(dataset)
    assert names == plain_names
    assert [codes[indptr[i]:indptr[i + 1]].tolist() for i in range(len(plain_rows))] == \
        plain_rows
