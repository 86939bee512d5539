"""Checks that the sample can be k-mapped against the population at all.

k-map assumes the sample was drawn from the population (S ⊆ P): a sample patient absent from
the population, or holding codes their population record lacks, means the two extracts do
not belong together, and dis() would silently understate re-identification risk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ehr_release.algorithms.gccens.index import Multiset
from ehr_release.core.errors import InputError


def check_sample_in_population(sample_ids: Sequence[str], sample: Sequence[Multiset],
                               population_ids: Sequence[str], population: Sequence[Multiset],
                               caps: Mapping[str, int], *, source: str = "population") -> None:
    """Raise :class:`InputError` unless each capped sample record is inside its population record.

    Only the codes a release may hold (cap ≥ 1, instances up to the cap) are compared, so a
    population extracted for a few codes (as in the thesis) matches a richer sample.
    """
    where = {pid: i for i, pid in enumerate(population_ids)}
    # The patient, code and counts go to ``detail`` only: InputError.public() keeps them out
    # of everything stored (audit trail, run record), which must hold no patient value.
    for row, (pid, record) in enumerate(zip(sample_ids, sample, strict=True), start=1):
        pos = where.get(pid)
        if pos is None:
            raise InputError(f"sample patient #{row} is not in the population", file=source,
                             detail=f"patient {pid!r}")
        held = population[pos]
        for code, n in record.items():
            need = min(n, caps.get(code, n))
            if held.get(code, 0) < need:
                raise InputError(
                    f"sample patient #{row} holds more instances of a code than its "
                    "population record; the sample must be drawn from the population",
                    file=source, detail=f"patient {pid!r} has {need} × {code}, the "
                                        f"population record {held.get(code, 0)}")
