"""Independent verifier of a DiffGen release: recompute the ε composition from the ledger.

It shares no code with ``ehr_release.algorithms``: it reads the released bytes
(``ledger.json``, ``cut.json``, the groups file), the run's parameters and the public
configuration, and re-derives on its own

1. ε' = ε / (2·(|numerical predictors| + 2h)) and the Δu of the score;
2. the sequence of charges Algorithm 1 must make, by replaying the specializations the
   ledger reports against the public taxonomies -- a missing, extra or mis-scoped charge
   (a selection marked parallel, overlapping "disjoint" intervals, two final counts) fails;
3. that each charge's noise scale pays at most the ε it is charged, at the sensitivity the
   charge declares (Laplace: Δ/scale; exponential: 2Δu/scale);
4. the composed total (sequential sum + max per parallel group) and that it is ≤ ε;
5. that every released value lies in the public configuration and the released cut is the
   one the ledger's replay ends with; counts are non-negative integers, one per group;
6. that the original records lie inside the public domains (the precondition that makes
   "domains are public" true for this dataset);
7. the published counts themselves (:mod:`ehr_release.privacy.diffgen_counts`, issue 14): no
   group of the cut is missing, and the residuals released − true are not implausibly small
   for the declared noise scale (a one-sided test) and follow the declared discrete Laplace
   law in fit, mean, variance and residues mod 2, 3 and 4 (two-sided tests,
   :mod:`ehr_release.privacy.diffgen_noise`, issue 32) — seven tests, each at 10⁻⁶/7, so an
   honest release fails with probability ≤ 10⁻⁶ (Bonferroni).

The ledger's replay lives in :mod:`.diffgen_ledger`; this module reads the files and checks
the counts.
"""

from __future__ import annotations

import io
import json
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from ehr_release.configuration.taxonomies import DiffGenConfig, load_config
from ehr_release.model.dataset import CODE, Dataset
from ehr_release.model.reports import Requirement, VerificationReport
from ehr_release.privacy.diffgen_counts import (
    FALSE_ALARM,
    missing_groups,
    steps_of,
    too_many_small,
    true_counts,
)
from ehr_release.privacy.diffgen_ledger import (
    NAME,
    Expectations,
    LedgerMismatch,
    Replay,
    _bookkeeping,
    _check_scale,
    _composition,
    _description,
    _interval,
    _is_cut,
    _log2_upper,
    replay,
)
from ehr_release.privacy.diffgen_noise import SHARES, noise_tests


# --------------------------------------------------------------------------- checks
def _read_groups(files: dict[str, bytes]) -> pd.DataFrame:
    if "groups.csv" in files and "groups.parquet" in files:
        raise LedgerMismatch("one groups file", "groups.csv and groups.parquet")
    if "groups.csv" in files:
        return pd.read_csv(io.BytesIO(files["groups.csv"]), dtype=str, keep_default_na=False)
    if "groups.parquet" in files:
        return pd.read_parquet(io.BytesIO(files["groups.parquet"])).astype(str)
    raise LedgerMismatch("a groups.csv or groups.parquet file", str(sorted(files)))


def _released_values(groups: pd.DataFrame, cut_doc: dict[str, Any], replay_: Replay,
                     config: DiffGenConfig) -> list[str]:
    """Problems with the released values (empty list if every value is public and in cut)."""
    problems: list[str] = []
    attrs = {a["name"]: a for a in cut_doc.get("attributes", [])}
    if sorted(attrs) != sorted(config.predictors):
        problems.append(f"cut.json attributes {sorted(attrs)} ≠ configured "
                        f"{sorted(config.predictors)}")
        return problems
    for name, dom in config.numerical.items():
        declared = attrs[name].get("domain", {}).get("domain")
        if declared is None or [Fraction(str(x)) for x in declared] != [Fraction(dom.lo),
                                                                       Fraction(dom.hi)]:
            problems.append(f"{name}: released domain {declared} ≠ public [{dom.lo}, "
                            f"{dom.hi})")
        released = {_interval(x) for x in attrs[name]["cut"]}
        if released != replay_.intervals[name]:
            problems.append(f"{name}: released cut ≠ the ledger's replay")
        values = set(groups[name])
        if not values <= set(attrs[name]["cut"]):
            problems.append(f"{name}: released values outside the cut")
    for name in [*config.categorical, *config.set_valued]:
        tree = replay_.tree(name)
        cut = set(attrs[name]["cut"])
        if cut != replay_.cut[name] or not _is_cut(tree, cut):
            problems.append(f"{name}: released cut is not the ledger's replay or not a cut")
        values = set(groups[name])
        if name in config.categorical:
            if not values <= cut:
                problems.append(f"{name}: released values outside the cut")
            continue
        sep = attrs[name].get("separator", ";")
        empty = attrs[name].get("empty", "(none)")
        for label in values:
            nodes = set() if label == empty else set(label.split(sep))
            if not nodes <= cut:
                problems.append(f"{name}: a released cut-set is outside the cut")
                break
            if label != (sep.join(sorted(nodes)) if nodes else empty):
                # its nodes sorted, each once: another order or a repeat would be free bits
                problems.append(f"{name}: a released cut-set is not in its one spelling")
                break
    cls = config.class_column
    if cls not in groups or not set(groups[cls]) <= set(config.class_values):
        problems.append(f"class column {cls!r} missing or with undeclared values")
    return problems


