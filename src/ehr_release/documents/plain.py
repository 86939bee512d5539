"""Plain words for the certificate and the datasheet: types, guarantees, figures.

A privacy officer reads "age: whole number", not ``Int64``; "someone who knows up to 2 of a
patient's codes still finds at least 5 matching records", not ``k^m-anonymity``; "0.12 —
average relative error of count queries, 0 is exact, 1 is no better than publishing
nothing", not ``ARE W1``. The readings are keyed by the registered algorithm's name (its
family); an algorithm this module does not know falls back to its own declared wording,
never to nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

#: Registered names of each family (the baselines and comparators share the model).
KKM = frozenset({"artuc", "artuc-baseline", "artuc-unconstrained", "rmr"})
LDA = frozenset({"lda", "lda-baseline"})

_DTYPES = (
    (re.compile(r"^multiset\[icd9\]\+age$"), "diagnosis codes (ICD-9) with age at diagnosis"),
    (re.compile(r"^multiset\[icd9\]$"), "diagnosis codes (ICD-9)"),
    (re.compile(r"^multiset\[icd10\]\+age$"),
     "diagnosis codes (ICD-10-CM) with age at diagnosis"),
    (re.compile(r"^multiset\[icd10\]$"), "diagnosis codes (ICD-10-CM)"),
    (re.compile(r"^u?int\d*$", re.I), "whole number"),
    (re.compile(r"^float\d*$", re.I), "decimal number"),
    (re.compile(r"^(object|string|str)(\[.*\])?$"), "text"),
    (re.compile(r"^bool(ean)?$"), "yes/no"),
    (re.compile(r"^category$"), "category"),
    (re.compile(r"^datetime64.*"), "date and time"),
)


def code_edition(schema: Mapping[str, str]) -> str | None:
    """The code system and edition of a dataset's diagnosis codes, from its stored schema
    (``codes: multiset[icd10]+age`` → ``ICD-10-CM April 1, 2026 (...)``), for the
    certificate and the datasheet; None for a dataset without codes."""
    from ehr_release.model.hierarchy import code_system, schema_code_system

    name = schema_code_system(schema)
    if name is None:
        return None
    try:
        return code_system(name).edition
    except ValueError:
        return name


def code_mapping_words(schema: Mapping[str, str], *, losses: bool) -> str | None:
    """How the extract's codes were mapped (ICD-9-CM → ICD-10-CM by the GEMs), from its
    stored schema; None when none was. ``losses`` adds the counts of unmapped codes and
    one-to-many choices — exact statistics of the true data, so for the internal certificate
    only: the datasheet (the recipient's copy) states the rule alone."""
    from ehr_release.ingest.gem import GEM_WORDS, MappingLosses
    from ehr_release.model.dataset import CODE_MAPPING

    stored = schema.get(CODE_MAPPING)
    if stored is None:
        return None
    if not losses:
        return (GEM_WORDS + "; the counts of codes unmapped or generalized are on the "
                "internal certificate")
    return f"{GEM_WORDS}. {MappingLosses.from_schema(stored).words()}"


def human_type(dtype: str) -> str:
    """A pandas dtype (or the dataset's own code type) as a reader names it."""
    for pattern, words in _DTYPES:
        if pattern.match(dtype):
            return words
    return dtype


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def format_number(value: Any) -> str:
    """A figure as a person reads it, the same on the certificate and the dashboard.

    Integers (and integral reals) get thousands separators; other reals four significant
    digits in plain notation; only magnitudes below 0.001 or from 10¹⁵ use "m × 10ⁿ",
    never ``1.009e-08``. Booleans read yes/no, NaN "n/a"; text is returned unchanged.

    Examples
    --------
    >>> format_number(10000.0), format_number(0.99712), format_number(174700.3)
    ('10,000', '0.9971', '174,700')
    >>> format_number(1.5e-06)
    '1.5 × 10⁻⁶'
    """
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if not isinstance(value, float):
        return str(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    magnitude = abs(value)
    if value.is_integer() and magnitude < 1e15:
        return f"{int(value):,}"
    if magnitude >= 1e15 or 0 < magnitude < 1e-3:
        mantissa, exponent = f"{value:.3e}".split("e")
        power = str(int(exponent)).translate(_SUPERSCRIPT)
        return f"{mantissa.rstrip('0').rstrip('.')} × 10{power}"
    rounded = float(f"{value:.4g}")
    if rounded.is_integer():
        return f"{int(rounded):,}"
    decimals = max(0, 3 - math.floor(math.log10(magnitude)))
    return f"{rounded:,.{decimals}f}".rstrip("0").rstrip(".")


def _param(params: Mapping[str, Any], name: str, fallback: str) -> str:
    value = params.get(name)
    return fallback if value is None else format_number(value)


#: The guarantee of a DP release whose noise was seeded (test mode only): the seed, kept in
#: the run record, replays every draw, so the noise hides nothing from whoever holds it.
SEEDED_DP = ("NOT differentially private: TEST MODE. The noise was drawn from a seeded, "
             "reproducible generator, not the secure sampler; whoever knows the seed can "
             "subtract it and read the true counts.")


def guarantee_sentence(algorithm: str, privacy_model: str, params: Mapping[str, Any]) -> str:
    """The privacy guarantee in one sentence, with this release's parameter values."""
    k, m = _param(params, "k", "k"), _param(params, "m", "m")
    if algorithm in KKM:
        return (f"Someone who knows all of a patient's released demographics and up to {m} "
                f"of their diagnosis codes still finds at least {k} records that could be "
                "theirs.")
    if algorithm == "disassociation":
        return (f"Someone who knows up to {m} of a patient's diagnosis codes finds at least "
                f"{k} records holding them, however the release's shuffled chunks are put "
                "back together.")
    if algorithm == "gccens":
        return (f"Every released set of codes is also held by at least {k} people of the "
                "population the patients were drawn from, so whoever holds that population's "
                f"records cannot narrow a released record to fewer than {k} people.")
    if algorithm in LDA:
        return (f"Every published trajectory (diagnoses with age blocks, in order) is shared "
                f"by at least {k} patients, so someone who knows a patient's diagnoses and "
                f"ages cannot narrow them to fewer than {k} records.")
    if algorithm == "diffgen" and params.get("seed") is not None:
        return SEEDED_DP
    if algorithm == "diffgen" and isinstance(params.get("epsilon"), int | float):
        eps = float(params["epsilon"])
        return (f"Differential privacy with ε = {format_number(eps)}: whether or not any one "
                "patient is in the data changes the chance of any released result by at "
                f"most a factor of {format_number(math.exp(eps))}, so the release says almost "
                "nothing about any one person.")
    return privacy_model[:1].upper() + privacy_model[1:].rstrip(".") + "."


#: The trivial release each family's evaluation measures itself against.
_BASELINES = {
    "diffgen": "always predicting the most common class",
    "disassociation": "publishing nothing (answering 0 to every count)",
    "gccens": "publishing every record empty",
    "lda": "publishing nothing (answering 0 to every count)",
    "lda-baseline": "publishing nothing (answering 0 to every count)",
}


#: Error measures for which answering 0 to every query (publishing nothing) scores exactly 1:
#: their workloads are built from real records, so every true count is ≥ 1.
_VS_NOTHING = re.compile(r"^(ARE W\d( \(estimator\))?|AvgRE)$")


def no_better_than_nothing(metrics: Mapping[str, float]) -> list[str]:
    """Error figures of the release at or above 1: no better than publishing nothing."""
    return [name for name, value in metrics.items()
            if _VS_NOTHING.match(name) and isinstance(value, int | float) and value >= 1]


def baseline_words(algorithm: str) -> str | None:
    """The trivial baseline the evaluation compares against, or None when it computes none."""
    return _BASELINES.get(algorithm)


#: What a check on the released bytes cannot establish, per algorithm whose guarantee rests
#: on the mechanism's randomness rather than on a property the bytes have.
_UNVERIFIABLE = {
    "diffgen": ("For ε-differential privacy these checks cover the ε ledger (every charge, "
                "its scale and the composed total), the released structure and the presence "
                "of noise in the counts; that every selection and count was drawn by the "
                "declared mechanism from a secure sampler cannot be seen in the bytes and "
                "rests on the implementation. The noise check reads the true counts (false "
                "alarm ≤ 10⁻⁶): (ε, δ ≤ 10⁻⁶)."),
}


def verification_limits(algorithm: str) -> str | None:
    """What the verifier cannot check from the bytes (None: the guarantee is a property of
    the bytes themselves, which the verifier re-checks)."""
    return _UNVERIFIABLE.get(algorithm)


def records_words(algorithm: str, records: int | None) -> str:
    """How many records a release holds, in words; under ε-DP the figure is the sum of the
    noisy counts (post-processing, inside ε), which must not read as the true number."""
    if records is None:
        return "not stated by the algorithm"
    text = f"{format_number(records)} patient record{'s' if records != 1 else ''}"
    if verification_limits(algorithm) is not None:
        text += " by the sum of its noisy counts (not the true number of records)"
    return text


def attack_statement(attacker_model: str, required: str, counts_candidates: bool) -> str:
    """The attack audit in one sentence for the recipient, once it passed.

    A candidate-set attack (k-anonymity families) shows nobody narrowed below the threshold;
    an audit of a differentially private release has no threshold: it looks for a release
    that skipped the mechanism, which can show the mechanism was bypassed but never prove
    the guarantee.
    """
    if counts_candidates:
        return (f"An independent re-identification attack was run on every published byte "
                f"({attacker_model}) and did not single out any patient below the "
                "guarantee's threshold.")
    return (f"An independent audit read every published byte ({attacker_model}) and found "
            f"nothing the mechanism does not allow ({required}). Such an audit can catch a "
            "release that bypassed the mechanism; it cannot prove the guarantee.")
