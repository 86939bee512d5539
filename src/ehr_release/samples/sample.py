"""Synthetic, MIMIC-like EHR extracts for demos, tests and benchmarks.

Real patient data cannot be shipped, yet the anonymization algorithms only show their
behaviour on data with the right *shape*: skewed code frequencies (a few codes in most
records, a long tail of rare ones), comorbidities that co-occur (diabetes with hypertension
and hyperlipidemia), codes clustered in one chapter per patient, and an outcome that depends
on age and diagnoses. :func:`generate_sample` produces such a
:class:`~ehr_release.model.dataset.Dataset`
from a seed, fully vectorized so that a million patients take seconds, not minutes.

Nothing here is derived from real patients: identifiers are ``S000001``-style counters and
every value is drawn from hand-set distributions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.core.errors import ParameterError
from ehr_release.model.dataset import AGE, CODE, PATIENT_ID, Dataset
from ehr_release.model.hierarchy import ICD9, ICD10, code_hierarchy

CLASS_COLUMN = "in_hospital_death"
CODES_COLUMN = "codes"
MIN_AGE, MAX_AGE = 18, 90
DEATH_RATE = 0.10
VOCABULARY_SIZE = 1200
#: The vocabulary is a fixed property of the generator, not of a sample: its own seed.
_VOCABULARY_SEED = 20_140_101
#: Zipf exponent and offset of the code-frequency law (rank r gets weight (r + q) ** -s).
_ZIPF_S, _ZIPF_Q = 1.1, 10.0
#: Share of a patient's background codes drawn from the patient's "main" chapter.
_CHAPTER_AFFINITY = 0.4

#: Common ICD-9 codes of an ICU population, most frequent first; they head the Zipf ranking.
COMMON_CODES = (
    "401.9", "428.0", "427.31", "414.01", "584.9", "250.00", "272.4", "518.81", "599.0",
    "530.81", "038.9", "285.9", "244.9", "995.92", "276.2", "496", "403.90", "V58.61",
    "311", "305.1", "486", "276.1", "585.9", "V45.81", "412", "V15.82", "507.0", "287.5",
    "785.52", "300.00", "491.21", "780.39", "571.5", "434.91", "348.1", "431", "070.54",
)


@dataclass(frozen=True)
class Comorbidity:
    """A cluster of codes that co-occur: a trigger code and companions.

    A patient has the cluster with probability ``logistic(logit + age_slope * (age - 60))``;
    such a patient then carries one of ``trigger`` codes and each companion with its
    conditional probability. This is what makes e.g. P(401.9 | 250.x) > P(401.9).
    """

    name: str
    trigger: tuple[str, ...]
    companions: tuple[tuple[str, float], ...]
    logit: float
    age_slope: float
    chronic: bool


COMORBIDITIES = (
    Comorbidity("metabolic", ("250.00", "250.02", "250.40", "250.60", "250.01"),
                (("401.9", 0.65), ("272.4", 0.50), ("403.90", 0.15), ("585.9", 0.15),
                 ("278.00", 0.15)), logit=-1.5, age_slope=0.03, chronic=True),
    Comorbidity("cardiac", ("428.0",),
                (("427.31", 0.50), ("414.01", 0.50), ("424.0", 0.20), ("401.9", 0.40)),
                logit=-1.8, age_slope=0.05, chronic=True),
    Comorbidity("sepsis", ("038.9",),
                (("995.92", 0.60), ("785.52", 0.30), ("584.9", 0.50), ("518.81", 0.40)),
                logit=-2.6, age_slope=0.02, chronic=False),
    Comorbidity("copd", ("496",), (("491.21", 0.40), ("518.81", 0.20), ("V46.2", 0.20)),
                logit=-2.8, age_slope=0.04, chronic=True),
    Comorbidity("substance", ("305.1",), (("311", 0.40), ("303.90", 0.20), ("300.00", 0.30)),
                logit=-2.0, age_slope=-0.03, chronic=True),
)

#: The fixed codes above in ICD-10-CM (the CMS General Equivalence Mappings' usual target,
#: kept by hand for these 45 codes only), so an ICD-10 sample has the same correlations.
#: Not a converter: extracts are never mapped between the two systems.
ICD10_OF = {
    "401.9": "I10", "428.0": "I50.9", "427.31": "I48.91", "414.01": "I25.10",
    "584.9": "N17.9", "250.00": "E11.9", "272.4": "E78.5", "518.81": "J96.00",
    "599.0": "N39.0", "530.81": "K21.9", "038.9": "A41.9", "285.9": "D64.9",
    "244.9": "E03.9", "995.92": "R65.20", "276.2": "E87.2", "496": "J44.9",
    "403.90": "I12.9", "V58.61": "Z79.01", "311": "F32.A", "305.1": "F17.210",
    "486": "J18.9", "276.1": "E87.1", "585.9": "N18.9", "V45.81": "Z95.1", "412": "I25.2",
    "V15.82": "Z87.891", "507.0": "J69.0", "287.5": "D69.6", "785.52": "R65.21",
    "300.00": "F41.9", "491.21": "J44.1", "780.39": "R56.9", "571.5": "K74.60",
    "434.91": "I63.50", "348.1": "G93.1", "431": "I61.9", "070.54": "B18.2",
    "250.02": "E11.65", "250.40": "E11.29", "250.60": "E11.40", "250.01": "E10.9",
    "278.00": "E66.9", "424.0": "I34.0", "V46.2": "Z99.81", "303.90": "F10.20",
}


def in_system(code: str, code_system: str) -> str:
    """A generator code (written in ICD-9) as the sample's code system writes it."""
    return ICD10_OF[code] if code_system == ICD10 else code


