"""Utility of a (k, k^m) release: NCP, UL, ARE on count workloads, suppression, comparisons.

Everything is measured from the published bytes, as a researcher would:

* **NCP** of the generalized demographics and **UL** of the generalized codes (Def. 3–6), UL
  split into its generalization part and its suppression part (the paper's ULgen/ULsup). The
  release does not publish how many codes each record lost (issue 14: a side channel), so
  the suppression part is the release's total — recovered by matching the original records
  to the released ones, as the verifier does — divided by the number of records;
* **ARE** of COUNT queries (Def. 7) on three workloads of random queries built from real
  records: W1 two demographics, W2 one demographic and one code, W3 two codes. Generalized
  data answers under the uniform assumption (spec Decision): a range or node matches in
  proportion to the leaves it covers (integers of a range, leaves of a node), and a
  generalized code ũ holds a given code with probability 2^(|ũ|−1)/(2^|ũ|−1), two given
  codes with 2^(|ũ|−2)/(2^|ũ|−1);
* records and codes suppressed, utility-constraint satisfaction (for RmR, which ignores them);
* optionally the same figures for the comparators and the paper's "additional utility loss"
  ½·(ΔNCP/NCP + ΔUL/UL) of RmR and Baseline relative to ArtUC.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from ehr_release.configuration.constraints import (
    CategoricalAttribute,
    NumericalAttribute,
    RTConfig,
    RTData,
    rt_data,
)
from ehr_release.configuration.relaxation import Ceilings
from ehr_release.model.dataset import Dataset
from ehr_release.model.reports import Chart, UtilityReport
from ehr_release.privacy.kkm import check_kkm, suppressed_occurrences

RELEASE_FILE = "records.parquet"
CODES_FILE = "generalized_codes.parquet"
IDS_COLUMN = "generalized_codes"
QUERIES = 100
WORKLOADS = ("W1", "W2", "W3")


@dataclass(frozen=True)
class Release:
    """A parsed release as columns: demographics per attribute, codes per record.

    Records that show the same generalized code share one list object: a cluster repeats
    its generalized codes (often hundreds of codes each) on every record, and a list per
    record made the 208,387-record benchmark release need more than 23 GB. Measures that
    walk generalized codes do so once per distinct list (:attr:`distinct_items`).
    """

    demographics: list[dict[str, object]]
    codes: list[list[list[str]]]
    #: The published files (the suppression total is recovered from them and the original).
    files: Mapping[str, bytes] = field(default_factory=dict)

    @classmethod
    def parse(cls, files: Mapping[str, bytes]) -> Release:
        """Both tables with pyarrow: each generalized code built once, records as columns."""
        table = pq.read_table(io.BytesIO(files[CODES_FILE]))
        members: list[list[str]] = table.column("codes").to_pylist()
        if table.column("id").to_pylist() != list(range(len(members))):
            raise ValueError(f"{CODES_FILE}: ids are not 0, 1, … in row order")
        records = pq.read_table(io.BytesIO(files[RELEASE_FILE]))
        names = [c for c in records.column_names if c not in ("cluster", IDS_COLUMN)]
        columns = [records.column(n).to_pylist() for n in names]
        demographics = [dict(zip(names, row, strict=True)) for row in zip(*columns,
                                                                          strict=True)]
        if not names:
            demographics = [{} for _ in range(records.num_rows)]
        codes = [[members[i] for i in ids] for ids in records.column(IDS_COLUMN).to_pylist()]
        return cls(demographics, codes, files)

    @cached_property
    def distinct_items(self) -> dict[int, tuple[list[str], list[int]]]:
        """id of each distinct generalized-code list → (the list, the records showing it).

        Computed once: the estimator and two measures read it for every release evaluated.
        """
        out: dict[int, tuple[list[str], list[int]]] = {}
        for i, items in enumerate(self.codes):
            for g in items:
                entry = out.get(id(g))
                if entry is None:
                    entry = out[id(g)] = (g, [])
                entry[1].append(i)
        return out


# --------------------------------------------------------------------------- NCP and UL
def record_ncp(release: Release, config: RTConfig) -> np.ndarray:
    out = np.zeros(len(release.codes))
    for attr in config.attributes:
        vals = [d[attr.name] for d in release.demographics]
        if isinstance(attr, NumericalAttribute):
            arr = np.array(vals, dtype=float).reshape(-1, 2)
            out += attr.weight * (arr[:, 1] - arr[:, 0]) / attr.span
        else:
            assert isinstance(attr, CategoricalAttribute)
            h = attr.hierarchy
            total = len(h.leaves_under(h.root))
            cost = {v: 0.0 if h.is_leaf(v) else len(h.leaves_under(v)) / total
                    for v in set(vals)}
            out += attr.weight * np.array([cost[v] for v in vals])
    return out


def record_ul(release: Release, weight_of: Mapping[str, float] | None = None) -> np.ndarray:
    """The generalization part of UL(r) for every record (Def. 6); the suppression part,
    Σ s(r), is a release total (:func:`suppressed_occurrences`).

    ``weight_of`` maps codes to their code set's weight; w(ũ) (Def. 5) is the largest weight
    of ũ's codes (one set's weight for ArtUC, whose ũ stay inside one set). Empty or None:
    every w(ũ) = 1.
    """
    gen = np.zeros(len(release.codes))
    item_weight: dict[int, float] = {}
    for i, items in enumerate(release.codes):
        sizes = np.array([len(g) for g in items], dtype=float)
        sigma = sizes.sum()
        if sigma > 0:
            big = sizes[sizes >= 2]
            term = np.exp2(big - sigma) * (1 - np.exp2(-big))
            if weight_of:
                for g in items:
                    if id(g) not in item_weight:
                        item_weight[id(g)] = max(weight_of.get(c, 1.0) for c in g)
                term = term * np.array([item_weight[id(g)] for g in items if len(g) >= 2])
            gen[i] = float(np.sum(term) / (1 - np.exp2(-sigma)))
    return gen


# --------------------------------------------------------------------------- ARE
@dataclass(frozen=True)
class Query:
    """COUNT(*) WHERE the demographics equal ``values`` and the record holds ``codes``."""

    values: tuple[tuple[str, object], ...]
    codes: tuple[str, ...]


def workloads(data: RTData, config: RTConfig, rng: np.random.Generator,
              n: int = QUERIES) -> dict[str, list[Query]]:
    """Random queries from random original records, so every true count is ≥ 1."""
    names = config.names
    multi = [i for i, c in enumerate(data.codes) if len(c) >= 2]
    some = [i for i, c in enumerate(data.codes) if c]
    out: dict[str, list[Query]] = {w: [] for w in WORKLOADS}
    rows = data.demographics
    for _ in range(n):
        if len(names) >= 2:
            r = int(rng.integers(len(data.patient_ids)))
            a, b = rng.choice(len(names), 2, replace=False)
            out["W1"].append(Query(((names[a], rows.iloc[r, a]), (names[b], rows.iloc[r, b])),
                                   ()))
        if some:
            r = some[int(rng.integers(len(some)))]
            a = int(rng.integers(len(names)))
            code = sorted(data.codes[r])[int(rng.integers(len(data.codes[r])))]
            out["W2"].append(Query(((names[a], rows.iloc[r, a]),), (code,)))
        if multi:
            r = multi[int(rng.integers(len(multi)))]
            pair = rng.choice(sorted(data.codes[r]), 2, replace=False)
            out["W3"].append(Query((), tuple(sorted(map(str, pair)))))
    return out


class Estimator:
    """Expected COUNT answers on a release under the uniform assumption."""

    def __init__(self, release: Release, config: RTConfig, data: RTData) -> None:
        self.release, self.config = release, config
        # Indexed by generalized-code list, not by code occurrence: a list's id stands for
        # "this generalized code of this record" (a record holds a list at most once).
        items = list(release.distinct_items.values())
        self.item_records = [np.array(recs, dtype=np.int64) for _, recs in items]
        self.item_size = np.array([len(g) for g, _ in items], dtype=np.int64)
        self.items_of_code: dict[str, list[int]] = defaultdict(list)
        for j, (g, _) in enumerate(items):
            for c in g:
                self.items_of_code[c].append(j)
        self.integral = {a.name: bool(np.all(np.mod(data.demographics[a.name], 1) == 0))
                         for a in config.attributes if isinstance(a, NumericalAttribute)}
        self.observed = {a.name: np.unique(data.demographics[a.name].to_numpy(float))
                         for a in config.attributes if isinstance(a, NumericalAttribute)}

    def _demo(self, name: str, value: object) -> np.ndarray:
        attr = next(a for a in self.config.attributes if a.name == name)
        vals = [d[name] for d in self.release.demographics]
        if isinstance(attr, NumericalAttribute):
            arr = np.array(vals, dtype=float).reshape(-1, 2)
            v = float(value)
            inside = (arr[:, 0] <= v) & (v <= arr[:, 1])
            if self.integral[name]:
                width = np.floor(arr[:, 1]) - np.ceil(arr[:, 0]) + 1
            else:
                obs = self.observed[name]
                width = (np.searchsorted(obs, arr[:, 1], side="right")
                         - np.searchsorted(obs, arr[:, 0], side="left")).astype(float)
            return np.where(inside, 1.0 / np.maximum(width, 1.0), 0.0)
        assert isinstance(attr, CategoricalAttribute)
        h = attr.hierarchy
        want = set(h.leaves_under(str(value)))
        share = {g: len(want & set(h.leaves_under(g))) / len(h.leaves_under(g))
                 for g in set(vals)}
        return np.array([share[g] for g in vals])

    def _holders(self, code: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(record, size of its generalized code holding ``code``, that code's id) arrays."""
        js = self.items_of_code.get(code, [])
        if not js:
            return (np.empty(0, np.int64),) * 3
        lens = [len(self.item_records[j]) for j in js]
        recs = np.concatenate([self.item_records[j] for j in js])
        ids = np.repeat(np.array(js, dtype=np.int64), lens)
        return recs, self.item_size[ids], ids

    def count(self, q: Query) -> float:
        n = len(self.release.codes)
        p = np.ones(n)
        for name, value in q.values:
            p *= self._demo(name, value)
        if q.codes:
            per_code = []
            for c in q.codes:
                recs, size, uid = self._holders(c)
                pc = np.zeros(n)
                pc[recs] = 1.0 / (2.0 - np.exp2(1.0 - size))
                ids = np.full(n, -1, dtype=np.int64)
                ids[recs] = uid
                per_code.append((pc, ids, size, recs))
            if len(per_code) == 2:
                (p1, id1, _, _), (p2, id2, size2, recs2) = per_code
                joint = p1 * p2
                same = (id1 == id2) & (id1 >= 0)
                if same.any():
                    size_of = np.zeros(n)
                    size_of[recs2] = size2
                    joint[same] = 1.0 / (4.0 - np.exp2(2.0 - size_of[same]))
                p *= joint
            else:
                p *= per_code[0][0]
        return float(p.sum())


