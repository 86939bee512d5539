"""Random reconstructions of a disassociated release, drawn as code → record bitsets.

The utility measures only count records holding codes, so a reconstruction never needs to
exist as a list of Python sets: the release is flattened once into arrays (which chunk slot
and which code each published occurrence is), and each draw shuffles all chunks at once
(random keys sorted within their chunk) and hands every item-chunk code to one random
record of its cluster. The distribution is that of
:func:`ehr_release.algorithms.disassociation.reconstruct` with ``item_support="one"``;
at 1M records a draw takes seconds instead of the tens of seconds building sets took.

``item_support="uniform"`` draws instead, per item-chunk code, a count uniform in
1..min(k − 1, |P|) and that many distinct records of its cluster (Floyd's sampling, run for
all codes at once), like ``reconstruct(..., item_support="uniform")``. This is the reading of
the paper's own reconstruction (Fig. 5: an item-chunk code goes to several records, so a
count can exceed the original), under which constraint counts can come out too high.

The sampler is plain arrays, so a task runner ships it to worker processes cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ehr_release.algorithms.disassociation import DisassociatedRelease
from ehr_release.utility.bitsets import bitsets_from_pairs


@dataclass(frozen=True)
class ReconstructionSampler:
    """A release flattened for vectorized reconstruction draws.

    ``slot_chunk``/``slot_row``: per chunk slot (one per subrecord), its chunk and, in
    chunk order, the records the chunk is matched to. ``occ_slot``/``occ_code``: per code
    occurrence in a record or shared chunk, its slot and code id. ``item_code`` with
    ``item_first``/``item_size``: item-chunk codes and their cluster's first record and size.
    """

    n_records: int
    names: list[str]
    slot_chunk: np.ndarray
    slot_row: np.ndarray
    occ_slot: np.ndarray
    occ_code: np.ndarray
    item_code: np.ndarray
    item_first: np.ndarray
    item_size: np.ndarray

    @classmethod
    def from_release(cls, release: DisassociatedRelease) -> ReconstructionSampler:
        ids: dict[str, int] = {}
        first: dict[str, int] = {}
        slot_chunk: list[np.ndarray] = []
        slot_row: list[np.ndarray] = []
        occ_slot: list[int] = []
        occ_code: list[int] = []
        items: list[tuple[int, int, int]] = []
        n_slots = n_chunks = row = 0

        def add_chunk(chunk: list[tuple[str, ...]], rows: np.ndarray) -> None:
            nonlocal n_slots, n_chunks
            for s, subrecord in enumerate(chunk):
                for code in subrecord:
                    occ_slot.append(n_slots + s)
                    occ_code.append(ids.setdefault(code, len(ids)))
            slot_chunk.append(np.full(len(chunk), n_chunks, dtype=np.int64))
            slot_row.append(rows)
            n_slots += len(chunk)
            n_chunks += 1

        for cluster in release.clusters:
            first[cluster.id] = row
            rows = np.arange(row, row + cluster.size, dtype=np.int64)
            for chunk in cluster.record_chunks:
                add_chunk(chunk, rows)
            items.extend((ids.setdefault(code, len(ids)), row, cluster.size)
                         for code in cluster.item_chunk)
            row += cluster.size
        size = {c.id: c.size for c in release.clusters}
        for joint in release.joint_clusters:
            rows = np.concatenate([np.arange(first[c], first[c] + size[c], dtype=np.int64)
                                   for c in joint.clusters])
            for chunk in joint.shared_chunks:
                add_chunk(chunk, rows)
        item = np.array(items, dtype=np.int64).reshape(-1, 3)
        arrays = [_concat(slot_chunk), _concat(slot_row), np.array(occ_slot, dtype=np.int64),
                  np.array(occ_code, dtype=np.int64), item[:, 0], item[:, 1], item[:, 2]]
        return cls(row, list(ids), *map(_narrow, arrays))

    def draw(self, rng: np.random.Generator, item_support: str = "one",
             k: int = 2) -> dict[str, int]:
        """One reconstruction as code → bitset of the records holding it.

        ``item_support``: ``"one"`` (one record per item-chunk code) or ``"uniform"`` (a
        count uniform in 1..min(k − 1, |P|)); ``k`` is the release's k, used by the latter.
        """
        if item_support not in ("one", "uniform"):
            raise ValueError(f"item_support must be 'one' or 'uniform', got {item_support!r}")
        shuffled = np.lexsort((rng.random(len(self.slot_chunk)), self.slot_chunk))
        record_of_slot = self.slot_row[shuffled]  # slot i of a chunk → a random record
        if item_support == "one":
            item_record = self.item_first + rng.integers(0, np.maximum(self.item_size, 1))
            item_code = self.item_code
        else:
            item_code, item_record = self._uniform_items(rng, k)
        record = np.concatenate([record_of_slot[self.occ_slot], item_record])
        code = np.concatenate([self.occ_code, item_code])
        return bitsets_from_pairs(self.n_records, record, code, self.names)

    def _uniform_items(self, rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Item-chunk codes each given to a uniform count of distinct records (Floyd)."""
        size = np.maximum(self.item_size.astype(np.int64), 1)
        count = rng.integers(1, np.maximum(np.minimum(k - 1, size), 1) + 1)
        top = int(count.max(initial=0))
        chosen = np.full((len(size), max(top, 1)), -1, dtype=np.int64)
        for step in range(top):  # Floyd: j runs over size-count .. size-1
            active = step < count
            j = size - count + step
            pick = (rng.random(len(size)) * (j + 1)).astype(np.int64)
            taken = (chosen == pick[:, None]).any(axis=1)
            value = np.where(taken, j, pick)
            chosen[active, step] = value[active]
        row, col = np.nonzero(chosen >= 0)
        return self.item_code[row], self.item_first[row] + chosen[row, col]


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _narrow(values: np.ndarray) -> np.ndarray:
    """int32 when the values fit: half the bytes to ship to each worker process."""
    fits = not len(values) or int(values.max()) < np.iinfo(np.int32).max
    return values.astype(np.int32) if fits else values
