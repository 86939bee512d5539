"""One extract's patients as the keyed hashes stored for them, and how two extracts meet.

The hashes are made by :mod:`ehr_release.history.linkage` (which re-exports these names);
they live here, with storage, because the tables that keep them (:mod:`.links`) and the
budget that sums ε over linked patients (:mod:`.budget`) read them, and storage imports
nothing above it. Counts only: no patient value is held or shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads when hashes are read or compared, not to list runs
    import numpy as np

HASH_BYTES = 16
DEFAULT_SOURCE = "default"


@dataclass(frozen=True, eq=False)
class PatientLinks:
    """One extract's patients as keyed hashes; row ``i`` of both arrays is one patient."""

    ids: np.ndarray  # dtype S16
    contents: np.ndarray  # dtype S16

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.contents):
            raise ValueError("ids and contents must describe the same patients")

    @property
    def patients(self) -> int:
        return len(self.ids)

    def to_bytes(self) -> tuple[bytes, bytes]:
        return self.ids.tobytes(), self.contents.tobytes()

    @classmethod
    def from_bytes(cls, ids: bytes, contents: bytes) -> PatientLinks:
        import numpy as np

        return cls(np.frombuffer(ids, dtype=f"S{HASH_BYTES}"),
                   np.frombuffer(contents, dtype=f"S{HASH_BYTES}"))


def _keys(hashes: np.ndarray) -> np.ndarray:
    """The first 64 bits of each hash as integers, to sort and search fast.

    Two different patients share them with probability about n²/2⁶⁵ (3·10⁻⁶ among ten
    million); such a collision only over-links, the safe side.
    """
    import numpy as np

    if not len(hashes):
        return np.zeros(0, dtype="<u8")
    return np.ascontiguousarray(hashes).view("<u8")[::2]


class LinkIndex:
    """One extract's keys in a hash index built once, so meeting a hundred earlier extracts
    costs a hundred lookups of theirs (pandas' hash table: about 7× a binary search's
    speed on 100K random keys), never a sort of either side."""

    def __init__(self, links: PatientLinks) -> None:
        import numpy as np
        import pandas as pd

        self.patients = links.patients
        ids, self._id_of = np.unique(_keys(links.ids), return_inverse=True)
        contents, self._content_of = np.unique(_keys(links.contents), return_inverse=True)
        self._ids, self._contents = pd.Index(ids), pd.Index(contents)

    def meet(self, earlier: PatientLinks) -> tuple[np.ndarray, int]:
        """(a boolean per patient of this extract: linked to ``earlier``; how many of
        ``earlier``'s patients are linked to this extract)."""
        id_at = self._ids.get_indexer(_keys(earlier.ids))
        content_at = self._contents.get_indexer(_keys(earlier.contents))
        import numpy as np

        id_hit, content_hit = id_at >= 0, content_at >= 0
        by_id = np.zeros(len(self._ids), dtype=bool)
        by_id[id_at[id_hit]] = True
        by_content = np.zeros(len(self._contents), dtype=bool)
        by_content[content_at[content_hit]] = True
        linked = by_id[self._id_of] | by_content[self._content_of]
        return linked, int((id_hit | content_hit).sum())

    def overlap(self, earlier: PatientLinks) -> Overlap:
        linked, matched = self.meet(earlier)
        shared = int(linked.sum())
        return Overlap(shared, self.patients - shared, earlier.patients - matched)


@dataclass(frozen=True)
class Overlap:
    """How two extracts' patient sets meet (counts only)."""

    shared: int  # patients of the current extract linked to the earlier one
    only_current: int  # patients of the current extract not linked to the earlier one
    only_earlier: int  # patients of the earlier extract linked to no current patient

    @property
    def disjoint(self) -> bool:
        return self.shared == 0

    @property
    def identical(self) -> bool:
        return self.only_current == 0 and self.only_earlier == 0 and self.shared > 0


def overlap(current: PatientLinks, earlier: PatientLinks) -> Overlap:
    """The overlap of ``current`` with ``earlier``, each side matched by either key."""
    return LinkIndex(current).overlap(earlier)