def _counts_problems(groups: pd.DataFrame, config: DiffGenConfig) -> list[str]:
    problems = []
    counts = pd.to_numeric(groups.get("count", pd.Series([], dtype=str)), errors="coerce")
    if "count" not in groups or counts.isna().any() or (counts < 0).any() \
            or (counts != counts.round()).any():
        problems.append("counts must be non-negative integers")
    if config.class_column in groups:
        per = groups.groupby(config.predictors, sort=False)[config.class_column].agg(
            lambda s: tuple(sorted(s)))
        if (per != tuple(sorted(config.class_values))).any():
            problems.append("each group must appear once with every class value")
    return problems


def _original_problems(original: Dataset, config: DiffGenConfig) -> list[str]:
    """Does the original data lie inside the public configuration?"""
    problems = []
    pats = original.patients
    for name, tree in config.categorical.items():
        if name not in pats:
            problems.append(f"{name}: not in the original data")
            continue
        leaves = set(tree.leaves_under(tree.root))
        values = set(pats[name].astype("string").fillna(""))
        if not values <= leaves:
            problems.append(f"{name}: {len(values - leaves)} value(s) outside the taxonomy")
    for name, dom in config.numerical.items():
        if name not in pats:
            problems.append(f"{name}: not in the original data")
            continue
        values = pd.to_numeric(pats[name].astype("string"), errors="coerce")
        if values.isna().any() or (values < dom.lo).any() \
                or (values >= dom.hi).any():
            problems.append(f"{name}: values outside the public domain [{dom.lo}, {dom.hi})")
    for name, tax in config.set_valued.items():
        codes = original.diagnoses[CODE].astype(str).unique()
        if any(tax.item_of(c) is None for c in codes):
            problems.append(f"{name}: codes without a leaf in the public taxonomy")
    cls = config.class_column
    if cls not in pats or not set(pats[cls].astype(str)) <= set(config.class_values):
        problems.append(f"class {cls!r}: values outside the declared ones")
    return problems


# --------------------------------------------------------------------------- entry point
def verify(files: dict[str, bytes], original: Dataset,
           params: dict[str, Any]) -> VerificationReport:
    """Verify the ε guarantee of a DiffGen release from its bytes (see module docstring)."""
    reqs: list[Requirement] = []
    epsilon = Fraction(str(params["epsilon"]))
    h = int(params["h"])
    config = load_config(params["taxonomies"], domains=params.get("domains"),
                         predictors=params.get("predictors"),
                         class_column=params.get("class_column"))
    n_num = len(config.numerical)
    eps1 = epsilon / (2 * (n_num + 2 * h))
    score = params.get("score", "max")
    du = Fraction(1) if score == "max" else _log2_upper(len(config.class_values))
    exp = Expectations(epsilon, h, eps1, du, params.get("unused_budget", "final-counts"),
                       params.get("seed"))
    try:
        ledger = json.loads(files["ledger.json"])
        cut_doc = json.loads(files["cut.json"])
        groups = _read_groups(files)
    except (KeyError, ValueError, LedgerMismatch) as exc:
        reqs.append(Requirement("release readable", "ledger.json, cut.json and groups",
                                f"unreadable: {exc}", False))
        return VerificationReport(NAME, reqs)

    declared = cut_doc.get("parameters", {})
    same = (Fraction(str(declared.get("epsilon"))) == epsilon and declared.get("h") == h
            and declared.get("score") == score
            and declared.get("unused_budget") == exp.policy)
    reqs.append(Requirement("parameters", f"ε = {epsilon}, h = {h}, score {score}, unused "
                            f"budget → {exp.policy}", f"release declares {declared}", same,
                            {"expected": str(params), "got": declared}))

    eps1_ok = Fraction(ledger.get("epsilon_prime", "0")) == eps1 and \
        Fraction(cut_doc.get("epsilon_prime", "0")) == eps1
    reqs.append(Requirement("ε' derivation", f"ε' = ε/(2·({n_num} + 2·{h})) = {eps1}",
                            f"ledger declares {ledger.get('epsilon_prime')}", eps1_ok))

    try:
        described = _description(cut_doc, ledger, config, exp, score)
    except (KeyError, ValueError, TypeError, ZeroDivisionError, LedgerMismatch) as exc:
        described = [f"unreadable: {type(exc).__name__}"]
    reqs.append(Requirement("public description fixed", "cut.json and the ledger's header "
                            "restate the parameters and the public configuration, each "
                            "number in its one spelling",
                            described[0] if described else "as the parameters and "
                            "configuration give", not described, {"problems": described[:10]}))

    replay_ = Replay(config)
    try:
        composed = replay(ledger, exp, replay_, len(groups))
        reqs.append(Requirement("charges complete and scoped",
                                "every charge Algorithm 1 makes, in order, with its scope",
                                f"{len(ledger['charges'])} charges replayed", True))
        text = _bookkeeping(ledger, exp, replay_, len(config.class_values))
        reqs.append(Requirement("ledger text fixed", "every text and bookkeeping number of "
                                "the ledger is the one its replay gives (no free text)",
                                text[0] if text else "every charge and event as replayed",
                                not text, {"problems": text[:10]}))
    except (LedgerMismatch, KeyError, ValueError, TypeError) as exc:
        composed = None
        reqs.append(Requirement("charges complete and scoped",
                                "every charge Algorithm 1 makes, in order, with its scope",
                                f"mismatch: {exc}", False,
                                {"expected": getattr(exc, "expected", ""),
                                 "got": getattr(exc, "got", str(exc))}))

    scale_problems = [p for c in ledger.get("charges", []) if (p := _check_scale(c, exp))]
    reqs.append(Requirement("noise calibrated", "every scale pays at most its charged ε "
                            f"(Laplace Δ = 1, exponential Δu ≥ {float(du):.4g})",
                            scale_problems[0] if scale_problems else
                            f"{len(ledger.get('charges', []))} scales checked",
                            not scale_problems, {"problems": scale_problems}))

    total = _composition(ledger)
    declared_total = Fraction(ledger.get("spent", "0"))
    ok = total <= epsilon and declared_total == total and (composed is None
                                                          or composed == total)
    reqs.append(Requirement("ε composition", f"sequential sum + max per parallel group "
                            f"≤ ε = {epsilon}",
                            f"recomputed {total} (≈{float(total):.6g}); ledger declares "
                            f"{ledger.get('spent')}", ok,
                            {"recomputed": str(total), "declared": ledger.get("spent")}))

    try:
        value_problems = _released_values(groups, cut_doc, replay_, config) + \
            _counts_problems(groups, config)
    except (KeyError, ValueError, LedgerMismatch) as exc:
        value_problems = [f"release malformed: {exc}"]
    reqs.append(Requirement("released values public", "values in the public taxonomies and "
                            "domains, the cut equal to the ledger's, counts integer ≥ 0",
                            value_problems[0] if value_problems else
                            f"{len(groups):,} groups checked", not value_problems,
                            {"problems": value_problems}))

    reqs += _counts_requirements(groups, ledger, cut_doc, original, config)

    data_problems = _original_problems(original, config)
    reqs.append(Requirement("domains cover the data", "the original records lie inside the "
                            "public configuration (no data-derived domain)",
                            data_problems[0] if data_problems else
                            f"{original.n_patients:,} records inside", not data_problems,
                            {"problems": data_problems}, on_original=True))
    return VerificationReport(NAME, reqs)


