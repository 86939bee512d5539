"""The attack's report: its attacker model and what it measured, in counts only (no patient,
code or cluster is named)."""

from __future__ import annotations

from ehr_release.model.reports import AttackReport
from ehr_release.privacy.attacks.disassociation.order_test import PositionalTest


def report_of(m: int, k: int, tried: int, exhaustive: bool, smallest: int | None,
            measured: str) -> AttackReport:
    return AttackReport(
        attacker_model=f"knows up to {m} codes of the target and which cluster holds it, "
                       "holds the whole release and reads subrecord order as records "
                       "wherever that order links chunks",
        knowledge_sets_tried=tried, exhaustive=exhaustive, smallest_candidate_set=smallest,
        threshold=k, passed=smallest is not None and smallest >= k, measured=measured)


def order_words(test: PositionalTest) -> str:
    if test.positional:
        return (f"subrecord order read as records (no refutation in {test.linked_groups:,} "
                f"multi-chunk groups; reshuffles refute {test.mean_refuted_reshuffled:.1f} "
                "on average)")
    if not test.linked_groups:
        return "no group has two chunks for the order to link"
    if test.refuted_observed:
        where = ("release-wide" if test.refuted_observed < 0 else
                 f"in {test.refuted_observed:,} of {test.linked_groups:,} multi-chunk groups")
        return f"positional reading refuted {where}"
    return (f"positional reading not refuted, but reshuffles refute only "
            f"{test.mean_refuted_reshuffled:.1f} groups on average: order not distinguishable "
            "from independent shuffles")

