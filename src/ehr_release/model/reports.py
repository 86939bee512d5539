"""Shapes of what the verify and evaluate stages produce.

Kept apart from ``algorithms/`` and ``privacy/`` so both the verifier and the certificate can
use them without the verifier importing anything from the algorithm it checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

#: A stored copy's measured text for a requirement that failed: what a verifier measured on a
#: failed release quotes what failed (a one-record class's demographics and codes, a lone
#: trajectory, an original itemset), which the model no longer covers.
WITHHELD_FAILED = "did not hold (what it found is shown on the verifying terminal only)"
#: A stored copy's measured text for a requirement measured on the original data itself
#: (``on_original``): under differential privacy only the release is covered.
WITHHELD_ORIGINAL = "held (measured on the original data: shown on the verifying terminal only)"


def _counts_only(evidence: dict[str, Any]) -> dict[str, Any]:
    """The evidence entries a stored copy keeps: numbers, flags and None.

    Texts, lists and maps are where verifiers put what they found (codes, trajectories,
    patient ids, a release's undeclared values); counts and bounds over the release are
    what a reviewer needs next to the verdict.
    """
    return {key: value for key, value in evidence.items()
            if value is None or isinstance(value, bool | int | float)}


def _withheld_failure(evidence: dict[str, Any]) -> str:
    """A failed requirement's stored measured text: the verdict and its counts, in words
    (``smallest class 1``), never what the counts are of."""
    counts = [f"{key.replace('_', ' ')} {value:,}" if isinstance(value, int)
              else f"{key.replace('_', ' ')} {value:.6g}"
              for key, value in _counts_only(evidence).items()
              if value is not None and not isinstance(value, bool)]
    return WITHHELD_FAILED + (f"; {', '.join(counts)}" if counts else "")


@dataclass(frozen=True)
class Requirement:
    """One privacy requirement: what was required, what was measured, and whether it held.

    ``required`` and ``measured`` are human-readable, e.g. ``required="every ≤2-itemset
    support ≥ 5"``, ``measured="smallest support 5"``. ``measured`` and ``evidence`` are the
    terminal's: they may quote values of the data; every copy that leaves the process is
    :meth:`stored`. ``on_original`` marks a measurement of the original data that no stored
    copy may show even when it held (a differentially private release covers only itself).
    """

    name: str
    required: str
    measured: str
    passed: bool
    evidence: dict[str, Any] = field(default_factory=dict)
    on_original: bool = False

    def stored(self) -> Requirement:
        """The copy that may leave the process (database, artifacts, certificate, bundle).

        A requirement that held keeps its measured text (verifiers state only counts and
        bounds when a requirement holds) unless it was measured on the original data; one
        that failed keeps its name, what was required, the verdict and its counts. Evidence
        keeps its numbers only (:func:`_counts_only`), none at all when measured on the
        original.
        """
        if self.on_original:
            return replace(self, evidence={}, measured=WITHHELD_ORIGINAL if self.passed
                           else WITHHELD_FAILED)
        if self.passed:
            return replace(self, evidence=_counts_only(self.evidence))
        return replace(self, measured=_withheld_failure(self.evidence),
                       evidence=_counts_only(self.evidence))


@dataclass(frozen=True)
class VerificationReport:
    """The verifier's verdict: it holds only if every requirement passed."""

    algorithm: str
    requirements: list[Requirement]

    @property
    def holds(self) -> bool:
        return bool(self.requirements) and all(r.passed for r in self.requirements)

    @property
    def failures(self) -> list[Requirement]:
        return [r for r in self.requirements if not r.passed]

    def stored(self) -> VerificationReport:
        """The copy that may leave the process: every requirement :meth:`Requirement.stored`
        (same verdicts, so ``holds`` and ``failures`` are unchanged)."""
        return VerificationReport(self.algorithm, [r.stored() for r in self.requirements])

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "holds": self.holds,
            "requirements": [asdict(r) for r in self.requirements],
        }


@dataclass(frozen=True)
class Chart:
    """A rendered chart for the certificate (PNG bytes) with a caption."""

    name: str
    caption: str
    png: bytes