def true_count(q: Query, data: RTData) -> int:
    mask = np.ones(len(data.patient_ids), dtype=bool)
    for name, value in q.values:
        mask &= (data.demographics[name] == value).to_numpy()
    if q.codes:
        mask &= np.fromiter((set(q.codes) <= c for c in data.codes), dtype=bool,
                            count=len(data.codes))
    return int(mask.sum())


def are(release: Release, config: RTConfig, data: RTData,
        queries: Mapping[str, list[Query]], truth: Mapping[str, list[int]]) -> dict[str, float]:
    est = Estimator(release, config, data)
    out = {}
    for w, qs in queries.items():
        if qs:
            errors = [abs(est.count(q) - t) / t for q, t in zip(qs, truth[w], strict=True)]
            out[w] = float(np.mean(errors))
    return out


# --------------------------------------------------------------------------- report
def measure(release: Release, config: RTConfig, data: RTData,
            queries: Mapping[str, list[Query]], truth: Mapping[str, list[int]],
            lost: int) -> dict[str, float]:
    """The figures of one release (one row of the comparison table); ``lost`` is the
    number of code occurrences its records lost (Σ s(r))."""
    n = len(release.codes)
    ncp = record_ncp(release, config)
    gen = record_ul(release, config.code_weights())
    sup = lost / n if n else 0.0
    released_codes = {c for g, _ in release.distinct_items.values() for c in g}
    original_codes = {c for r in data.codes for c in r}
    out = {
        "NCP": float(ncp.mean()) if n else 0.0,
        "UL": float(gen.mean()) + sup if n else 0.0,
        "UL generalization": float(gen.mean()) if n else 0.0,
        "UL suppression": sup,
        "records released": float(n),
        "records suppressed": float(len(data.patient_ids) - n),
        "code occurrences suppressed": float(lost),
        "distinct codes absent from release": float(len(original_codes - released_codes)),
    }
    out.update({f"ARE {w}": v for w, v in are(release, config, data, queries, truth).items()})
    return out


