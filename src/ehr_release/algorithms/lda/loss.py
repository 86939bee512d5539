"""Information loss of a published trajectory with respect to its original (ILM, ALM).

A published trajectory does not say which original pair each of its pairs came from, so
the loss of a record is measured on the cheapest explanation: an order-preserving
embedding of the published pairs into the original ones, each published value an
ancestor-or-self of the original value, every original pair left over counted as
suppressed (LM to the root in both attributes). Ties between embeddings of equal weighted
cost go to the smaller ICD loss, so the split into ILM and ALM is reproducible.

Dataset loss (thesis Def. 8): the mean over records of LM(T) / |T|, |T| the original
length; records without pairs are left out of the mean (0/0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ehr_release.algorithms.lda.model import LossModel, Traj


def embedding_loss(model: LossModel, original: Traj, published: Traj) -> tuple[int, int] | None:
    """Loss numerators (ICD, Age) of the cheapest embedding, or None if none exists."""
    n, m = len(original[0]), len(published[0])
    if m > n:
        return None
    si, sa = (v.tolist() for v in model.suppression(*original))
    oi, oa = original[0][:, None], original[1][:, None]
    pi, pa = published[0][None, :], published[1][None, :]
    ok_icd = model.icd.is_ancestor_or_self(np.broadcast_to(pi, (n, m)),
                                           np.broadcast_to(oi, (n, m)))
    ok = ok_icd & (model.age.lca(oa, pa) == pa)  # both values ancestor-or-self
    ci = (model.icd_lc[pi] - model.icd_lc[oi]).tolist()
    ca = (model.age_lc(pa) - model.age_lc(oa)).tolist()
    ok = ok.tolist()
    al, be = model.alpha, model.beta
    inf = None
    # best[i] after processing original pairs 0..h-1: cheapest embedding of published[:i]
    best: list[tuple[float, int, int] | None] = [(0.0, 0, 0)] + [inf] * m
    for h in range(n):
        new: list[tuple[float, int, int] | None] = [inf] * (m + 1)
        for i in range(m + 1):
            cands = []
            if best[i] is not None:  # suppress original pair h
                bi, ba = best[i][1] + si[h], best[i][2] + sa[h]
                cands.append((al * bi + be * ba, bi, ba))
            if i and best[i - 1] is not None and ok[h][i - 1]:  # map published i-1 onto h
                bi, ba = best[i - 1][1] + ci[h][i - 1], best[i - 1][2] + ca[h][i - 1]
                cands.append((al * bi + be * ba, bi, ba))
            if cands:
                new[i] = min(cands)
        best = new
    return None if best[m] is None else (best[m][1], best[m][2])


def dataset_loss(model: LossModel, originals: Sequence[Traj],
                 published: Sequence[Traj]) -> tuple[float, float, list[tuple[int, int] | None]]:
    """ILM, ALM of a release and each record's numerators (None: does not embed)."""
    memo: dict[tuple[bytes, ...], tuple[int, int] | None] = {}
    per_record: list[tuple[int, int] | None] = []
    ilm, alm, counted = 0.0, 0.0, 0
    for orig, pub in zip(originals, published, strict=True):
        key = (orig[0].tobytes(), orig[1].tobytes(), pub[0].tobytes(), pub[1].tobytes())
        if key not in memo:
            memo[key] = embedding_loss(model, orig, pub)
        loss = memo[key]
        per_record.append(loss)
        if loss is not None and len(orig[0]):
            ilm += loss[0] / model.icd.size / len(orig[0])
            alm += loss[1] / model.age.size / len(orig[0])
            counted += 1
    return (ilm / counted if counted else 0.0, alm / counted if counted else 0.0, per_record)