#: Demographic categories and their probabilities (MIMIC-III spellings); per age band where
#: the real distribution depends on age (widowhood, Medicare from 65).
GENDERS = (("M", 0.56), ("F", 0.44))
ETHNICITIES = (("WHITE", 0.70), ("BLACK/AFRICAN AMERICAN", 0.09),
               ("UNKNOWN/NOT SPECIFIED", 0.08), ("HISPANIC OR LATINO", 0.035),
               ("ASIAN", 0.035), ("OTHER", 0.03), ("UNABLE TO OBTAIN", 0.02),
               ("PATIENT DECLINED TO ANSWER", 0.01))
MARITAL_UNDER_65 = (("MARRIED", 0.45), ("SINGLE", 0.35), ("DIVORCED", 0.10),
                    ("WIDOWED", 0.03), ("SEPARATED", 0.02), ("UNKNOWN (DEFAULT)", 0.05))
MARITAL_65_PLUS = (("MARRIED", 0.48), ("SINGLE", 0.10), ("DIVORCED", 0.08),
                   ("WIDOWED", 0.28), ("SEPARATED", 0.01), ("UNKNOWN (DEFAULT)", 0.05))
INSURANCE_UNDER_65 = (("Private", 0.55), ("Medicaid", 0.20), ("Medicare", 0.15),
                      ("Government", 0.06), ("Self Pay", 0.04))
INSURANCE_65_PLUS = (("Medicare", 0.85), ("Private", 0.12), ("Medicaid", 0.02),
                     ("Government", 0.005), ("Self Pay", 0.005))


# --------------------------------------------------------------------------- vocabulary
@dataclass(frozen=True)
class Vocabulary:
    """The fixed code vocabulary: codes, Zipf weights, chapter of each code."""

    codes: np.ndarray  # object array of dotted codes, in Zipf rank order
    weights: np.ndarray  # float, sums to 1
    chapter: np.ndarray  # int, index of the code's chapter
    n_chapters: int

    def index(self, code: str) -> int:
        return int(np.flatnonzero(self.codes == code)[0])


