"""The LDA verifier accepts what LDA releases and rejects broken releases.

A brute-force oracle (every order-preserving choice of original positions, exact fractions)
checks the verifier's embedding and loss recomputation on the same small cases.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ehr_release.algorithms.lda import AgeTree, anonymize_trajectories, make_model
from ehr_release.algorithms.lda.release import META_FILE, RECORDS_FILE, release_files
from ehr_release.model.hierarchy import Hierarchy, icd9_hierarchy
from ehr_release.privacy.lda import LdaSettings, check_trajectories

CODES = ["401.0", "401.1", "401.9", "250.00", "250.01", "272.0", "272.4", "428.0", "427.31",
         "V45.81"]
H = icd9_hierarchy()
MODELS = {(w, lc): make_model(H, CODES, w_icd=w, w_age=1 - w, leaf_count=lc)
          for w in (0.5, 0.2, 0.9) for lc in (0, 1)}
FAST = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def problems(draw):
    """A few trajectories (ordered by age, then code), k, method, weights, leaf convention."""
    pair = st.tuples(st.sampled_from(CODES), st.integers(30, 45) | st.integers(1, 128))
    trajs = draw(st.lists(st.lists(pair, max_size=5, unique=True), min_size=2, max_size=10))
    trajs = [sorted(t, key=lambda p: (p[1], p[0])) for t in trajs]
    k = draw(st.integers(2, min(4, len(trajs))))
    method = draw(st.sampled_from(["ags", "baseline"]))
    w, lc = draw(st.sampled_from(sorted(MODELS)))
    return trajs, k, method, w, lc


def run(problem):
    trajs, k, method, w, lc = problem
    ids = [f"p{i}" for i in range(len(trajs))]
    result = anonymize_trajectories(trajs, k, MODELS[(w, lc)], method)
    meta = {"k": k, "method": method, "w_icd": w, "w_age": 1 - w, "leaf_count": lc}
    files = release_files(ids, result, meta)
    return ids, result, files, LdaSettings(k, w, 1 - w, lc)


def records(files):
    return [json.loads(x) for x in files[RECORDS_FILE].decode().splitlines() if x.strip()]


def with_records(files, recs):
    return {**files, RECORDS_FILE: "".join(json.dumps(r) + "\n" for r in recs).encode()}


def failed(report) -> set[str]:
    return {r.name for r in report.failures}


# ---------------------------------------------------------------------- brute force
def covers(node: str, lo: int, hi: int, code: str, age: int) -> bool:
    return (node == code or node in set(H.ancestors(code))) and lo <= age <= hi


def leaf_l(node: str, lc: int) -> int:
    return lc if H.is_leaf(node) else len(H.leaves_under(node))


def brute_loss(orig, pub, s: LdaSettings):
    """(ΔL ICD, ΔL Age) of the cheapest embedding over all position choices, or None."""
    n_icd, n_age, lc = len(H.leaves_under(H.root)), 128, s.leaf_count
    best = None
    for pos in itertools.combinations(range(len(orig)), len(pub)):
        if not all(covers(c, lo, hi, *orig[p]) for p, (c, (lo, hi)) in zip(pos, pub,
                                                                            strict=True)):
            continue
        di = sum(leaf_l(c, lc) - leaf_l(orig[p][0], lc) for p, (c, _) in zip(pos, pub,
                                                                             strict=True))
        da = sum((hi - lo + 1 if hi > lo else lc) - lc for _, (lo, hi) in pub)
        rest = [orig[i] for i in range(len(orig)) if i not in pos]
        di += sum(leaf_l(H.root, lc) - leaf_l(c, lc) for c, _ in rest)
        da += (128 - lc) * len(rest)
        cost = Fraction(s.w_icd) * di / n_icd + Fraction(s.w_age) * da / n_age
        if best is None or (cost, di) < best[:2]:
            best = (cost, di, da)
    return None if best is None else best[1:]


def pub_of(rec):
    return [(c, (lo, hi)) for c, (lo, hi) in rec["trajectory"]]


# ---------------------------------------------------------------------- properties
@FAST
@given(problems())
def test_verifier_accepts_lda_output_and_losses_match_brute_force(problem):
    trajs, _, method, *_ = problem
    ids, result, files, s = run(problem)
    variant = {"ags": "lda", "baseline": "lda-baseline"}[method]  # the method it names
    report = check_trajectories(files, ids, trajs, H, s, algorithm=variant)
    assert report.holds, report.failures
    losses = [brute_loss(t, pub_of(r), s) for t, r in zip(trajs, records(files), strict=True)]
    assert all(x is not None for x in losses)
    counted = [(x, len(t)) for x, t in zip(losses, trajs, strict=True) if t]
    ilm = sum(x[0] / 14567 / n for x, n in counted) / max(len(counted), 1)
    alm = sum(x[1] / 128 / n for x, n in counted) / max(len(counted), 1)
    evidence = next(r for r in report.requirements if r.name == "declared loss").evidence
    assert evidence["ilm"] == pytest.approx(ilm, abs=1e-12)
    assert evidence["alm"] == pytest.approx(alm, abs=1e-12)


@FAST
@given(problems(), st.data())
def test_verifier_rejects_a_group_smaller_than_k(problem, data):
    trajs, k, *_ = problem
    ids, result, files, s = run(problem)
    i = data.draw(st.integers(0, len(ids) - 1))
    recs = records(files)
    recs[i]["trajectory"] = [[c, [a, a]] for c, a in trajs[i]]  # published unprotected
    groups = [json.dumps(r["trajectory"]) for r in recs]
    report = check_trajectories(with_records(files, recs), ids, trajs, H, s)
    small = min(Counter(groups).values()) < k  # the group i left may now be short too
    assert ("k-anonymity" in failed(report)) is small
    assert "truthful generalization" not in failed(report)


@FAST
@given(problems(), st.data())
def test_verifier_rejects_values_that_are_not_ancestors(problem, data):
    trajs, *_ = problem
    ids, result, files, s = run(problem)
    recs = records(files)
    nonempty = [i for i, r in enumerate(recs) if r["trajectory"]]
    assume(nonempty)
    i = data.draw(st.sampled_from(nonempty))
    j = data.draw(st.integers(0, len(recs[i]["trajectory"]) - 1))
    if data.draw(st.booleans()):
        recs[i]["trajectory"][j][0] = "E849.7"  # covers none of the data's codes
    else:
        ages = {a for _, a in trajs[i]}
        free = next(a for a in range(1, 129) if a not in ages)
        recs[i]["trajectory"][j][1] = [free, free]
    report = check_trajectories(with_records(files, recs), ids, trajs, H, s)
    assert "truthful generalization" in failed(report)
    bad = next(r for r in report.failures if r.name == "truthful generalization")
    assert ids[i] in bad.evidence["patients"]


@FAST
@given(problems(), st.data())
def test_out_of_order_trajectories_are_rejected_exactly_when_they_do_not_embed(problem, data):
    trajs, *_ = problem
    ids, result, files, s = run(problem)
    recs = records(files)
    longer = [i for i, r in enumerate(recs) if len(r["trajectory"]) >= 2]
    assume(longer)
    i = data.draw(st.sampled_from(longer))
    recs[i]["trajectory"] = recs[i]["trajectory"][::-1]
    report = check_trajectories(with_records(files, recs), ids, trajs, H, s)
    embeds = all(brute_loss(t, pub_of(r), s) is not None
                 for t, r in zip(trajs, recs, strict=True))
    assert ("truthful generalization" in failed(report)) is not embeds


@FAST
@given(problems(), st.data())
def test_verifier_rejects_a_missing_or_repeated_patient(problem, data):
    trajs, *_ = problem
    ids, result, files, s = run(problem)
    recs = records(files)
    i = data.draw(st.integers(0, len(ids) - 1))
    gone = recs[:i] + recs[i + 1:]
    report = check_trajectories(with_records(files, gone), ids, trajs, H, s)
    assert "one record per patient" in failed(report)
    twice = recs + [recs[i]]
    assert "one record per patient" in failed(check_trajectories(with_records(files, twice), ids,
                                                         trajs, H, s))


# ---------------------------------------------------------------------- examples
TOY = Hierarchy(parent={"401.0": "401", "401.1": "401", "401.9": "401"},
                level={"401": 0, "401.0": 1, "401.1": 1, "401.9": 1}, root="401")
X = [("401.1", 34), ("401.1", 35), ("401.1", 37)]
Y = [("401.1", 34), ("401.1", 36)]
TOY_SETTINGS = LdaSettings(2, age_first=33, age_depth=3)


def toy_release():
    model = make_model(TOY, ["401.1"], ages=AgeTree(33, 3))
    result = anonymize_trajectories([X, Y], 2, model)
    return release_files(["x", "y"], result, {"k": 2, "w_icd": 0.5, "w_age": 0.5,
                                              "leaf_count": 0})


def test_worked_example_release_is_verified_and_losses_recomputed():
    report = check_trajectories(toy_release(), ["x", "y"], [X, Y], TOY, TOY_SETTINGS)
    assert report.holds, report.failures
    loss = next(r for r in report.requirements if r.name == "declared loss").evidence
    assert loss["ilm"] == pytest.approx(1 / 6)
    assert loss["alm"] == pytest.approx((1.25 / 3 + 0.25 / 2) / 2)
    k_req = next(r for r in report.requirements if r.name == "k-anonymity")
    assert "smallest group 2 records" in k_req.measured


def test_declared_figures_and_settings_must_match():
    files = toy_release()
    meta = json.loads(files[META_FILE])
    # A stated loss fails, even the true one: its last digits could carry anything.
    for stated in (1 / 6, 1 / 12):
        lied = {**files, META_FILE: json.dumps({**meta, "ilm": stated}).encode()}
        assert failed(check_trajectories(lied, ["x", "y"], [X, Y], TOY, TOY_SETTINGS)) == {
            "declared loss"}
    other = LdaSettings(2, w_icd=0.9, w_age=0.1, age_first=33, age_depth=3)
    assert "declared loss" in failed(check_trajectories(files, ["x", "y"], [X, Y], TOY, other))
    higher_k = LdaSettings(3, age_first=33, age_depth=3)
    assert failed(check_trajectories(files, ["x", "y"], [X, Y], TOY, higher_k)) == {
        "k-anonymity", "declared loss"}
    other_ages = {**files, META_FILE: json.dumps({**meta, "age_domain": [1, 128]}).encode()}
    assert failed(check_trajectories(other_ages, ["x", "y"], [X, Y], TOY, TOY_SETTINGS)) == {
        "declared loss"}
    silent = {**files, META_FILE: b"{}"}
    assert check_trajectories(silent, ["x", "y"], [X, Y], TOY, TOY_SETTINGS).holds


@pytest.mark.parametrize("line", [
    b"{not json\n",
    b'{"patient_id": "x"}\n',
    b'{"patient_id": "x", "trajectory": [["401.1", [33, 35]]]}\n',  # not a block
    b'{"patient_id": "x", "trajectory": [["401.1", [41, 41]]]}\n',  # off domain
    b'{"patient_id": "x", "trajectory": [["999", [33, 33]]]}\n',  # unknown code
    b'{"patient_id": 0, "trajectory": []}\n',
    b'{"patient_id": "x", "trajectory": [["401.1", 34]]}\n',
    b'{"patient_id": "x", "cluster": 0, "trajectory": []}\n',  # the removed field
])
def test_malformed_releases_fail_the_format_check(line):
    files = {**toy_release(), RECORDS_FILE: line}
    report = check_trajectories(files, ["x", "y"], [X, Y], TOY, TOY_SETTINGS)
    assert not report.holds and [r.name for r in report.requirements] == ["release format"]


def test_missing_metadata_file_fails_the_format_check():
    files = toy_release()
    del files[META_FILE]
    report = check_trajectories(files, ["x", "y"], [X, Y], TOY, TOY_SETTINGS)
    assert failed(report) == {"release format"}


# ---------------------------------------------------------------- the vectorized table
_CODES = ["401.9", "401.1", "250.00", "250.01", "272.4", "V70.0", "E880"]


def _ancestors_or_self(h: Hierarchy, code: str) -> list[str]:
    return [code, *h.ancestors(code)]


def one_pair_table(h: Hierarchy, s: LdaSettings, original, published):
    """(ΔL ICD, ΔL Age) of the cheapest in-order embedding, or None: the table over
    (original prefix, published prefix) filled for one pair, weighted cost in exact
    fractions, ties to the smaller ICD loss — the definition, nothing shared."""
    size_i, size_a, lc = len(h.leaves_under(h.root)), 1 << s.age_depth, s.leaf_count

    def l_icd(node):
        return lc if h.is_leaf(node) else len(h.leaves_under(node))

    def cost(di, da):
        return (Fraction(s.w_icd) * di / size_i + Fraction(s.w_age) * da / size_a, di, da)

    n, m = len(original), len(published)
    table = [[None] * (m + 1) for _ in range(n + 1)]
    table[0][0] = (Fraction(0), 0, 0)
    for i, (code, age) in enumerate(original, start=1):
        for j in range(min(i, m) + 1):
            options = []
            if table[i - 1][j] is not None:  # original pair i suppressed: up to both roots
                _, di, da = table[i - 1][j]
                options.append(cost(di + l_icd(h.root) - l_icd(code), da + size_a - lc))
            if j and table[i - 1][j - 1] is not None:  # ...or the image of published pair j
                node, (lo, hi) = published[j - 1]
                if lo <= age <= hi and node in _ancestors_or_self(h, code):
                    _, di, da = table[i - 1][j - 1]
                    options.append(cost(di + l_icd(node) - l_icd(code),
                                        da + (lc if lo == hi else hi - lo + 1) - lc))
            table[i][j] = min(options) if options else None
    best = table[n][m]
    return None if best is None else best[1:]


@given(data=st.data(), w=st.sampled_from([0.5, 0.3, 1.0, 0.0]),
       leaf=st.sampled_from([0, 1]))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_vectorized_embeddings_equal_the_table_filled_one_pair_at_a_time(data, w, leaf):
    """Same losses, same None, whatever the lengths, weights and leaf convention: the
    vectorized scan (one loss per pair, in closed form) against the one-pair table (the
    minimum over every embedding)."""
    from ehr_release.privacy.lda import _Trees, embeddings

    h = icd9_hierarchy()
    s = LdaSettings(2, w_icd=w, w_age=1 - w, leaf_count=leaf)
    trees = _Trees(h, s)
    ages = st.integers(1, 128) | st.integers(40, 43)  # repeated ages: many embeddings
    jobs = []
    for _ in range(data.draw(st.integers(0, 12))):
        orig = sorted(data.draw(st.lists(st.tuples(st.sampled_from(_CODES), ages),
                                         max_size=9, unique=True)), key=lambda p: (p[1], p[0]))
        pub = []
        for code, age in orig:
            if data.draw(st.booleans()):
                node = data.draw(st.sampled_from(_ancestors_or_self(h, code)))
                width = 1 << data.draw(st.integers(0, 4))
                first = 1 + (age - 1) // width * width
                pub.append((node, (first, first + width - 1)))
        if data.draw(st.integers(0, 4)) == 0 and pub:  # sometimes one that cannot embed
            pub.insert(data.draw(st.integers(0, len(pub))), ("E880", (1, 128)))
        if data.draw(st.integers(0, 6)) == 0 and len(pub) >= 2:  # or out of order
            pub.reverse()
        jobs.append((orig, pub))
    embeds, d_icd, d_age = embeddings(trees, [o for o, _ in jobs], [p for _, p in jobs])
    found = [(int(i), int(a)) if ok else None
             for ok, i, a in zip(embeds, d_icd, d_age, strict=True)]
    assert found == [one_pair_table(h, s, o, p) for o, p in jobs]


@given(st.lists(st.tuples(st.sampled_from(["401.1", "4,01", "a\\b", 'q"', "é", "\x7f", "\t",
                                           ",,", ""]) | st.text(max_size=4),
                          st.tuples(st.integers(-5, 200), st.integers(-5, 200))), max_size=4))
@settings(max_examples=300, deadline=None)
def test_the_shown_trajectory_is_the_json_dumps_rendering(trajectory):
    import orjson

    from ehr_release.privacy.lda import _rendered

    assert _rendered(orjson.dumps(trajectory)) == json.dumps(trajectory)


def test_the_stated_algorithm_and_method_are_the_runs():
    """lda.json names the algorithm and its alignment method: a release of one variant that
    names the other tells researchers a method that did not run."""
    files = toy_release()
    meta = json.loads(files[META_FILE])
    for key, other in (("algorithm", "lda-baseline"), ("method", "baseline")):
        stated = {**files, META_FILE: json.dumps({**meta, key: other}).encode()}
        assert failed(check_trajectories(stated, ["x", "y"], [X, Y], TOY, TOY_SETTINGS)) == {
            "declared loss"}
    own = {**files, META_FILE: json.dumps({**meta, "algorithm": "lda",
                                           "method": "ags"}).encode()}
    assert check_trajectories(own, ["x", "y"], [X, Y], TOY, TOY_SETTINGS).holds
