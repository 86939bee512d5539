"""Where a positional reading puts each subrecord: the record position it would be part of,
and the codes every position then holds (CSR)."""

from __future__ import annotations

import numpy as np

from ehr_release.privacy.attacks.disassociation.arrays import ranges
from ehr_release.privacy.attacks.disassociation.release import Release


def positions_of(r: Release, sub_pos: np.ndarray) -> np.ndarray:
    """The record position (global) a positional reading gives each subrecord."""
    owner = r.unit_owner[r.sub_unit]
    shared = r.unit_shared[r.sub_unit]
    out = np.empty(len(sub_pos), dtype=np.int64)
    out[~shared] = r.base[owner[~shared]] + sub_pos[~shared]
    if shared.any():
        # each joint cluster's positions: its members' positions, member after member
        lengths = r.size[r.members]
        member, offset = ranges(lengths)
        flat = r.base[r.members][member] + offset
        starts = np.r_[0, np.cumsum(lengths)][r.member_indptr]
        out[shared] = flat[starts[owner[shared]] + sub_pos[shared]]
    return out


def position_rows(r: Release, sub_pos: np.ndarray, only: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR over global positions of the codes a positional reading puts there, with the
    unit (chunk) each code comes from; ``only`` (a mask of subrecords) limits the reading
    to the positions that matter."""
    lengths = np.diff(r.sub_indptr)
    pos = np.repeat(positions_of(r, sub_pos), lengths)
    codes, units = r.sub_codes, np.repeat(r.sub_unit, lengths)
    if only is not None:
        keep = np.repeat(only, lengths)
        pos, codes, units = pos[keep], codes[keep], units[keep]
    order = np.argsort(pos, kind="stable")
    n_pos = int(r.size.sum())
    indptr = np.zeros(n_pos + 1, dtype=np.int64)
    np.cumsum(np.bincount(pos, minlength=n_pos), out=indptr[1:])
    return indptr, codes[order], units[order]