def constraint_share(release: Release, config: RTConfig) -> float:
    """Share of records whose generalization satisfies the utility constraints (Def. 9)."""
    if not config.constraints or not release.codes:
        return 1.0
    parts = list(dict.fromkeys(u.demographics for u in config.constraints))
    set_of = {c: i for i, cs in enumerate({u.codes.codes for u in config.constraints})
              for c in cs}
    inside_one_set = {j: len({set_of.get(c, -1) for c in g}) == 1 and g[0] in set_of
                      for j, (g, _) in release.distinct_items.items()}
    ok = 0
    for demo, items in zip(release.demographics, release.codes, strict=True):
        fits = any(all(_within(attr, demo[attr.name], el)
                       for attr, el in zip(config.attributes, part, strict=True))
                   for part in parts)
        ok += bool(fits and all(inside_one_set[id(g)] for g in items))
    return ok / len(release.codes)


def _within(attr: object, value: object, element: object) -> bool:
    if isinstance(attr, NumericalAttribute):
        lo, hi = value
        return element.low <= lo and hi <= element.high
    assert isinstance(attr, CategoricalAttribute)
    return value == element or element in attr.hierarchy.ancestors(str(value))


def _overlaps(attr: object, value: object, element: object) -> bool:
    if isinstance(attr, NumericalAttribute):
        lo, hi = value
        return lo <= element.high and element.low <= hi
    assert isinstance(attr, CategoricalAttribute)
    up = attr.hierarchy.ancestors
    return value == element or element in up(str(value)) or value in up(str(element))


