"""What a GCCens release costs in information, and how much risk it removed.

* CUL (Censoring Utility Loss) per record = censored instances / instances in the capped
  record (thesis §III.6); summarized by mean, standard deviation, median and skewness as in
  the thesis' Tables 1–2 (population moments; the skewness of a constant distribution is
  reported as 0).
* Codes kept, two ways: the thesis' "retained 95.4% of the ICD codes on average when k = 5
  … (i.e., the mean of the CUL distribution was 0.046)" (§III.7.2) is the mean over records
  of the share each kept, 1 − mean CUL; "share of capped codes kept" pools every instance
  of the sample instead, so long records weigh more. Records modified ("GCCens only
  modified 16% of the records") is the share of records with CUL > 0.
* Distinguishability before (the original sample records) and after (the release) against
  the population: the share of patients unique (dis = 1) and below k, and the CDF chart the
  thesis draws in Figure 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ehr_release.algorithms.gccens import PopulationIndex, resolve_caps
from ehr_release.model.reports import Chart, UtilityReport

if TYPE_CHECKING:
    from ehr_release.model.dataset import Dataset

NAME = "gccens"


def cul_values(capped: Sequence[Mapping[str, int]],
               released: Sequence[Mapping[str, int]]) -> np.ndarray:
    """CUL of each record: share of its capped instances that were censored (0 if none)."""
    before = np.array([sum(r.values()) for r in capped], dtype=float)
    after = np.array([sum(r.values()) for r in released], dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(before > 0, (before - after) / before, 0.0)


def describe(values: np.ndarray) -> dict[str, float]:
    """Mean, standard deviation, median and skewness (population moments)."""
    if not len(values):
        return {"mean": 0.0, "std": 0.0, "median": 0.0, "skewness": 0.0}
    mean = float(values.mean())
    std = float(values.std())
    skew = float(((values - mean) ** 3).mean() / std**3) if std > 0 else 0.0
    return {"mean": mean, "std": std, "median": float(np.median(values)), "skewness": skew}


def _cdf_chart(before: np.ndarray, after: np.ndarray, k: int) -> Chart:
    from ehr_release.utility.plotting import plt, png

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for values, label, color in ((before, "original sample", "#b0413e"),
                                 (after, "released (GCCens)", "#4a78a8")):
        xs = np.sort(values)
        ax.step(xs, np.arange(1, len(xs) + 1) / max(len(xs), 1) * 100, where="post",
                label=label, color=color)
    ax.axvline(k, color="black", linestyle="--", linewidth=1, label=f"k = {k}")
    ax.set_xscale("log")
    ax.set_xlabel("distinguishability (population records containing the record)")
    ax.set_ylabel("% of sample patients with dis ≤ x")
    ax.set_ylim(0, 100)
    ax.legend(loc="lower right")
    fig.tight_layout()
    image = png(fig)
    return Chart("gccens-distinguishability",
                 f"Cumulative distinguishability before and after censoring: the share of "
                 f"patients left of the dashed line (dis < {k}) is re-identifiable with "
                 f"probability above 1/{k}.", image)


def evaluate_censoring(released: Sequence[Mapping[str, int]],
                       sample: Sequence[Mapping[str, int]], population: PopulationIndex,
                       k: int, caps: Mapping[str, int], *, chart: bool = True) -> UtilityReport:
    """Utility report of a GCCens release whose records are in the sample's order.

    ``population`` must index every code of the sample (for the 'before' figures).
    """
    capped_caps = resolve_caps(sample, caps)
    capped = [{c: min(n, capped_caps[c]) for c, n in r.items()} for r in sample]
    cul = cul_values(capped, released)
    stats = describe(cul)
    before = np.array([population.dis(r) for r in sample], dtype=float)
    after = np.array([population.dis(r) for r in released], dtype=float)
    total = sum(sum(r.values()) for r in capped)
    kept = sum(sum(r.values()) for r in released)
    n = max(len(sample), 1)
    metrics = {
        "CUL mean": stats["mean"], "CUL std": stats["std"], "CUL median": stats["median"],
        "CUL skewness": stats["skewness"],
        "share of capped codes kept": kept / total if total else 1.0,
        "mean share of codes kept per record": 1.0 - stats["mean"],
        "share of records censored": float((cul > 0).mean()) if len(cul) else 0.0,
        "share unique before": float((before == 1).sum() / n),
        "share below k before": float((before < k).sum() / n),
        "share unique after": float((after == 1).sum() / n),
        "share below k after": float((after < k).sum() / n),
    }
    thresholds = sorted({1, 2, 5, 10, k, 25, 100})
    table = [{"dis ≤": t, "% before": round(100 * float((before <= t).mean()), 2),
              "% after": round(100 * float((after <= t).mean()), 2)} for t in thresholds]
    notes = ["CUL = censored instances / instances after capping; caps alone are not "
             "counted as censoring (thesis §III.6).",
             "'mean share of codes kept per record' = 1 − CUL mean, the thesis' 'retained "
             "… of the ICD codes on average' (§III.7.2); 'share of capped codes kept' pools "
             "all code instances of the sample.",
             "'before' is the original sample record (uncapped), 'after' the released one."]
    charts = [_cdf_chart(before, after, k)] if chart and len(sample) else []
    # baseline: publishing every record empty (k-mapped trivially, CUL 1 wherever codes were)
    below = [f"Every one of the {total:,} capped code instances was censored: the release "
             "holds no code, no better than publishing empty records."] if total and not kept \
        else []
    return UtilityReport(NAME, metrics, {"distinguishability CDF": table}, charts, notes,
                         below_baseline=below)


def evaluate(files: Mapping[str, bytes], original: Dataset, params: Mapping[str, Any],
             rng: np.random.Generator) -> UtilityReport:
    """The entry point every family shares: the release's records in the sample's order (a
    patient the release leaves out counts as fully censored), against the population named
    by ``params['population']`` as the release's plan read it. Nothing here is random."""
    from ehr_release.algorithms.gccens.release import RECORDS_FILE, read_records
    from ehr_release.configuration.caps import parse_caps
    from ehr_release.ingest.population import population_of

    population = population_of(params)
    sample = [dict(m) for m in original.code_multisets()]
    released = dict(read_records(files[RECORDS_FILE]))
    records = [released.get(pid, {}) for pid in original.patient_ids]
    index = PopulationIndex(population.multisets, codes={c for r in sample for c in r})
    return evaluate_censoring(records, sample, index, int(params["k"]),
                              parse_caps(str(params.get("caps", "max"))))