def _counts_requirements(groups: pd.DataFrame, ledger: dict[str, Any], cut_doc: dict[str, Any],
                         original: Dataset, config: DiffGenConfig) -> list[Requirement]:
    """Issue 14: every group of the cut is present; the counts carry the declared noise."""
    attrs = {a.get("name"): a for a in cut_doc.get("attributes", [])}
    try:
        missing, where = missing_groups(groups, config, steps_of(ledger), attrs)
        measured = (f"{missing:,} partition(s) of the cut missing, first after {where}"
                    if missing else f"every partition the ledger's steps create is released "
                    f"({len(groups):,} group × class rows)")
        complete = Requirement("groups complete", "every group × class the released cut "
                               "requires (only a noisy emptiness test may drop one)",
                               measured, missing == 0, {"missing": missing})
    except (KeyError, ValueError, TypeError, StopIteration, RuntimeError) as exc:
        complete = Requirement("groups complete", "every group × class the released cut "
                               "requires", f"cannot replay the release: {type(exc).__name__}",
                               False)
    required = ("residuals released − true follow the declared discrete Laplace noise: not "
                "implausibly often near 0 (one-sided), and in fit, mean, variance and residues "
                "mod 2, 3, 4 (two-sided); false alarm ≤ 1e-6 in all, Bonferroni")
    try:
        final = next(c for c in reversed(ledger["charges"])
                     if c.get("phase") == "final-counts")
        counts = pd.to_numeric(groups["count"], errors="raise").to_numpy()
        if not np.all(counts == np.round(counts)):
            raise ValueError("counts are not integers")
        true = true_counts(groups, original, config, attrs)
        residuals = counts.astype(np.int64) - true
        share = FALSE_ALARM / SHARES
        test = too_many_small(residuals, true, float(final["scale"]), share)
        law = noise_tests(residuals, true, float(final["scale"]), share)
        measured = "; ".join([test.text(), law.text()])
        noisy = Requirement("counts noisy", required, measured,
                            not test.flagged and not law.flagged,
                            {"small": test.small, "allowed": test.allowed,
                             "window": test.window, "groups": test.groups,
                             "departing_tests": len(law.departing)},
                            on_original=True)  # residuals against the true counts
    except (KeyError, ValueError, TypeError, StopIteration, RuntimeError) as exc:
        noisy = Requirement("counts noisy", required,
                            f"cannot test the counts: {type(exc).__name__}", False)
    return [complete, noisy]
