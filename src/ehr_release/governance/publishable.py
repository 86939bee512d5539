"""Publishable outcome: a release that verifies is not yet worth a reviewer's signature.

A release with no patient records, or one whose utility is below a trivial baseline the
evaluation itself computed (e.g. a classifier less accurate than always guessing the majority
class), protects privacy by being useless. Such a release is refused with one plain reason,
unless the request waived the refusal explicitly — and then the waiver is printed on the
certificate, so it never reaches a reviewer disguised as a success.
"""

from __future__ import annotations

from ehr_release.core.errors import EhrReleaseError
from ehr_release.model.reports import UtilityReport
from ehr_release.registry import AlgorithmEntry, ReleaseFiles


class NotPublishable(EhrReleaseError):
    """The release verified but is not useful enough to publish (and nothing waived that).

    ``stored`` is the text the run record, the audit trail and Prefect keep when the message
    quotes figures measured on the original data (a utility evaluation's sentences: under
    DiffGen, accuracy on the true records and their majority class); the terminal gets it all.
    """

    def __init__(self, message: str, stored: str | None = None) -> None:
        super().__init__(message)
        self.stored = stored

    def public(self) -> str:
        return self.stored if self.stored is not None else str(self)


def count_records(entry: AlgorithmEntry, files: ReleaseFiles) -> int | None:
    """Patient records in the release, or None when the algorithm does not count them."""
    return None if entry.count_records is None else int(entry.count_records(files))


def empty_release_waivers(records: int | None, *, allow_empty: bool) -> list[str]:
    """Refuse a release with zero records unless allowed; the waiver sentence if allowed."""
    if records != 0:
        return []
    if not allow_empty:
        raise NotPublishable("the release holds no patient records, so it would reach the "
                             "reviewer as a success while giving the researcher nothing; "
                             "relax the parameters, or request it with --allow-empty")
    return ["The release holds no patient records; the request allowed an empty release "
            "(--allow-empty)."]


def low_utility_waivers(utility: UtilityReport, *, allow_low_utility: bool) -> list[str]:
    """Refuse utility below a trivial baseline unless allowed; the waiver sentences if so."""
    if not utility.below_baseline:
        return []
    if not allow_low_utility:
        advice = " — request it with --allow-low-utility to publish anyway"
        raise NotPublishable("utility is below a trivial baseline — "
                             + "; ".join(utility.below_baseline) + advice,
                             stored="utility is below a trivial baseline (the evaluation's "
                             "figures, measured on the original data, are on the terminal and "
                             "the dashboard)" + advice)
    return [f"{reason} The request allowed low utility (--allow-low-utility)."
            for reason in utility.below_baseline]
