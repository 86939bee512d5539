"""Synthetic EHR extracts whose codes depend on age and gender as in a real extract.

Why: the other generators (:mod:`ehr_release.samples.sample`, ``bench/artuc.py``) draw diagnosis
codes independently of the demographics (``sample`` only through a few hand-set age
slopes). ArtUC clusters records by demographics and then generalizes the codes of each
cluster; when codes do not depend on age and gender, no clustering can make a cluster's
codes more alike, which is not how real EHR data behaves. This module fits the joint
statistics of a real extract — by default the MIMIC-III demo (100 patients) — and draws
any number of patients from them.

The model (fitted by :func:`fit`, drawn by :func:`generate`)
------------------------------------------------------------
Cells are (age band, gender), age bands :data:`AGE_BANDS` (15–44, 45–64, 65–79, 80–90;
90 stands for "90 or older" as in MIMIC) × genders F, M: 8 cells. For a patient:

1. **Cell**: drawn from the cell counts of the extract with ½ added to each (Jeffreys), so
   an empty cell keeps a small probability.
2. **Age**: within the cell's band, from the cell's observed ages smoothed by a uniform
   kernel of ±:data:`AGE_KERNEL` years (truncated to the band), mixed with
   :data:`AGE_UNIFORM` of the uniform distribution on the band.
3. **Number of distinct codes** K: the empirical distribution of the cell's patients.
   Backoff for sparse cells: a cell with fewer than :data:`MIN_CELL` patients uses its age
   band's patients (both genders); a band with fewer uses every patient.
4. **Codes**: K distinct codes by successive sampling (draw, redraw duplicates) from the
   cell's weights ``w_g``. Counts are patient-code pairs: ``n_g(c)`` patients of cell g
   have code c, ``N_g = Σ_c n_g(c)``, ``S_g`` codes occur in cell g; n(c), N, S the same
   over all patients; N1 the number of codes occurring in exactly one patient.

   * *Cell weights* (interpolated absolute discounting; sparse cells back off to the global
     weights): ``w_g(c) = max(n_g(c) − d, 0) / (N_g + α) + λ_g·p(c)`` with ``d = N1 / S``
     (Good–Turing's missing mass per seen code) and ``λ_g = (d·S_g + α) / (N_g + α)``,
     so each row sums to 1. α = :data:`ALPHA` pseudo-pairs (≈ 7 demo patients' codes)
     makes a sparse cell lean on the global weights: the demo's 4-patient cell takes
     ≈ 80 % of its weights from them, its 29-patient cell ≈ 50 %.
   * *Global weights* ``p(c)``: a code of the extract gets ``(n(c) − d') / N``; what this
     discount frees goes to the **leaves of the ICD-9 hierarchy absent from the extract**.
     Their share is set so that, over all cells, a share ``M0 = N1 / N`` of the draws falls
     on them — the Good–Turing estimate of the share of draws landing on codes never seen
     (348 / 1,489 = 23 % in the demo); since cells reach p only through λ_g, p's own share
     is ``M0 / mean(λ_g)`` (capped at ``S / N``, i.e. ``d' ≤ 1``). They back off to their
     3-digit category: a category gets ``n(cat) + 1`` parts (its extract count, plus one
     so that categories absent from the extract are possible), spread uniformly over its
     unseen leaves. Without this tail 208K generated patients would share the demo's 581
     codes; with it they use most of ICD-9's 14,567 leaves (EHRD, the paper's 208K-patient
     data, has 13,963 codes). Unseen codes reach every cell through the global weights
     only: their age/gender dependence is not estimated.

:func:`expected_prevalence` gives the share of a cell's patients expected to carry each code
under this model (Rosén's approximation of successive sampling), which is what the tests
compare generated data against.

ICD-10-CM
---------
The model takes the fitted extract's code system (:attr:`CodeModel.code_system`): fitted to
the ICD-10-CM copy of the demo (``examples/data/mimic3-demo-icd10``, its codes mapped with
the CMS GEMs), the tail is the ICD-10-CM leaves absent from it (≈ 74,000, 7th-character
extensions included) backed off to ICD-10-CM categories, and the draws are ICD-10-CM
(``tests/test_synthetic_icd10.py``; ``bench/artuc_realistic.py --code-system icd10``).

Assumptions and limits
----------------------
* Given the cell, codes are exchangeable draws: no comorbidity structure beyond what age
  and gender carry (diabetes does not make hypertension likelier within a cell), no repeat
  visits, no dates (diagnosis ages are missing, as in a cross-sectional extract).
* 100 patients fit 8 cells: a cell's code frequencies rest on 4–29 patients, so most of a
  code's age/gender dependence is smoothing. The dependence of the *common* codes (seen in
  many patients) is real; that of rare codes is mostly the global frequency.
* Unseen codes are uniform within their category and their category's weight is its
  extract count + 1: real tails are Zipf-like within categories, and the add-one makes
  categories absent from the demo as likely as a category seen once.
* Only age and gender are generated (the demographics of the paper's EHRD data); other
  MIMIC demographics (ethnicity, insurance, …) are not, so no real combination is copied.
* No patient value is copied: ages are resampled with a kernel, codes from weights; patient
  identifiers are ``R000001``-style counters. The fit itself holds counts of the extract.

Deterministic: the same model, size and generator state give the same dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ehr_release.core.errors import ParameterError
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset
from ehr_release.model.hierarchy import Hierarchy, code_hierarchy
from ehr_release.samples.sample import check_patient_count

#: Age bands (inclusive); the last one holds MIMIC's 90 ("90 or older").
AGE_BANDS: tuple[tuple[int, int], ...] = ((15, 44), (45, 64), (65, 79), (80, 90))
GENDERS: tuple[str, ...] = ("F", "M")
#: Pseudo-count (in patient-code pairs) of the global weights in a cell's weights.
ALPHA = 100.0
#: Fewest patients a cell needs to use its own distribution of codes per patient.
MIN_CELL = 10
#: Half-width (years) of the uniform kernel smoothing a cell's ages.
AGE_KERNEL = 3
#: Share of the uniform distribution on the band in a cell's age distribution.
AGE_UNIFORM = 0.1
#: Level of the 3-digit categories in the packaged hierarchy.
CATEGORY_LEVEL = 3


@dataclass(frozen=True, eq=False)
class CodeModel:
    """What :func:`fit` learned: cells, their ages, code counts and code weights.

    Cell ``g`` is ``(band, gender) = divmod(g, len(genders))``.
    """

    bands: tuple[tuple[int, int], ...]
    genders: tuple[str, ...]
    cell_share: np.ndarray  # (cells,) probability of each cell
    age_pmf: tuple[np.ndarray, ...]  # per cell, over the band's ages lo..hi
    count_support: tuple[np.ndarray, ...]  # per cell, codes-per-patient values
    count_pmf: tuple[np.ndarray, ...]  # per cell, their probabilities
    vocabulary: np.ndarray  # object array of codes: the extract's, then the unseen leaves
    seen: int  # the first ``seen`` codes of the vocabulary occur in the extract
    weights: np.ndarray  # (cells, codes) draw weights, rows sum to 1
    unseen_mass: float  # Good–Turing M0
    code_system: str = "icd9"  # the fitted extract's (:class:`~ehr_release.model.dataset.Dataset`)

    @property
    def n_cells(self) -> int:
        return len(self.cell_share)

    def cell(self, band: int, gender: str) -> int:
        return band * len(self.genders) + self.genders.index(gender)


def _band_of(age: np.ndarray, bands: tuple[tuple[int, int], ...]) -> np.ndarray:
    out = np.full(len(age), -1)
    for b, (lo, hi) in enumerate(bands):
        out[(age >= lo) & (age <= hi)] = b
    return out


def fit(dataset: Dataset, *, bands: tuple[tuple[int, int], ...] = AGE_BANDS,
        genders: tuple[str, ...] = GENDERS, alpha: float = ALPHA,
        hierarchy: Hierarchy | None = None) -> CodeModel:
    """Fit the model of the module docstring to ``dataset`` (age, gender, diagnosis codes).

    Patients outside the bands or genders are left out of the fit. Codes that are not
    hierarchy nodes are refused (the generator must only produce valid codes).

    Raises
    ------
    ParameterError
        If no patient falls in a cell, or a code is not a node of the hierarchy.
    """
    h = hierarchy or code_hierarchy(dataset.code_system)
    pats = dataset.patients
    age = pats["age"].astype("Int64").to_numpy(dtype=float, na_value=np.nan)
    band = _band_of(np.nan_to_num(age, nan=-1), bands)
    gender = pats["gender"].to_numpy(dtype=object)
    g_idx = np.array([genders.index(x) if x in genders else -1 for x in gender])
    keep = (band >= 0) & (g_idx >= 0)
    if not keep.any():
        raise ParameterError("dataset", "must have patients with an age in the bands and a "
                             "gender among " + ", ".join(genders), dataset.source)
    n_cells = len(bands) * len(genders)
    cell = np.where(keep, band * len(genders) + g_idx, -1)
    cell_of = pd.Series(cell, index=pats.index)

    pairs = dataset.diagnoses[[PATIENT_ID, CODE]].drop_duplicates()
    pairs = pairs[cell_of.loc[pairs[PATIENT_ID]].to_numpy() >= 0]
    bad = sorted(set(pairs[CODE]) - set(h.parent))
    if bad:
        raise ParameterError("dataset", "codes must be nodes of the extract's code hierarchy",
                             f"{len(bad)} codes")
    seen_codes = np.array(sorted(set(pairs[CODE])), dtype=object)
    code_pos = {c: i for i, c in enumerate(seen_codes)}
    pc = cell_of.loc[pairs[PATIENT_ID]].to_numpy()
    pi = np.array([code_pos[c] for c in pairs[CODE]], dtype=np.int64)
    n_gc = np.zeros((n_cells, len(seen_codes)))
    np.add.at(n_gc, (pc, pi), 1.0)
    n_c = n_gc.sum(axis=0)
    big_n = n_c.sum()
    singletons = float((n_c == 1).sum())
    unseen_mass = singletons / big_n
    discount = singletons / len(seen_codes)  # d = N1 / S ≤ 1

    # Unseen leaves, weighted through their 3-digit category.
    seen_set = set(seen_codes)
    unseen = np.array(sorted(c for c in h.parent if h.is_leaf(c) and c not in seen_set),
                      dtype=object)
    cats = sorted({h.ancestor_at_level(c, CATEGORY_LEVEL) for c in unseen})
    cat_pos = {c: i for i, c in enumerate(cats)}
    unseen_cat = np.array([cat_pos[h.ancestor_at_level(c, CATEGORY_LEVEL)] for c in unseen])
    seen_cat = np.array([cat_pos.get(h.ancestor_at_level(c, CATEGORY_LEVEL), -1)
                         for c in seen_codes])
    has_cat = seen_cat >= 0
    r = np.bincount(seen_cat[has_cat], weights=n_c[has_cat], minlength=len(cats)) + 1.0
    r /= r.sum()
    leaves_per_cat = np.bincount(unseen_cat, minlength=len(cats))
    tail = r[unseen_cat] / leaves_per_cat[unseen_cat]

    n_g = n_gc.sum(axis=1)
    distinct_g = (n_gc > 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        backoff = np.where(n_g + alpha > 0,
                           (discount * distinct_g + alpha) / (n_g + alpha), 1.0)
    counts_per_cell = np.bincount(cell[keep], minlength=n_cells) + 0.5
    cell_share = counts_per_cell / counts_per_cell.sum()
    # The cells draw unseen codes only through their backoff share: the global weights give
    # the tail M0 / (mean backoff) so that M0 of all draws fall there (at most S/N of it,
    # a discount of one pair per seen code).
    tail_mass = min(unseen_mass / float(cell_share @ backoff), len(seen_codes) / big_n)
    discount_global = tail_mass * big_n / len(seen_codes)
    global_w = np.concatenate([(n_c - discount_global) / big_n, tail_mass * tail])
    own = np.maximum(n_gc - discount, 0.0) / np.maximum(n_g + alpha, 1e-12)[:, None]
    weights = np.hstack([own, np.zeros((n_cells, len(unseen)))]) \
        + backoff[:, None] * global_w[None, :]
    weights /= weights.sum(axis=1, keepdims=True)

    n_codes = pd.Series(0, index=pats.index).add(
        pairs.groupby(PATIENT_ID).size(), fill_value=0).to_numpy()
    support, pmf = [], []
    for g in range(n_cells):
        b = g // len(genders)
        pool = n_codes[cell == g]
        if len(pool) < MIN_CELL:
            pool = n_codes[keep & (band == b)]
        if len(pool) < MIN_CELL:
            pool = n_codes[keep]
        values, counts = np.unique(pool[pool > 0], return_counts=True)
        support.append(values.astype(np.int64))
        pmf.append(counts / counts.sum())

    return CodeModel(
        bands=bands, genders=genders, cell_share=cell_share,
        age_pmf=tuple(_age_pmf(age[cell == g], bands[g // len(genders)])
                      for g in range(n_cells)),
        count_support=tuple(support), count_pmf=tuple(pmf),
        vocabulary=np.concatenate([seen_codes, unseen]), seen=len(seen_codes),
        weights=weights, unseen_mass=unseen_mass, code_system=dataset.code_system)


def _age_pmf(ages: np.ndarray, band: tuple[int, int]) -> np.ndarray:
    """Kernel-smoothed ages of one cell on the band's integer ages (module docstring, 2)."""
    lo, hi = band
    grid = np.arange(lo, hi + 1)
    uniform = np.full(len(grid), 1.0 / len(grid))
    if len(ages) == 0:
        return uniform
    near = np.abs(grid[None, :] - ages[:, None]) <= AGE_KERNEL
    kernel = near / near.sum(axis=1, keepdims=True)
    pmf = (1 - AGE_UNIFORM) * kernel.mean(axis=0) + AGE_UNIFORM * uniform
    return pmf / pmf.sum()