@cache
def sample_vocabulary(size: int = VOCABULARY_SIZE, code_system: str = ICD9) -> Vocabulary:
    """Pick ``size`` codes of the packaged hierarchy, deterministically, and rank them.

    The common ICU codes and every comorbidity code come first (they must be frequent for
    the correlations to show); the rest are leaves and 3-digit categories drawn with a fixed
    seed, so every sample of every seed shares one vocabulary (per code system: ``icd10``
    draws from the ICD-10-CM hierarchy, with the fixed codes of :data:`ICD10_OF`).
    """
    h = code_hierarchy(code_system)
    fixed = list(dict.fromkeys(in_system(c, code_system) for c in
        [*COMMON_CODES,
         *(c for m in COMORBIDITIES for c in (*m.trigger, *(k for k, _ in m.companions)))]
    ))
    candidates = sorted(n for n in h.parent if (h.is_leaf(n) or h.level[n] == 3)
                        and n not in set(fixed))
    rng = np.random.default_rng(_VOCABULARY_SEED)
    rest = rng.choice(np.array(candidates, dtype=object), size - len(fixed), replace=False)
    codes = np.array([*fixed, *rest], dtype=object)
    ranks = np.arange(len(codes), dtype=float)
    weights = (ranks + _ZIPF_Q) ** -_ZIPF_S
    chapters = sorted(n for n, lvl in h.level.items() if lvl == 1)
    chapter_of = {c: i for i, c in enumerate(chapters)}
    chapter = np.array([chapter_of[h.ancestor_at_level(c, 1)] for c in codes])
    return Vocabulary(codes, weights / weights.sum(), chapter, len(chapters))