@dataclass(frozen=True)
class UtilityReport:
    """Utility figures of a release: named metrics, optional tables and charts."""

    algorithm: str
    metrics: dict[str, float]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    charts: list[Chart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Why the utility is below a trivial baseline the evaluation itself computed (e.g.
    #: DiffGen's classification accuracy below always predicting the majority class), one
    #: plain sentence each; empty when it is not. A release with any is not publishable
    #: unless the request allows low utility.
    below_baseline: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "metrics": self.metrics,
            "tables": self.tables,
            "charts": [{"name": c.name, "caption": c.caption} for c in self.charts],
            "notes": self.notes,
            "below_baseline": self.below_baseline,
        }


def candidate_set_distribution(sizes: Iterable[int]) -> list[list[int]]:
    """How many knowledge sets left the attacker each size of candidate set, in bands.

    Bands double (0, 1, 2–3, 4–7, 8–15, …) so a release of any size gives a short chart;
    every band from the smallest to the largest size found is listed, empty ones too, so
    the chart's axis has no gaps. Returns ``[low, high, count]`` rows; none for no sizes.
    """
    import numpy as np

    values = np.asarray(list(sizes) if not hasattr(sizes, "__array__") else sizes,
                        dtype=np.int64).ravel()
    if not len(values):
        return []
    # frexp's exponent of a positive integer is its bit length: 1 → 1, 2–3 → 2, 4–7 → 3
    bands = np.where(values <= 0, 0, np.frexp(np.maximum(values, 1).astype(float))[1])
    counts = np.bincount(bands)
    low = int(bands.min())
    return [[0 if band == 0 else 1 << (band - 1), 0 if band == 0 else (1 << band) - 1,
             int(counts[band])] for band in range(low, len(counts))]


@dataclass(frozen=True)
class AttackReport:
    """What an independent re-identification attack on the published bytes achieved.

    ``attacker_model`` says in plain words what the adversary knows (e.g. "all demographics
    plus up to 2 codes of the target"); ``knowledge_sets_tried`` counts the background-
    knowledge sets the attack tried (``exhaustive`` when that was every one); the attack
    fails the release when some patient's ``smallest_candidate_set`` is below ``threshold``
    (k). Attacks that are not about candidate sets (DiffGen's membership test) leave
    ``smallest_candidate_set`` as None and say what they measured in ``measured``.
    Nothing here may name a patient or a value: it goes to reviewers and the certificate.
    ``on_original`` marks a ``measured`` computed on the original data (DiffGen's count of
    exact counts), which only the terminal shows: see :meth:`stored`.
    ``candidate_set_sizes`` is how the candidate sets the attack found are spread
    (:func:`candidate_set_distribution`: ``[low, high, knowledge sets]`` per size band), the
    risk view ARX users read before deciding; counts only, kept by a passed audit.
    """

    attacker_model: str
    knowledge_sets_tried: int
    exhaustive: bool
    smallest_candidate_set: int | None
    threshold: int
    passed: bool
    measured: str = ""
    required: str = ""
    seconds: float = 0.0
    on_original: bool = False
    candidate_set_sizes: list[list[int]] = field(default_factory=list)

    def stored(self) -> AttackReport:
        """The copy that may leave the process, by the rule of :meth:`Requirement.stored`:
        the attacker model, the counts and the verdict stay; a failed attack's measured text
        and one measured on the original data do not, nor their size distribution (the
        bands below k of a failed audit point at the patients it singled out)."""
        if self.passed and not self.on_original:
            return self
        return replace(self, measured=WITHHELD_ORIGINAL if self.passed else WITHHELD_FAILED,
                       candidate_set_sizes=[])

    def requirement(self) -> Requirement:
        """The attack's verdict as one more verification requirement."""
        tried = (f"{self.knowledge_sets_tried:,} knowledge sets "
                 f"({'every one' if self.exhaustive else 'seeded sample plus every rare set'})")
        measured = self.measured or (
            f"smallest candidate set {self.smallest_candidate_set:,} over {tried}"
            if self.smallest_candidate_set is not None else f"no candidate set over {tried}")
        return Requirement(
            name="attack audit",
            required=self.required or (f"{self.attacker_model}: every patient hides among "
                                       f"≥ {self.threshold}"),
            measured=measured, passed=self.passed, on_original=self.on_original,
            evidence={"knowledge_sets_tried": self.knowledge_sets_tried,
                      "exhaustive": self.exhaustive,
                      "smallest_candidate_set": self.smallest_candidate_set,
                      "seconds": round(self.seconds, 3)})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReleaseOutcome:
    """What the flow concluded about a verified release beyond its privacy model.

    ``records`` is how many patient records the release holds (None when the algorithm does
    not say); ``attack`` is the independent attack audit; ``waivers`` names, one plain
    sentence each, every refusal the request explicitly waived (an empty release, utility
    below a trivial baseline) — printed on the certificate so nobody mistakes them for a
    clean result.
    """

    records: int | None
    attack: AttackReport | None
    waivers: list[str] = field(default_factory=list)

    def stored(self) -> ReleaseOutcome:
        """The copy that may leave the process: the attack's :meth:`AttackReport.stored`."""
        return replace(self, attack=None if self.attack is None else self.attack.stored())
