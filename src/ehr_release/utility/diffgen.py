"""Utility of a DiffGen release: classification accuracy as in the paper, count error, ledger.

* **CA / BA / LA** (Mohammed et al. 2013): split the original records 2/3–1/3, run DiffGen
  on the training part, train a C4.5-style tree (entropy criterion, cost-complexity pruned)
  on the released groups (one weighted row per group), generalize the test records with the
  released cut and measure accuracy (CA). BA trains the same tree on the raw training
  records, LA predicts the training majority class. Repeated ``eval_runs`` times, averaged.
  Opt-in, the paper's own protocol (issue 19): ``classifier="c45"`` trains C4.5
  (:mod:`ehr_release.utility.c45`: gain ratio, multiway categorical splits, error-based
  pruning at CF 0.25) and ``protocol="10x10cv"`` runs ``eval_runs`` × stratified 10-fold
  cross-validation (§Experiments: "10 runs of 10-fold cross-validation"); CA, BA and LA
  then come from the same folds, and the other classifier's CA on the same releases is
  reported beside it (one more tree on the groups per release).
* **In-release accuracy**: the published groups themselves, tested on all original records
  generalized with the published cut (optimistic: the test records were in the release).
* **Count-query error**: released noisy count of each group against the true count of the
  original records generalized into it.
* **ε ledger**: the released ``ledger.json`` as one row per step, for the certificate.

Every figure except the ledger is computed from the original data and is *not* covered by ε;
the evaluation runs spend budget of their own on the same records. The notes say so.
"""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.model_selection import StratifiedKFold
from sklearn.tree import DecisionTreeClassifier

from ehr_release.algorithms.diffgen import (
    COUNT_COLUMN,
    DiffGenParams,
    Encoded,
    encode_dataset,
    noise_source,
    run_diffgen,
)
from ehr_release.algorithms.diffgen.generalize import generalize
from ehr_release.algorithms.diffgen.release import (
    CUT_JSON,
    GROUPS_CSV,
    GROUPS_PARQUET,
    LEDGER_JSON,
    cut_document,
)
from ehr_release.configuration.taxonomies import DiffGenConfig, load_config
from ehr_release.model.dataset import Dataset
from ehr_release.model.reports import UtilityReport
from ehr_release.utility.c45 import C45Classifier

#: Cost-complexity pruning of the tree: C4.5 prunes, an unpruned CART tree overfits Adult
#: (≈81% instead of the ≈85% C4.5 reaches on raw data).
CCP_ALPHA = 2e-4
TRAIN_FRACTION = 2 / 3
#: Classifiers of the accuracy protocol: scikit-learn CART (today's default) or C4.5.
CLASSIFIERS = ("cart", "c45")
#: Protocols: random 2/3–1/3 splits (default) or runs of stratified 10-fold CV (the paper).
PROTOCOLS = ("splits", "10x10cv")
CV_FOLDS = 10
CLASSIFIER_NAMES = {"cart": "CART", "c45": "C4.5"}
#: Relative count error uses max(true count, 0.1% of the records) as denominator.
SANITY_FRACTION = 0.001
_INTERVAL = re.compile(r"^\[([^,]+),([^)]+)\)$")


# --------------------------------------------------------------------------- release files
def read_release(files: dict[str, bytes]) -> tuple[pd.DataFrame, dict[str, Any],
                                                   dict[str, Any]]:
    """Groups, cut and ledger of a release, read back from its bytes."""
    if GROUPS_CSV in files:
        groups = pd.read_csv(io.BytesIO(files[GROUPS_CSV]), dtype=str, keep_default_na=False)
    else:
        groups = pd.read_parquet(io.BytesIO(files[GROUPS_PARQUET])).astype(str)
    groups[COUNT_COLUMN] = pd.to_numeric(groups[COUNT_COLUMN])
    return groups, json.loads(files[CUT_JSON]), json.loads(files[LEDGER_JSON])


def config_for(params: dict[str, Any]) -> DiffGenConfig:
    return load_config(params["taxonomies"], domains=params.get("domains"),
                       predictors=params.get("predictors"),
                       class_column=params.get("class_column"))


def diffgen_params(params: dict[str, Any]) -> DiffGenParams:
    return DiffGenParams(Fraction(str(params["epsilon"])), int(params["h"]),
                         params["score"], params["unused_budget"])