#: Above this many constraints the exactness table lists only those that do not hold.
EXACTNESS_ROWS = 50


def constraint_exactness(release: Release, config: RTConfig) -> list[dict[str, object]]:
    """Per utility constraint u, whether the release keeps within it exactly (Def. 9).

    u does not hold exactly when a released record's generalized demographics overlap u's
    demographic part without lying inside any constraint's part, or a generalized code
    holds codes of u's code set together with codes outside it. Measured on the published
    bytes alone, so it says the same for every algorithm (RmR ignores the constraints).
    """
    parts = config.demographic_parts()
    sets = list(dict.fromkeys(u.codes.codes for u in config.constraints))
    set_of = {c: i for i, cs in enumerate(sets) for c in cs}
    demo_out = np.zeros(len(parts), dtype=np.int64)
    seen: dict[tuple, int] = {}
    for demo in release.demographics:
        key = tuple(tuple(v) if isinstance(v, list) else v for v in demo.values())
        seen[key] = seen.get(key, 0) + 1
    names = config.names
    for key, count in seen.items():
        demo = dict(zip(names, key, strict=True))
        if any(all(_within(a, demo[a.name], el) for a, el in zip(config.attributes, part,
                                                                  strict=True))
               for part in parts):
            continue
        for p, part in enumerate(parts):
            if all(_overlaps(a, demo[a.name], el)
                   for a, el in zip(config.attributes, part, strict=True)):
                demo_out[p] += count
    code_out = np.zeros(len(sets), dtype=np.int64)
    for g, _ in release.distinct_items.values():
        owners = {set_of.get(c, -1) for c in g}
        if len(owners) > 1 or -1 in owners:
            for o in owners - {-1}:
                code_out[o] += 1
    part_of = {part: p for p, part in enumerate(parts)}
    set_index = {cs: i for i, cs in enumerate(sets)}
    rows: list[dict[str, object]] = []
    for u in config.constraints:
        outside = int(demo_out[part_of[u.demographics]])
        exceeding = int(code_out[set_index[u.codes.codes]])
        rows.append({"constraint": u.name, "holds exactly": "yes" if not (outside or exceeding)
                     else "no", "records exceeding its demographics": outside,
                     "generalized codes exceeding its code set": exceeding})
    return rows


def exactness_table(rows: list[dict[str, object]], notes: list[str]) -> list[dict[str, object]]:
    """The rows the certificate shows: all of them, or past :data:`EXACTNESS_ROWS` only the
    constraints that do not hold exactly (with a note saying so)."""
    if len(rows) <= EXACTNESS_ROWS:
        return rows
    broken = [r for r in rows if r["holds exactly"] != "yes"]
    notes.append(f"utility constraints: {len(rows) - len(broken)} of {len(rows)} hold exactly; "
                 "the table lists only those that do not")
    return broken


