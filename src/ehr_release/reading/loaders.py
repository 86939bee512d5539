"""One record per row from a published release, one function per release format.

Each function uses pandas and numpy only and imports them itself, so its source is also the
snippet the datasheet prints under "Load it" (:func:`ehr_release.reading.snippet`): a
researcher without this package copies it and gets the same frame
``ehr_release.reading.load_release`` gives. Keep them that way — self-contained, short,
no helper outside the function, annotations as strings (the printed code runs on its
own, without this module's imports).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def load_disassociation(folder: str = ".", seed: int = 0) -> "pd.DataFrame":
    """One random reconstruction of a disassociated release: one row per record.

    Per cluster, each record chunk's subrecords are dealt to the cluster's records in a
    random order, each item-chunk code goes to one random record of its cluster, and each
    shared chunk is dealt over the records of its joint cluster's members. Any such
    dataset is consistent with the release; draw several (other seeds) and average.
    """
    import numpy as np
    import pandas as pd

    rows = pd.read_parquet(f"{folder}/release.parquet")
    rng = np.random.default_rng(seed)
    records: dict[str, list[set]] = {}

    def deal(chunk: "pd.DataFrame", targets: list[set]) -> None:
        subrecords = [set(part["code"].dropna()) for _, part in chunk.groupby("subrecord")]
        for target, i in zip(targets, rng.permutation(len(subrecords)), strict=True):
            target.update(subrecords[i])

    clusters = rows[rows["group"].str.startswith("P")]
    for group, cluster in clusters.groupby("group", sort=False):
        records[group] = [set() for _ in range(int(cluster["size"].iloc[0]))]
        for chunk_no, chunk in cluster.groupby("chunk"):
            if chunk_no == 0:  # the item chunk: codes held by fewer than k records
                for code in chunk["code"].dropna():
                    records[group][rng.integers(len(records[group]))].add(code)
            else:
                deal(chunk, records[group])
    members = clusters.drop_duplicates("group").dropna(subset=["joint"])
    for joint, shared in rows[rows["group"].str.startswith("J")].groupby("group", sort=False):
        targets = [r for g in members.loc[members["joint"] == joint, "group"]
                   for r in records[g]]
        for _, chunk in shared.groupby("chunk"):
            deal(chunk, targets)
    return pd.DataFrame(
        [{"record": f"R{n + 1}", "cluster": group, "codes": sorted(codes)}
         for n, (group, codes) in enumerate(
             (g, c) for g, recs in records.items() for c in recs)])


def load_kkm(folder: str = ".") -> "pd.DataFrame":
    """A (k, k^m)-anonymous release (ArtUC and its variants): one row per record.

    The two files joined: each record's generalized-code ids replaced by the codes each
    stands for (a list of code groups; a group reads "some of these codes"), and every
    numerical demographic's [low, high] as two numeric columns ``<name>_lo``/``<name>_hi``.
    """
    import pandas as pd

    records = pd.read_parquet(f"{folder}/records.parquet")
    groups = pd.read_parquet(f"{folder}/generalized_codes.parquet")
    codes = {int(i): list(c) for i, c in zip(groups["id"], groups["codes"], strict=True)}
    out = records.drop(columns=["generalized_codes"])
    for name in list(out.columns):
        values = out[name]
        if values.map(lambda v: not isinstance(v, str) and len(v) == 2).all():
            position = out.columns.get_loc(name)
            out.insert(position, f"{name}_lo", values.map(lambda v: float(v[0])))
            out.insert(position + 1, f"{name}_hi", values.map(lambda v: float(v[1])))
            out = out.drop(columns=[name])
    out["codes"] = records["generalized_codes"].map(lambda ids: [codes[int(i)] for i in ids])
    return out


def load_diffgen(folder: str = ".") -> "pd.DataFrame":
    """A DiffGen release: one row per released group, its noisy count as ``weight``.

    Use the weight as a frequency weight (e.g. ``sample_weight=``); a numerical attribute's
    interval label ``[lo,hi)`` becomes two numeric columns ``<name>_lo``/``<name>_hi``.
    """
    import json
    import os

    import pandas as pd

    with open(f"{folder}/cut.json", encoding="utf-8") as f:
        cut = json.load(f)
    csv = f"{folder}/groups.csv"
    groups = (pd.read_csv(csv, dtype=str) if os.path.exists(csv)
              else pd.read_parquet(f"{folder}/groups.parquet").astype(str))
    for attribute in cut["attributes"]:
        name = attribute["name"]
        if attribute["kind"] == "numerical":
            bounds = groups[name].str.extract(r"^[\[(]\s*([^,]+?)\s*,\s*([^\])]+?)\s*[\])]$")
            position = groups.columns.get_loc(name)
            groups.insert(position, f"{name}_lo", pd.to_numeric(bounds[0]))
            groups.insert(position + 1, f"{name}_hi", pd.to_numeric(bounds[1]))
            groups = groups.drop(columns=[name])
    return groups.rename(columns={cut["count_column"]: "weight"}).astype(
        {"weight": "int64"})


def load_gccens(folder: str = ".") -> "pd.DataFrame":
    """A GCCens release: one row per patient, the censored codes as a list (a code repeated
    as many times as the record holds it)."""
    import pandas as pd

    lines = pd.read_json(f"{folder}/censored.jsonl", lines=True, dtype={"patient_id": str})
    lines["codes"] = lines["codes"].map(
        lambda counts: sorted(c for c, n in (counts or {}).items() for _ in range(int(n))))
    return lines


def load_lda(folder: str = ".") -> "pd.DataFrame":
    """An LDA release: one row per patient, the trajectory as a list of (diagnosis node,
    age low, age high) in age order."""
    import pandas as pd

    lines = pd.read_json(f"{folder}/trajectories.jsonl", lines=True,
                         dtype={"patient_id": str})
    lines["trajectory"] = lines["trajectory"].map(
        lambda pairs: [(node, int(ages[0]), int(ages[1])) for node, ages in pairs])
    return lines