# --------------------------------------------------------------------------- features
def _design(frame: pd.DataFrame, cut_doc: dict[str, Any],
            columns: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Generalized labels → numbers: interval start for numerical, one-hot otherwise."""
    parts = []
    for attr in cut_doc["attributes"]:
        name = attr["name"]
        if attr["kind"] == "numerical":
            parts.append(frame[name].map(lambda s: float(_INTERVAL.match(s).group(1)))
                         .rename(name))
        else:
            parts.append(pd.get_dummies(frame[name].astype(str), prefix=name,
                                        prefix_sep="=").astype(float))
    design = pd.concat(parts, axis=1)
    if columns is not None:
        design = design.reindex(columns=columns, fill_value=0.0)
    return design.to_numpy(dtype=float), list(design.columns)


def _c45_frame(frame: pd.DataFrame, cut_doc: dict[str, Any]) -> pd.DataFrame:
    """Generalized labels for C4.5: interval start for numerical attributes (split by
    threshold, as C4.5 treats a continuous attribute), every other label one category."""
    return pd.DataFrame({
        a["name"]: frame[a["name"]].map(lambda s: float(_INTERVAL.match(s).group(1)))
        if a["kind"] == "numerical" else frame[a["name"]].astype(str)
        for a in cut_doc["attributes"]}, index=frame.index)


def _tree(rng: np.random.Generator) -> DecisionTreeClassifier:
    return DecisionTreeClassifier(criterion="entropy", ccp_alpha=CCP_ALPHA,
                                  random_state=int(rng.integers(2**31 - 1)))


def release_accuracy(groups: pd.DataFrame, test: pd.DataFrame, cut_doc: dict[str, Any],
                     rng: np.random.Generator, classifier: str = "cart") -> float:
    """Accuracy on generalized ``test`` records of a tree trained on weighted groups."""
    cls = cut_doc["class"]["column"]
    train = groups[groups[COUNT_COLUMN] > 0]
    if train.empty:  # nothing survived the noise: predict the first declared class
        return float((test[cls].astype(str) == cut_doc["class"]["values"][0]).mean())
    weights = train[COUNT_COLUMN].to_numpy(float)
    if classifier == "c45":
        names = [a["name"] for a in cut_doc["attributes"]
                 if a["kind"] != "numerical"]
        model = C45Classifier(categorical=names).fit(_c45_frame(train, cut_doc),
                                                     train[cls].astype(str), weights)
        predicted = model.predict(_c45_frame(test, cut_doc))
    else:
        x_train, columns = _design(train, cut_doc)
        x_test, _ = _design(test, cut_doc, columns)
        predicted = _tree(rng).fit(x_train, train[cls].astype(str),
                                   sample_weight=weights).predict(x_test)
    return float((predicted == test[cls].astype(str).to_numpy()).mean())


def _raw_design(enc: Encoded) -> sparse.csc_matrix:
    """Raw features: numbers as they are, leaves and codes one-hot / multi-hot (sparse, so
    a million records with a thousand codes still fit in memory)."""
    blocks = [sparse.csr_matrix(c.values[:, None]) for c in enc.numerical]
    rows = np.arange(enc.n)
    for c in enc.categorical:
        blocks.append(sparse.csr_matrix((np.ones(enc.n), (rows, c.leaf)),
                                        shape=(enc.n, len(c.index.names))))
    sv = enc.set_valued
    if sv is not None:
        blocks.append(sparse.csr_matrix((np.ones(len(sv.item_leaf)),
                                         (sv.item_record, sv.item_leaf)),
                                        shape=(enc.n, len(sv.index.names))))
    if not blocks:
        blocks.append(sparse.csr_matrix((enc.n, 1)))
    return sparse.hstack(blocks, format="csc")


def _raw_frame(enc: Encoded) -> tuple[pd.DataFrame, list[str]]:
    """Raw features for C4.5 and its categorical columns: numbers as they are, categorical
    leaves as categories, each code of a set-valued attribute one present/absent category
    (dense: a set-valued attribute with many codes makes the C4.5 baseline slow)."""
    cols: dict[str, np.ndarray] = {c.name: c.values for c in enc.numerical}
    for c in enc.categorical:
        cols[c.name] = np.asarray(c.index.names, dtype=object)[c.leaf]
    cats = [c.name for c in enc.categorical]
    sv = enc.set_valued
    if sv is not None:
        present = np.unique(sv.item_leaf)
        hot = np.zeros((enc.n, len(present)), dtype=np.int8)
        hot[sv.item_record, np.searchsorted(present, sv.item_leaf)] = 1
        for j, leaf in enumerate(present):
            name = f"{sv.name}={sv.index.names[leaf]}"
            cols[name] = hot[:, j]
            cats.append(name)
    return pd.DataFrame(cols), cats


def raw_accuracy(train: Encoded, test: Encoded, rng: np.random.Generator,
                 classifier: str = "cart") -> tuple[float, float]:
    """(BA, LA): the tree on raw training records; the training majority class."""
    if classifier == "c45":
        x_train, cats = _raw_frame(train)
        x_test, _ = _raw_frame(test)
        x_test = x_test.reindex(columns=x_train.columns, fill_value=0)
        model = C45Classifier(categorical=cats).fit(x_train, train.classes)
        ba = float((model.predict(x_test) == test.classes).mean())
    else:
        model = _tree(rng).fit(_raw_design(train), train.classes)
        ba = float((model.predict(_raw_design(test)) == test.classes).mean())
    majority = np.bincount(train.classes, minlength=len(train.class_values)).argmax()
    return ba, float((test.classes == majority).mean())


# --------------------------------------------------------------------------- protocol
def _other(classifier: str) -> str:
    return "cart" if classifier == "c45" else "c45"


def _one_split(train: Encoded, test: Encoded, config: DiffGenConfig, params: DiffGenParams,
               noise: Any, rng: np.random.Generator, classifier: str,
               compare: bool) -> dict[str, float]:
    """CA, BA, LA of one train/test split: a fresh DiffGen run on ``train``; with
    ``compare`` also CA of the other classifier on the same release (key ``CA other``)."""
    result = run_diffgen(train, params, noise)
    cut_doc = cut_document(result, config, params)
    groups = result.groups.astype({c: str for c in result.groups.columns
                                   if c != COUNT_COLUMN})
    test_gen = generalize(test, cut_doc)
    out = {"CA": release_accuracy(groups, test_gen, cut_doc, rng, classifier)}
    out["BA"], out["LA"] = raw_accuracy(train, test, rng, classifier)
    if compare:
        out["CA other"] = release_accuracy(groups, test_gen, cut_doc, rng,
                                           _other(classifier))
    return out


def paper_protocol(enc: Encoded, config: DiffGenConfig, params: DiffGenParams,
                   runs: int, rng: np.random.Generator, seed: int | None = None,
                   classifier: str = "cart", compare: bool = False) -> dict[str, np.ndarray]:
    """CA, BA and LA over ``runs`` random 2/3–1/3 splits (fresh DiffGen run each)."""
    noise = noise_source(seed, rng)
    out: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        order = rng.permutation(enc.n)
        cut = int(round(enc.n * TRAIN_FRACTION))
        train, test = enc.subset(np.sort(order[:cut])), enc.subset(np.sort(order[cut:]))
        for key, value in _one_split(train, test, config, params, noise, rng, classifier,
                                     compare).items():
            out[key].append(value)
    return {k: np.array(v) for k, v in out.items()}


def cv_protocol(enc: Encoded, config: DiffGenConfig, params: DiffGenParams,
                runs: int, rng: np.random.Generator, seed: int | None = None,
                classifier: str = "c45", compare: bool = False,
                folds: int = CV_FOLDS) -> dict[str, np.ndarray]:
    """The paper's protocol: ``runs`` × stratified ``folds``-fold cross-validation.

    DiffGen runs afresh on each fold's training part (``folds``·``runs`` runs); the test
    fold is generalized with that run's cut. Each run's figure pools its folds (accuracy
    over all records, each tested once), so the arrays hold one value per run and their
    spread is the run-to-run spread the paper averages over.
    """
    noise = noise_source(seed, rng)
    out: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        splitter = StratifiedKFold(folds, shuffle=True,
                                   random_state=int(rng.integers(2**31 - 1)))
        per_fold: dict[str, list[float]] = defaultdict(list)
        sizes = []
        for train_rows, test_rows in splitter.split(np.zeros(enc.n), enc.classes):
            fold = _one_split(enc.subset(train_rows), enc.subset(test_rows), config, params,
                              noise, rng, classifier, compare)
            for key, value in fold.items():
                per_fold[key].append(value)
            sizes.append(len(test_rows))
        for key, values in per_fold.items():
            out[key].append(float(np.average(values, weights=sizes)))
    return {k: np.array(v) for k, v in out.items()}


def protocol_text(protocol: str, runs: int) -> str:
    """The protocol in words, as the metric names and the benchmark show it."""
    return (f"{runs} × {CV_FOLDS}-fold CV" if protocol == "10x10cv"
            else f"{runs} splits 2/3–1/3")


def protocol_label(protocol: str, classifier: str, runs: int) -> str:
    """Suffix of the accuracy metrics: today's names for the default (CART, splits)."""
    if protocol == "splits" and classifier == "cart":
        return f"mean of {runs}"
    return f"mean of {protocol_text(protocol, runs)}, {CLASSIFIER_NAMES[classifier]}"


def _std_label(protocol: str, classifier: str, runs: int) -> str:
    if protocol == "splits" and classifier == "cart":
        return "std"
    return f"std over runs, {protocol_text(protocol, runs)}, {CLASSIFIER_NAMES[classifier]}"


# --------------------------------------------------------------------------- count error
def count_error(groups: pd.DataFrame, truth: pd.DataFrame, cut_doc: dict[str, Any],
                n_records: int) -> dict[str, float]:
    """Errors of released counts against the true counts of the same groups."""
    keys = [a["name"] for a in cut_doc["attributes"]] + [cut_doc["class"]["column"]]
    true_counts = truth.groupby(keys, sort=False).size().rename("true").reset_index()
    merged = groups.merge(true_counts, on=keys, how="left")
    merged["true"] = merged["true"].fillna(0)
    diff = merged[COUNT_COLUMN].to_numpy(float) - merged["true"].to_numpy(float)
    sanity = max(1.0, SANITY_FRACTION * n_records)
    released_truth = float(merged["true"].sum())
    return {
        "groups released": float(len(groups)),
        "count error: mean absolute": float(np.abs(diff).mean()) if len(diff) else 0.0,
        "count error: root mean square": float(np.sqrt((diff**2).mean())) if len(diff)
        else 0.0,
        "count error: mean relative": float((np.abs(diff) / np.maximum(
            merged["true"].to_numpy(float), sanity)).mean()) if len(diff) else 0.0,
        "records outside released groups": float(n_records - released_truth),
    }


# --------------------------------------------------------------------------- ledger table
def ledger_table(ledger: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per step of the released ledger, plus the composed total."""
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for c in ledger["charges"]:
        by_step[int(c["step"])].append(c)
    rows = []
    for step in sorted(by_step):
        charges = by_step[step]
        seq = sum((Fraction(c["epsilon"]) for c in charges if c["scope"] == "sequential"),
                  Fraction(0))
        groups: dict[str, Fraction] = {}
        for c in charges:
            if c["scope"] == "parallel":
                groups[c["group"]] = max(groups.get(c["group"], Fraction(0)),
                                         Fraction(c["epsilon"]))
        spent = seq + sum(groups.values(), Fraction(0))
        rows.append({"step": step, "what": _step_text(charges),
                     "mechanisms": _mechanism_text(charges),
                     "ε charged": float(spent), "exact": _frac(spent)})
    total = Fraction(ledger["spent"])
    rows.append({"step": "total", "what": f"budget ε = {ledger['total_budget']}",
                 "mechanisms": f"{len(ledger['charges'])} invocations",
                 "ε charged": float(total), "exact": _frac(total)})
    return rows


def _frac(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _step_text(charges: list[dict[str, Any]]) -> str:
    first = charges[0]
    if first["phase"] == "initial-split":
        return "split points of " + ", ".join(c["detail"]["attribute"] for c in charges)
    if first["phase"] == "final-counts":
        return f"noisy counts of {first['detail']['groups']:,} groups"
    sel = next((c for c in charges if c["phase"] == "selection"), first)
    d = sel["detail"]
    children = ", ".join(d.get("children", []))
    return f"{d.get('attribute')}: {d.get('value')} → {children}"


def _mechanism_text(charges: list[dict[str, Any]]) -> str:
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    for c in charges:
        counts[(c["phase"], c["mechanism"], c["scope"])] += 1
    return "; ".join(f"{n} × {mech} {phase} ({scope})"
                     for (phase, mech, scope), n in counts.items())


# --------------------------------------------------------------------------- entry point
def evaluate(files: dict[str, bytes], original: Dataset, params: dict[str, Any],
             rng: np.random.Generator) -> UtilityReport:
    """The utility report of a DiffGen release (see the module docstring)."""
    groups, cut_doc, ledger = read_release(files)
    config = config_for(params)
    enc = encode_dataset(original, config)
    truth = generalize(enc, cut_doc)
    metrics = count_error(groups, truth, cut_doc, enc.n)
    classifier = params.get("classifier", "cart")
    protocol = params.get("protocol", "splits")
    metrics["in-release accuracy (%)"] = 100 * release_accuracy(groups, truth, cut_doc, rng,
                                                                classifier)
    runs = int(params.get("eval_runs", 10))
    held_out = ("DiffGen on 2/3 of the records, test on the other 1/3 generalized with the "
                "same cut." if protocol == "splits" else
                f"{runs} runs of stratified {CV_FOLDS}-fold cross-validation, DiffGen on "
                "each fold's training part, test on the held-out fold generalized with the "
                "same cut.")
    notes = [
        "All utility figures are computed from the original records and are not covered by "
        "the release's ε; the evaluation runs of DiffGen spend budget of their own on the "
        "same records. Share this certificate only where that is acceptable. The low-utility "
        "refusal and a reviewer's decision made on these figures depend on the original "
        "records too: whether this draw is published is not covered by ε either (the "
        "extract's ε account counts every draw shown, refused or not).",
        "In-release accuracy tests the published groups on the records they were built "
        f"from (optimistic); CA follows the paper: {held_out}",
    ]
    label = protocol_label(protocol, classifier, runs)
    if runs > 0:
        compare = (classifier, protocol) != ("cart", "splits")
        run = cv_protocol if protocol == "10x10cv" else paper_protocol
        stats = run(enc, config, diffgen_params(params), runs, rng, params.get("seed"),
                    classifier=classifier, compare=compare)
        std = _std_label(protocol, classifier, runs)
        for key in ("CA", "BA", "LA"):
            metrics[f"{key} (%) {label}"] = 100 * float(stats[key].mean())
            metrics[f"{key} (%) {std}"] = 100 * float(stats[key].std())
        if compare:
            name, other = CLASSIFIER_NAMES[classifier], CLASSIFIER_NAMES[_other(classifier)]
            key = f"CA (%) mean of {protocol_text(protocol, runs)}, {other} (same releases)"
            metrics[key] = 100 * float(stats["CA other"].mean())
            notes.append(f"Classifier {name}; CA with {other} on the same releases and test "
                         "records is shown for comparison. LA (the training majority "
                         "class) comes from the same splits or folds as CA.")
    below = below_baseline(metrics, truth, enc.class_column, runs, label)
    tables = {"ε ledger (per step)": ledger_table(ledger),
              "Released cut": [{"attribute": a["name"], "kind": a["kind"],
                                "cut": ", ".join(a["cut"])} for a in cut_doc["attributes"]]}
    return UtilityReport("diffgen", metrics, tables=tables, notes=notes, below_baseline=below)


def below_baseline(metrics: dict[str, float], truth: pd.DataFrame, class_column: str,
                   runs: int, label: str | None = None) -> list[str]:
    """The release is below the trivial classifier that always predicts the majority class.

    With ``eval_runs`` > 0 the paper's own pair: CA (DiffGen on 2/3, tested on 1/3) against
    LA (the training majority class on the same test records). Without them, the in-release
    accuracy against the majority class's share of the same records. ``label`` names the
    protocol's metrics (:func:`protocol_label`); CA and LA always come from the same
    splits or folds.
    """
    if runs > 0:
        label = label or f"mean of {runs}"
        ca, la = metrics[f"CA (%) {label}"], metrics[f"LA (%) {label}"]
        if ca < la:
            return [f"Classification accuracy on held-out records (CA {ca:.1f} %) is below "
                    f"always predicting the majority class (LA {la:.1f} %)."]
        return []
    acc = metrics["in-release accuracy (%)"]
    share = 100 * float(truth[class_column].value_counts(normalize=True).max()) \
        if len(truth) else 0.0
    if acc < share:
        return [f"Accuracy of the released groups on the original records ({acc:.1f} %) is "
                f"below always predicting the majority class ({share:.1f} %)."]
    return []