# --------------------------------------------------------------------------- Algorithm 2
def codes_suppressed(files: Mapping[str, bytes], original: Dataset,
                     config: RTConfig) -> int | None:
    """The quantity ε bounds (codes suppressed, distinct per cluster), counted by the
    independent verifier on its matching of original to released records — the figure its
    "suppression bound ε" requirement reports. None when no matching exists."""
    report = check_kkm(dict(files), original, config, algorithm="evaluation", k=1, m=1,
                        delta=None, epsilon=math.inf, constrained=False)
    for req in report.requirements:
        if "suppressed_codes" in req.evidence:
            return int(req.evidence["suppressed_codes"])
    return None


def relaxations(check: Ceilings, ncp: float, suppressed: int | None,
                exact: list[dict[str, object]],
                notes: list[str]) -> list[dict[str, object]]:
    """Algorithm 2's relaxations as the release shows them: one row per requirement of
    Problem 1 it touches (1: NCP ≤ δ, 4: ≤ ε codes suppressed) and Requirement 3, which it
    never relaxes; a note per relaxation found.

    Which step relaxed δ (3: the k-anonymous clustering alone exceeds δ; 14: merges above δ
    while more than ε codes were suppressed) is not visible in the release; the anonymizer
    returns it (``Anonymization.relaxations``) but it is not published.
    """
    delta_relaxed = ncp > check.delta + 1e-9
    eps_relaxed = suppressed is not None and suppressed > check.epsilon + 1e-9
    held = sum(r["holds exactly"] == "yes" for r in exact)
    rows: list[dict[str, object]] = [
        {"requirement": "1: NCP ≤ δ", "asked": check.delta, "ceiling": check.delta_max,
         "release": ncp, "relaxed": "yes" if delta_relaxed else "no"},
        {"requirement": "4: codes suppressed ≤ ε", "asked": check.epsilon,
         "ceiling": check.epsilon_max,
         "release": "not countable" if suppressed is None else suppressed,
         "relaxed": "yes" if eps_relaxed else ("unknown" if suppressed is None else "no")},
        {"requirement": "3: utility constraints (Def. 9)", "asked": "all hold",
         "ceiling": "never relaxed", "release": f"{held} of {len(exact)} hold exactly",
         "relaxed": "no" if held == len(exact) else "VIOLATED"},
    ]
    if delta_relaxed:
        notes.append(f"Algorithm 2 relaxed δ (Requirement 1): the release's NCP {ncp:.4f} is "
                     f"above δ = {check.delta:g} (the owner's ceiling relax_delta = "
                     f"{check.delta_max:g}); ArtUC merged clusters above δ, or its "
                     "k-anonymous clustering alone exceeded δ, to bring suppression down")
    if eps_relaxed:
        notes.append(f"Algorithm 2 relaxed ε (Requirement 4): {suppressed} codes suppressed, "
                     f"above ε = {check.epsilon:g} (the owner's ceiling relax_epsilon = "
                     f"{check.epsilon_max:g}), after merging up to relax_delta")
    if not delta_relaxed and not eps_relaxed and suppressed is not None:
        notes.append("Algorithm 2 (relax=true) applied no relaxation: the release meets δ and "
                     "ε, as Algorithm 1 would have produced it")
    if held != len(exact):
        notes.append(f"utility constraints: {len(exact) - held} do not hold exactly (see the "
                     "utility constraints table)")
    return rows


def additional_loss(other: Mapping[str, float], ref: Mapping[str, float]) -> float | None:
    """½·((NCP_X − NCP_A)/NCP_A + (UL_X − UL_A)/UL_A)·100 %, or None when undefined."""
    if ref["NCP"] <= 0 or ref["UL"] <= 0:
        return None
    return 50.0 * ((other["NCP"] - ref["NCP"]) / ref["NCP"] + (other["UL"] - ref["UL"])
                   / ref["UL"])


def _chart(rows: Mapping[str, Mapping[str, float]]) -> Chart:
    from ehr_release.utility.plotting import plt, png

    fig, ax = plt.subplots(figsize=(6, 3))
    width = 0.8 / max(len(rows), 1)
    for i, (name, m) in enumerate(rows.items()):
        values = [m.get(f"ARE {w}", 0.0) for w in WORKLOADS]
        ax.bar(np.arange(len(WORKLOADS)) + i * width, values, width, label=name)
    ax.set_xticks(np.arange(len(WORKLOADS)) + width * (len(rows) - 1) / 2, WORKLOADS)
    ax.set_ylabel("average relative error")
    ax.legend()
    fig.tight_layout()
    image = png(fig, dpi=120)
    return Chart("artuc-are", "ARE of COUNT queries: W1 two demographics, W2 one demographic "
                 "and one code, W3 two codes (lower is better)", image)