def expected_prevalence(model: CodeModel) -> np.ndarray:
    """(cells, codes): share of a cell's patients expected to carry each code.

    Successive sampling of K codes with weights w includes code c with probability close to
    ``1 − exp(−w_c·τ_K)``, τ_K solving ``Σ_c (1 − exp(−w_c·τ)) = K`` (Rosén 1997, "On
    sampling with probability proportional to size", the order-sampling view of successive
    sampling); averaged over the cell's distribution of K.
    """
    out = np.zeros_like(model.weights)
    for g in range(model.n_cells):
        w = model.weights[g]
        ks = model.count_support[g].astype(float)
        lo, hi = np.zeros(len(ks)), np.ones(len(ks))
        while (short := (1 - np.exp(-np.outer(hi, w))).sum(axis=1) < ks).any():
            hi = np.where(short, hi * 2, hi)
        for _ in range(60):  # bisection on τ, all K at once
            mid = (lo + hi) / 2
            below = (1 - np.exp(-np.outer(mid, w))).sum(axis=1) < ks
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        tau = (lo + hi) / 2
        out[g] = model.count_pmf[g] @ (1 - np.exp(-np.outer(tau, w)))
    return out


def generate(model: CodeModel, n_patients: int, rng: np.random.Generator) -> Dataset:
    """Draw ``n_patients`` patients (age, gender, distinct codes) from ``model``.

    Raises
    ------
    ParameterError
        If ``n_patients`` is not a positive integer.

    Examples
    --------
    >>> from ehr_release.ingest import read_dataset
    >>> model = fit(read_dataset("../shared/data/mimic3-demo"))  # doctest: +SKIP
    >>> generate(model, 1000, np.random.default_rng(0)).n_patients  # doctest: +SKIP
    1000
    """
    n = check_patient_count(n_patients)
    cell = rng.choice(model.n_cells, n, p=model.cell_share)
    age = np.zeros(n, dtype=np.int64)
    k = np.zeros(n, dtype=np.int64)
    owners, codes = [], []
    for g in range(model.n_cells):
        members = np.flatnonzero(cell == g)
        if len(members) == 0:
            continue
        lo, hi = model.bands[g // len(model.genders)]
        age[members] = lo + rng.choice(hi - lo + 1, len(members), p=model.age_pmf[g])
        k[members] = model.count_support[g][
            rng.choice(len(model.count_support[g]), len(members), p=model.count_pmf[g])]
        o, c = _successive_sample(rng, model.weights[g], k[members])
        owners.append(members[o])
        codes.append(c)
    owner = np.concatenate(owners)
    code = np.concatenate(codes)
    order = np.lexsort((code, owner))
    owner, code = owner[order], code[order]

    width = max(6, len(str(n)))
    ids = np.char.add("R", np.char.zfill(np.arange(1, n + 1).astype(str), width)).astype(object)
    gender = np.array(model.genders, dtype=object)[cell % len(model.genders)]
    patients = pd.DataFrame({"age": pd.array(age, dtype="Int64"), "gender": gender},
                            index=pd.Index(ids, name=PATIENT_ID))
    diagnoses = pd.DataFrame({
        PATIENT_ID: ids[owner], CODE: model.vocabulary[code],
        AGE: pd.array(np.full(len(owner), pd.NA), dtype="Int64")})
    return Dataset(patients, diagnoses,
                   source=f"synthetic, fitted to age and gender (n={n})",
                   code_system=model.code_system)


def _successive_sample(rng: np.random.Generator, weights: np.ndarray,
                       k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``k[i]`` distinct codes for each patient i: i.i.d. draws, duplicates redrawn.

    Each round draws exactly each patient's deficit, so the result is the first ``k[i]``
    distinct values of an i.i.d. stream — successive sampling without replacement.
    """
    v = len(weights)
    if k.max(initial=0) > v:
        raise ParameterError("k", "cannot exceed the vocabulary size", int(k.max()))
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    chosen = np.empty(0, dtype=np.int64)
    need = k.copy()
    while (need > 0).any():
        owner = np.repeat(np.arange(len(k)), need)
        draw = np.minimum(np.searchsorted(cdf, rng.random(len(owner)), side="right"), v - 1)
        keys = np.unique(owner * v + draw)
        keys = keys[~np.isin(keys, chosen, assume_unique=True)]
        chosen = np.union1d(chosen, keys)
        need = k - np.bincount(chosen // v, minlength=len(k))
    return chosen // v, chosen % v
