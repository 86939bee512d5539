"""LDA utility measures added for issue 19: ILM/ALM as A-GS accounts them, and the thesis'
shares of ICD codes kept at 3-digit level or finer and of ages kept in blocks ≤ 16 years."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.lda import AgeTree, anonymize_trajectories, make_model
from ehr_release.algorithms.lda.align import ags_align
from ehr_release.algorithms.lda.anonymize import encode
from ehr_release.algorithms.lda.loss import dataset_loss
from ehr_release.model.hierarchy import Hierarchy, icd9_hierarchy
from ehr_release.utility.lda import (
    ags_loss,
    evaluate_trajectories,
    kept_shares,
    level_histograms,
)

# The spec's worked example (thesis §IV.3.1 text, Figures 5–6): ICD 401 → {401.0, 401.1,
# 401.9}; ages 33–40 as a binary tree.
TOY = Hierarchy(parent={"401.0": "401", "401.1": "401", "401.9": "401"},
                level={"401": 0, "401.0": 1, "401.1": 1, "401.9": 1}, root="401")
X = [("401.1", 34), ("401.1", 35), ("401.1", 37)]
Y = [("401.1", 34), ("401.1", 36)]
CODES = ["401.0", "401.1", "401.9"]


def toy_model(w_icd: float = 0.5, leaf_count: int = 0):
    return make_model(TOY, CODES, w_icd=w_icd, w_age=1 - w_icd, leaf_count=leaf_count,
                      ages=AgeTree(first=33, depth=3))


def nodes(model, published):
    """Published (code, (lo, hi)) trajectories as node ids."""
    return [(model.icd.encode([c for c, _ in t]),
             np.array([model.age.from_interval(lo, hi) for _, (lo, hi) in t], dtype=np.int64))
            for t in published]


def record_numerators(model, original, published):
    """A-GS loss of one record, unnormalized: ags_loss × |A| × |O|."""
    o = encode(model, [original])
    ilm, alm = ags_loss(model, o, nodes(model, [published]))
    return ilm * model.icd.size * len(original), alm * model.age.size * len(original)


# ---------------------------------------------------------------------- ILM / ALM (A-GS)
def test_worked_example_per_record_a_gs_adds_up_to_the_thesis_total():
    """Thesis §IV.3.1: aligning X and Y gives T̃ = (401.1,34), (401.1,[35−36]) with ILM 1
    and ALM 0.5 + 1 (total LM 2.5). Both records publish T̃; the A-GS loss of each record
    against T̃, summed, is that same total (a cluster of 2 is charged once per record)."""
    model = toy_model()
    result = anonymize_trajectories([X, Y], 2, model)
    pub = result.published[0]
    xi, xa = record_numerators(model, X, pub)
    yi, ya = record_numerators(model, Y, pub)
    assert (xi + yi) / model.icd.size == pytest.approx(1.0)
    assert (xa + ya) / model.age.size == pytest.approx(1.5)
    # the same total as the algorithm's own A-GS of X with Y
    whole = ags_align(model, *encode(model, [X, Y]))
    assert (xi + yi, xa + ya) == pytest.approx((whole.d_icd, whole.d_age))
    # Def. 8: X loses ICD 1 of 3 pairs and Age 0.25 + 1, Y loses Age 0.25 of 2 pairs
    ilm, alm = ags_loss(model, encode(model, [X, Y]), nodes(model, result.published))
    assert ilm == pytest.approx((1 / 3 + 0) / 2)
    assert alm == pytest.approx((1.25 / 3 + 0.25 / 2) / 2)


def test_a_zero_weight_lets_a_gs_charge_more_than_the_embedding():
    """w_Age = 0: A-GS is indifferent to age and, on a tie, prefers generalizing, so it
    matches (401.1, 33) with the original's (401.1, 40) — LCA [33−40] on both sides, plus
    suppressing age 33 — where the embedding keeps 33 exact and drops 40."""
    model = toy_model(w_icd=1.0)
    original = [("401.1", 33), ("401.1", 40)]
    published = [("401.1", (33, 33))]
    o, p = encode(model, [original]), nodes(model, [published])
    emb_ilm, emb_alm, _ = dataset_loss(model, o, p)
    ags_ilm, ags_alm = ags_loss(model, o, p)
    assert ags_ilm == emb_ilm == pytest.approx(1 / 2)  # one of two codes suppressed
    assert emb_alm == pytest.approx(1 / 2)  # age 40 suppressed: 8 / 8, over 2 pairs
    assert ags_alm == pytest.approx((8 + 8 + 8) / 8 / 2)  # 33, 40 → [33−40], 33 dropped


@st.composite
def released(draw):
    """Random trajectories over the toy trees and a random embedded 'release' of each:
    a subsequence of the original, every value replaced by an ancestor-or-self."""
    model_w = draw(st.sampled_from([0.2, 0.5, 0.9]))
    leaf_count = draw(st.sampled_from([0, 1]))
    model = toy_model(model_w, leaf_count)
    pair = st.tuples(st.sampled_from(CODES), st.integers(33, 40))
    originals, published = [], []
    for _ in range(draw(st.integers(1, 4))):
        orig = sorted(draw(st.lists(pair, max_size=5)), key=lambda p: (p[1], p[0]))
        keep = [p for p in orig if draw(st.booleans())]
        pub = []
        for code, age in keep:
            up = draw(st.integers(0, 3))
            lo = 33 + ((age - 33) >> up << up)
            pub.append((code if draw(st.booleans()) else "401", (lo, lo + (1 << up) - 1)))
        originals.append(orig)
        published.append(pub)
    return model, originals, published


@settings(max_examples=150, deadline=None)
@given(released())
def test_with_positive_weights_a_gs_equals_the_embedding(case):
    """ags_loss's docstring argument: every alignment costs the embedding's loss plus a
    non-negative term in each attribute, so A-GS's optimum is an embedding."""
    model, originals, published = case
    o, p = encode(model, originals), nodes(model, published)
    ilm, alm, per_record = dataset_loss(model, o, p)
    assert all(r is not None for r in per_record)
    assert ags_loss(model, o, p) == pytest.approx((ilm, alm), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(released(), st.sampled_from([0.0, 1.0]))
def test_with_a_zero_weight_a_gs_never_charges_less(case, w_icd):
    _, originals, published = case
    model = toy_model(w_icd)
    o, p = encode(model, originals), nodes(model, published)
    ilm, alm, _ = dataset_loss(model, o, p)
    a_ilm, a_alm = ags_loss(model, o, p)
    assert a_ilm >= ilm - 1e-12 and a_alm >= alm - 1e-12


def test_a_trajectory_that_does_not_embed_still_gets_an_a_gs_figure():
    model = toy_model()
    o = encode(model, [[("401.1", 34)]])
    p = nodes(model, [[("401.9", (40, 40)), ("401.1", (34, 34))]])  # longer than original
    assert dataset_loss(model, o, p)[2] == [None]
    ilm, alm = ags_loss(model, o, p)
    assert (ilm, alm) == pytest.approx((1.0, 1.0))  # (401.9, 40) suppressed: 3/3, 8/8


# ---------------------------------------------------------------------- shares kept
ICD9_ORIGINALS = [[("250.01", 40), ("401.1", 41), ("042", 70)],
                  [("250.01", 40), ("401.1", 60)]]


def test_shares_kept_hand_counted_on_icd9():
    """Thesis §IV.4.4 (Figure 13): 'ICD codes at the 3-digit level or below' and 'Age values
    at the 16-year level or below', as shares of all original pairs (suppressed pairs sit at
    the Any and 128-year levels)."""
    model = make_model(icd9_hierarchy(), [c for t in ICD9_ORIGINALS for c, _ in t])
    published = [
        [("250", (33, 48)), ("401-405", (41, 41)), ("042", (65, 96))],  # 3-digit, section
        [("250.01", (1, 128))],  # 5-digit with the whole age domain; (401.1, 60) dropped
    ]
    shares = kept_shares(model, ICD9_ORIGINALS, published)
    # ICD: 250 (3-digit), 042 (3-digit), 250.01 (5-digit) of 5 pairs
    assert shares["share of ICD codes at 3-digit level or finer"] == pytest.approx(3 / 5)
    # Age: [33−48] (16 years), 41 (1 year) of 5 pairs; 32 and 128 years are too wide
    assert shares["share of ages in blocks ≤ 16 years"] == pytest.approx(2 / 5)
    # the same as summing the histograms' rows
    icd_rows, age_rows = level_histograms(model, ICD9_ORIGINALS, published)
    fine = sum(r["% of pairs"] for r in icd_rows
               if r["ICD level"] in ("3-digit", "4-digit", "5-digit"))
    narrow = sum(r["% of pairs"] for r in age_rows if int(r["age block"].split()[0]) <= 16)
    assert (fine, narrow) == pytest.approx((60.0, 40.0))


def test_everything_suppressed_keeps_nothing():
    """Thesis: Baseline for k > 2 suppressed all values — nothing kept on either count."""
    model = make_model(icd9_hierarchy(), [c for t in ICD9_ORIGINALS for c, _ in t])
    shares = kept_shares(model, ICD9_ORIGINALS, [[], []])
    assert set(shares.values()) == {0.0}


def test_a_small_age_tree_does_not_count_dropped_pairs_as_narrow():
    """In the toy age tree (8 years) every block is ≤ 16 years, but a dropped pair is not
    kept; the toy ICD tree has no '3-digit' level, so that share is not reported."""
    model = toy_model()
    shares = kept_shares(model, [X, Y], [[("401.1", (34, 34))], [("401", (33, 40))]])
    assert shares == {"share of ages in blocks ≤ 16 years": pytest.approx(2 / 5)}


def test_the_report_carries_both_losses_and_both_shares():
    trajs = [[("250.01", 40 + i % 3), ("401.1", 50 + i % 5)] for i in range(12)]
    model = make_model(icd9_hierarchy(), [c for t in trajs for c, _ in t])
    result = anonymize_trajectories(trajs, 3, model)
    report = evaluate_trajectories(trajs, result.published, model, 3, chart=False)
    m = report.metrics
    assert m["ILM (A-GS)"] == pytest.approx(m["ILM"]) and m["ILM"] == pytest.approx(result.ilm)
    assert m["ALM (A-GS)"] == pytest.approx(m["ALM"])
    assert 0 < m["share of ages in blocks ≤ 16 years"] <= 1
    assert m["share of ICD codes at 3-digit level or finer"] == pytest.approx(1.0)
    assert any("ILM (A-GS)" in n and "Algorithm 3" in n for n in report.notes)
    assert any("§IV.4.4" in n for n in report.notes)