def _lost(release: Release, data: RTData, config: RTConfig, name: str,
          notes: list[str]) -> int:
    """Σ s(r) of a release; 0 with a note when no original-to-release matching exists."""
    lost = suppressed_occurrences(release.files, data, config)
    if lost is None:
        notes.append(f"{name}: suppressed codes cannot be counted (the records do not match "
                     "the original); UL leaves them out")
        return 0
    return lost


def evaluate_release(algorithm: str, files: Mapping[str, bytes], original: Dataset,
                     config: RTConfig, rng: np.random.Generator, *,
                     comparators: Mapping[str, Callable[[], Mapping[str, bytes]]] | None = None,
                     chart: bool = True, relax: Ceilings | None = None) -> UtilityReport:
    """Utility report of ``files``; ``comparators`` (name → release files) are run lazily,
    and a comparator that fails (δ or ε cannot be met) is noted rather than fatal.

    With utility constraints, the ``utility constraints`` table says which of them the
    release keeps exactly; ``relax`` (a release of Algorithm 2) adds the ``relaxations``
    table: which of δ and ε the release exceeds, recomputed from the release and the
    original, since the published bytes carry no such record."""
    data = rt_data(original, config)
    queries = workloads(data, config, rng)
    truth = {w: [true_count(q, data) for q in qs] for w, qs in queries.items()}
    release = Release.parse(files)
    notes: list[str] = []
    metrics = measure(release, config, data, queries, truth,
                      _lost(release, data, config, algorithm, notes))
    notes += [f"{len(original.demographic_columns) - len(config.attributes)} demographic "
             "columns of the input are not configured and were not released"]
    if original.is_longitudinal:
        notes.append("ages at diagnosis and repeated codes are not released (set-valued codes)")
    tables: dict[str, list[dict[str, object]]] = {}
    if config.constraints:
        metrics["records satisfying the utility constraints"] = constraint_share(release,
                                                                                 config)
        exact = constraint_exactness(release, config)
        tables["utility constraints"] = exactness_table(exact, notes)
        if relax is not None:
            tables["relaxations"] = relaxations(relax, metrics["NCP"], codes_suppressed(
                files, original, config), exact, notes)
    rows = {algorithm: metrics}
    for name, run in (comparators or {}).items():
        try:
            other = Release.parse(run())
        except Exception as exc:  # noqa: BLE001 - a comparator failing is a finding, not a crash
            notes.append(f"{name} produced no release: {exc}")
            continue
        rows[name] = measure(other, config, data, queries, truth,
                             _lost(other, data, config, name, notes))
        if config.constraints:
            rows[name]["records satisfying the utility constraints"] = constraint_share(
                other, config)
    if "artuc" in rows:
        for name in rows:
            if name != "artuc":
                loss = additional_loss(rows[name], rows["artuc"])
                if loss is None:
                    notes.append(f"additional utility loss of {name} is undefined (ArtUC has "
                                 "zero NCP or UL)")
                else:
                    rows[name]["additional utility loss vs ArtUC (%)"] = loss
                    if name != algorithm:
                        metrics[f"additional utility loss of {name} vs ArtUC (%)"] = loss
    table = [{"algorithm": name, **m} for name, m in rows.items()]
    charts = [_chart(rows)] if chart and len(release.codes) else []
    return UtilityReport(algorithm, metrics, {"comparison": table, **tables}, charts, notes)


def evaluate(files: Mapping[str, bytes], original: Dataset, params: Mapping[str, Any],
             rng: np.random.Generator, *, algorithm: str = "artuc",
             comparators: Mapping[str, Callable[[], Mapping[str, bytes]]] | None = None,
             ) -> UtilityReport:
    """The entry point every family shares: :func:`evaluate_release` under the run's
    configuration (the release plan's, else read from ``params``). A release of ArtUC's
    Algorithm 2 (``relax``) gets the relaxations table against the owner's ceilings.
    ``comparators`` are the other algorithms' releases of the same extract, which only the
    caller can make (they are anonymizer runs)."""
    from ehr_release.configuration.constraints import config_from_params
    from ehr_release.configuration.relaxation import relax_ceilings
    from ehr_release.parameters.prepared import prepared

    config = prepared(params, "config", lambda: config_from_params(params))
    relax = (relax_ceilings(params, len(original.distinct_codes()))
             if algorithm == "artuc" else None)
    return evaluate_release(algorithm, files, original, config, rng, comparators=comparators,
                            relax=relax)