def _chapter_sampler(vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Codes sorted by chapter and a cumulative table for drawing *within* one chapter.

    ``cum[j] = chapter(j) + (within-chapter CDF at j)``: a draw from chapter ``c`` is
    ``searchsorted(cum, c + u)`` with ``u`` uniform in [0, 1) — one vectorized call for all
    patients whatever their chapter.
    """
    order = np.lexsort((np.arange(len(vocab.codes)), vocab.chapter))
    w, ch = vocab.weights[order], vocab.chapter[order]
    totals = np.bincount(ch, weights=w, minlength=vocab.n_chapters)
    within = np.cumsum(w) - np.concatenate([[0.0], np.cumsum(totals)])[ch]
    return order, ch + within / totals[ch]


# --------------------------------------------------------------------------- generator
def check_patient_count(n_patients: object) -> int:
    """``n_patients`` as an int; a :class:`ParameterError` unless it is a positive integer
    (a bool is not one). Every generator asks the same question here."""
    if isinstance(n_patients, bool) or not isinstance(n_patients, int | np.integer) \
            or n_patients < 1:
        raise ParameterError("n_patients", "must be a positive integer", n_patients)
    return int(n_patients)


def generate_sample(
    n_patients: int,
    *,
    seed: int = 0,
    longitudinal: bool = False,
    class_column: bool = True,
    code_system: str = ICD9,
) -> Dataset:
    """Generate a synthetic EHR extract of ``n_patients`` patients.

    Parameters
    ----------
    n_patients
        Number of patients (≥ 1).
    seed
        Seed of the numpy generator: same seed, same dataset (same fingerprint).
    longitudinal
        Give every diagnosis an age at diagnosis (between 1 and the patient's age) spread
        over a few visits; chronic codes then repeat at later visits.
    class_column
        Add the ``in_hospital_death`` class column (≈10 %, rises with age and sepsis).
    code_system
        ``icd9`` (default) or ``icd10``: the same generator over the ICD-10-CM hierarchy.

    Returns
    -------
    Dataset
        Demographics ``age, gender, ethnicity, marital_status, insurance`` (+ class) and the
        diagnoses long table with codes from :func:`sample_vocabulary`.

    Raises
    ------
    ParameterError
        If ``n_patients`` is not a positive integer.

    Examples
    --------
    >>> ds = generate_sample(100, seed=1)
    >>> ds.n_patients
    100
    """
    check_patient_count(n_patients)
    rng = np.random.default_rng(seed)
    vocab = sample_vocabulary(code_system=code_system)
    age = _ages(rng, n_patients)
    patients = _demographics(rng, age, _patient_ids(n_patients))

    cluster_rows, has_cluster = _comorbidity_codes(rng, age, vocab, code_system)
    background = _background_codes(rng, n_patients, vocab)
    pat = np.concatenate([cluster_rows[0], background[0]])
    code = np.concatenate([cluster_rows[1], background[1]])
    chronic = np.concatenate([cluster_rows[2], rng.random(len(background[0])) < 0.15])

    if longitudinal:
        pat, code, diag_age = _aged_codes(rng, age, pat, code, chronic)
    else:
        pat, code = _unique_rows(pat, code, len(vocab.codes))
        diag_age = None

    if class_column:
        n_codes = np.bincount(pat, minlength=n_patients)
        patients[CLASS_COLUMN] = _in_hospital_death(rng, age, has_cluster, n_codes)

    ids = patients.index.to_numpy()
    diagnoses = pd.DataFrame({
        PATIENT_ID: ids[pat],
        CODE: vocab.codes[code],
        AGE: pd.array(diag_age, dtype="Int64") if diag_age is not None
        else pd.array(np.full(len(pat), pd.NA), dtype="Int64"),
    })
    return Dataset(patients, diagnoses, class_column=CLASS_COLUMN if class_column else None,
                   source=f"synthetic sample (n={n_patients}, seed={seed})",
                   code_system=code_system)


def _patient_ids(n: int) -> pd.Index:
    width = max(6, len(str(n)))
    digits = np.char.zfill(np.arange(1, n + 1).astype(str), width)
    return pd.Index(np.char.add("S", digits).astype(object), name=PATIENT_ID)


def _ages(rng: np.random.Generator, n: int) -> np.ndarray:
    """Ages 18–90 skewed older (ICU populations: median in the mid-60s)."""
    return MIN_AGE + np.rint((MAX_AGE - MIN_AGE) * rng.beta(2.6, 1.6, n)).astype(np.int64)


def _categorical(rng: np.random.Generator, table: tuple[tuple[str, float], ...],
                 n: int) -> np.ndarray:
    labels = np.array([k for k, _ in table], dtype=object)
    p = np.array([v for _, v in table])
    return labels[rng.choice(len(labels), n, p=p / p.sum())]


def _demographics(rng: np.random.Generator, age: np.ndarray, ids: pd.Index) -> pd.DataFrame:
    n = len(age)
    older = age >= 65
    return pd.DataFrame({
        "age": pd.array(age, dtype="Int64"),
        "gender": _categorical(rng, GENDERS, n),
        "ethnicity": _categorical(rng, ETHNICITIES, n),
        "marital_status": np.where(older, _categorical(rng, MARITAL_65_PLUS, n),
                                   _categorical(rng, MARITAL_UNDER_65, n)),
        "insurance": np.where(older, _categorical(rng, INSURANCE_65_PLUS, n),
                              _categorical(rng, INSURANCE_UNDER_65, n)),
    }, index=ids)


def _comorbidity_codes(
    rng: np.random.Generator, age: np.ndarray, vocab: Vocabulary, code_system: str = ICD9,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], dict[str, np.ndarray]]:
    """Rows (patient, code, chronic) of the comorbidity clusters, and who has which."""
    pats: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    has: dict[str, np.ndarray] = {}
    chronic: list[np.ndarray] = []
    for m in COMORBIDITIES:
        p = 1.0 / (1.0 + np.exp(-(m.logit + m.age_slope * (age - 60))))
        has[m.name] = rng.random(len(age)) < p
        members = np.flatnonzero(has[m.name])
        trigger_idx = np.array([vocab.index(in_system(c, code_system)) for c in m.trigger])
        pats.append(members)
        codes.append(trigger_idx[rng.integers(0, len(trigger_idx), len(members))])
        for companion, prob in m.companions:
            chosen = members[rng.random(len(members)) < prob]
            pats.append(chosen)
            codes.append(np.full(len(chosen), vocab.index(in_system(companion, code_system))))
        chronic.extend(np.full(len(x), m.chronic) for x in pats[len(chronic):])
    return (np.concatenate(pats), np.concatenate(codes), np.concatenate(chronic)), has


def _background_codes(rng: np.random.Generator, n: int,
                      vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """Zipf-distributed codes, ≈3–20 per patient (long tail), partly from one main chapter."""
    per_patient = 3 + rng.negative_binomial(3, 3 / (3 + 6.0), n)
    per_patient = np.minimum(per_patient, 60)
    pat = np.repeat(np.arange(n), per_patient)
    cdf = np.cumsum(vocab.weights)
    code = np.minimum(np.searchsorted(cdf, rng.random(len(pat)) * cdf[-1]), len(cdf) - 1)

    chapter_mass = np.bincount(vocab.chapter, weights=vocab.weights, minlength=vocab.n_chapters)
    main_chapter = rng.choice(vocab.n_chapters, n, p=chapter_mass / chapter_mass.sum())
    from_chapter = np.flatnonzero(rng.random(len(pat)) < _CHAPTER_AFFINITY)
    order, cum = _chapter_sampler(vocab)
    target = main_chapter[pat[from_chapter]] + rng.random(len(from_chapter))
    pos = np.minimum(np.searchsorted(cum, target, side="right"), len(cum) - 1)
    code[from_chapter] = order[pos]
    return pat, code


def _unique_rows(pat: np.ndarray, code: np.ndarray, n_codes: int) -> tuple[np.ndarray, ...]:
    """Distinct (patient, code) pairs, sorted by patient then code rank."""
    key = np.unique(pat.astype(np.int64) * n_codes + code)
    return key // n_codes, key % n_codes


def _aged_codes(
    rng: np.random.Generator, age: np.ndarray, pat: np.ndarray, code: np.ndarray,
    chronic: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spread codes over 1–6 visits per patient; chronic codes recur at other visits.

    The last visit is at the patient's current age; earlier ones up to 20 years before
    (never below age 1). Rows are distinct (patient, code, age) triples.
    """
    n = len(age)
    visits = 1 + np.minimum(rng.poisson(1.0, n), 5)
    start = np.concatenate([[0], np.cumsum(visits)[:-1]])
    owner = np.repeat(np.arange(n), visits)
    span = np.minimum(20, age[owner] - 1)
    visit_age = age[owner] - rng.integers(0, span + 1)
    visit_age[start] = age  # the current admission
    first = start[pat] + (rng.random(len(pat)) * visits[pat]).astype(np.int64)
    rows_p, rows_c, rows_v = [pat], [code], [first]
    recurring = np.flatnonzero(chronic & (visits[pat] > 1))
    for _ in range(2):
        again = start[pat[recurring]] + (rng.random(len(recurring))
                                         * visits[pat[recurring]]).astype(np.int64)
        rows_p.append(pat[recurring])
        rows_c.append(code[recurring])
        rows_v.append(again)
    p, c = np.concatenate(rows_p), np.concatenate(rows_c)
    a = visit_age[np.concatenate(rows_v)]
    key = np.unique((p.astype(np.int64) * 4096 + c) * 128 + a)
    return key // (4096 * 128), (key // 128) % 4096, key % 128


def _in_hospital_death(rng: np.random.Generator, age: np.ndarray, has: dict[str, np.ndarray],
                       n_codes: np.ndarray) -> np.ndarray:
    """A 0/1 outcome at ≈ :data:`DEATH_RATE`, rising with age, sepsis, heart failure, codes."""
    risk = (0.04 * (age - 65) + 1.8 * has["sepsis"] + 0.6 * has["cardiac"]
            + 0.05 * (n_codes - 10))
    lo, hi = -10.0, 5.0
    for _ in range(40):  # intercept that makes the expected death rate DEATH_RATE
        mid = (lo + hi) / 2
        if np.mean(1 / (1 + np.exp(-(mid + risk)))) < DEATH_RATE:
            lo = mid
        else:
            hi = mid
    return (rng.random(len(age)) < 1 / (1 + np.exp(-(lo + risk)))).astype(np.int64)


# --------------------------------------------------------------------------- writer
def write_sample(dataset: Dataset, path: str | Path) -> Path:
    """Write ``dataset`` in the wide form the readers accept (``.csv`` or ``.parquet``).

    One row per patient: ``patient_id``, demographics, the class column, then ``codes`` —
    the patient's codes joined by ``;``, each as ``code@age`` when the age is known.
    """
    path = Path(path)
    if path.suffix.lower() not in {".csv", ".parquet"}:
        raise ParameterError("path", "must end in .csv or .parquet", str(path))
    diag = dataset.diagnoses.sort_values([PATIENT_ID, AGE, CODE], kind="stable")
    token = diag[CODE].astype(str)
    known = diag[AGE].notna()
    token = token.where(~known, token + "@" + diag[AGE].astype("string").fillna(""))
    joined = token.groupby(diag[PATIENT_ID].to_numpy(), sort=False).agg(";".join)
    pats = dataset.patients
    columns = [*dataset.demographic_columns,
               *([dataset.class_column] if dataset.class_column else [])]
    wide = pats[columns].copy()
    wide[CODES_COLUMN] = joined.reindex(pats.index).fillna("").to_numpy()
    wide = wide.reset_index()
    if path.suffix.lower() == ".csv":
        wide.to_csv(path, index=False)
    else:
        wide.to_parquet(path, index=False)
    return path
