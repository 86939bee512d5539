"""ArtUC benchmark: the paper's two dataset shapes, generated, at the paper's defaults.

* EHRD-like: 208,387 patients, age + gender, 13,963 distinct ICD-9 codes, 16.2 codes per
  patient on average (at most 185); utility constraints UC1 (12-year age bands × chapters).
* INFORMS-like: 36,553 patients, 5 demographics, 619 distinct codes, 4.27 codes per patient
  (at most 17); constraints UC1 of the paper's Table 6b.
* ``ehrd-gender`` (not run by default): the EHRD-like data with UC1's gender kept.

k = 10, m = 2, δ = 0.04 (``--delta``), ε = 6 % of the distinct codes. ArtUC runs with ε
unbounded so a run that would stop at Step 26 still reports its NCP, UL and clusters; the
``ε met`` column says whether the suppressed codes stay within ε (a release would be refused
otherwise). A run that fails Step 16 (NCP > δ) stops there. Each case runs in its own process so
its peak memory (max RSS) is its own; ``worker MB`` is the peak of the largest GenDiag
worker process (``--workers``, default: every usable CPU; 1 runs GenDiag in the main
process), each worker holding its own copy of the code table. Prints one
table row per case; ``--scale 0.1`` runs a tenth of the records while developing. Target
(issue 4): EHRD-like ArtUC in ≤ 120 s. ``--attack`` times the attack audit of the release
(issue 14; goal: ``attack s`` ≤ ``verify s``) and reports its smallest candidate set.
``--save DIR`` writes each case's release to ``DIR/<case>/`` for ``bench/artuc_format.py``
(release size, pandas load, verification time and peak on its own; issue 18).

    .venv/bin/python bench/artuc.py [--scale S] [--cases ehrd,informs] [--workers N]
                                    [--delta D] [--verify] [--attack] [--save DIR]
                                    [--code-system icd10]

``--code-system icd10`` runs the same generated patients with their codes mapped to
ICD-10-CM by the CMS GEMs (``bench/code_system.py``), the constraints' chapters and the
generalization hierarchy being ICD-10-CM's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from ehr_release.algorithms.artuc import artuc
from ehr_release.algorithms.artuc.artuc import in_process
from ehr_release.configuration.constraints import parse_config, read_hierarchy_file, rt_data
from ehr_release.core.errors import ParameterError
from ehr_release.model.dataset import Dataset
from ehr_release.model.hierarchy import icd9_hierarchy
from ehr_release.runtime.workers import gendiag_processes, usable_cpus

K, M, DELTA, EPS_SHARE = 10, 2, 0.04, 0.06


def _codes(rng: np.random.Generator, n: int, vocab: np.ndarray, chapter: np.ndarray,
           mean: float, most: int) -> list[list[str]]:
    """Zipf-distributed codes with a per-patient main chapter; every code used once."""
    v = len(vocab)
    weight = (np.arange(v) + 10.0) ** -1.05
    per = np.minimum(1 + rng.negative_binomial(2, 2 / (2 + mean - 1), n), most)
    longest = int(rng.integers(n))
    owner = np.repeat(np.arange(n), per)
    code = rng.choice(v, len(owner), p=weight / weight.sum())
    chapters = np.unique(chapter)
    main = rng.choice(len(chapters), n)
    affine = rng.random(len(owner)) < 0.5
    for c in range(len(chapters)):  # half of a patient's codes from its main chapter
        pool = np.flatnonzero(chapter == chapters[c])
        pick = affine & (main[owner] == c)
        w = weight[pool] / weight[pool].sum()
        code[pick] = pool[rng.choice(len(pool), int(pick.sum()), p=w)]
    unused = np.setdiff1d(np.arange(v), code)
    extra_owner = rng.integers(0, n, len(unused))
    owner, code = np.r_[owner, extra_owner], np.r_[code, unused]
    pairs = np.unique(owner * v + code)
    out: list[list[str]] = [[] for _ in range(n)]
    for o, c in zip((pairs // v).tolist(), (pairs % v).tolist(), strict=True):
        out[o].append(vocab[c])
    out[longest] = sorted(set(out[longest]) | set(vocab[rng.choice(v, most, replace=False)]))
    out[longest] = out[longest][:most]
    return out


def ehrd_like(n: int, seed: int = 7) -> tuple[Dataset, dict]:
    rng = np.random.default_rng(seed)
    h = icd9_hierarchy()
    leaves = np.array(sorted(x for x in h.parent if h.is_leaf(x)), dtype=object)
    vocab = rng.permutation(leaves)[:13_963]
    chapter = np.array([h.ancestor_at_level(c, 1) for c in vocab], dtype=object)
    demo = pd.DataFrame({"age": np.rint(100 * rng.beta(2.0, 1.6, n)).astype(int),
                         "gender": rng.choice(["F", "M"], n)})
    codes = _codes(rng, n, vocab, chapter, 18.3, 185)
    config = {
        "attributes": {"age": {"type": "numerical", "domain": [0, 100]},
                       "gender": {"type": "categorical", "hierarchy": {"All": ["F", "M"]}}},
        "constraints": [{"name": "UC1", "age": {"bands": 12, "from": 0, "to": 107},
                         "gender": "All", "codes": "chapters"}],
    }
    return Dataset.from_records(codes, demo), config


def informs_like(n: int, seed: int = 11) -> tuple[Dataset, dict]:
    rng = np.random.default_rng(seed)
    h = icd9_hierarchy()
    three = np.array(sorted(x for x, lv in h.level.items() if lv == 3), dtype=object)
    vocab = rng.permutation(three)[:619]
    chapter = np.array([h.ancestor_at_level(c, 1) for c in vocab], dtype=object)
    demo = pd.DataFrame({
        "sex": rng.choice(["F", "M"], n),
        "birth_year": rng.integers(1918, 2001, n),
        "education": np.minimum(rng.poisson(13, n), 31),
        "household": np.minimum(rng.poisson(2.5, n), 9),
        "race": rng.choice(["white", "black", "asian", "other"], n, p=[0.7, 0.15, 0.1, 0.05]),
    })
    codes = _codes(rng, n, vocab, chapter, 4.75, 17)
    config = {
        "attributes": {
            "sex": {"type": "categorical", "hierarchy": {"All": ["F", "M"]}},
            "birth_year": {"type": "numerical", "domain": [1918, 2000]},
            "education": {"type": "numerical", "domain": [0, 31]},
            "household": {"type": "numerical", "domain": [0, 9]},
            "race": {"type": "categorical",
                     "hierarchy": {"All": ["white", "black", "asian", "other"]}}},
        "constraints": [{"name": "UC1", "sex": "All",
                         "birth_year": {"bands": 20, "from": 1918, "to": 2000},
                         "education": [[0, 17], [18, 31]], "household": [0, 9], "race": "All",
                         "codes": "chapters"}],
    }
    return Dataset.from_records(codes, demo), config


def ehrd_like_by_gender(n: int, seed: int = 7) -> tuple[Dataset, dict]:
    """EHRD-like data under UC1 with gender kept (F and M bands instead of All).

    Clusters then never merge across gender: in this data codes do not depend on gender,
    so under UC1 a cross-gender partner can have the least UL and spend 0.5 NCP per record.
    """
    dataset, config = ehrd_like(n, seed)
    config["constraints"][0]["gender"] = ["F", "M"]
    return dataset, config


CASES = {"ehrd": (ehrd_like, 208_387), "informs": (informs_like, 36_553),
         "ehrd-gender": (ehrd_like_by_gender, 208_387)}


class _WorkerPeaks(threading.Thread):
    """Samples the peak RSS (VmHWM) of this process's children every half second (Linux).

    ``RUSAGE_CHILDREN`` would not do: a spawned child's max RSS includes the parent's
    pages it briefly shared between fork and exec.
    """

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kb: dict[int, int] = {}

    def run(self) -> None:
        me = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
        while me.exists():
            for pid in me.read_text().split():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kb[int(pid)] = max(self.peak_kb.get(int(pid), 0),
                                                     int(line.split()[1]))
            time.sleep(0.5)


_WORKERS = _WorkerPeaks()


def _peak_mb() -> dict:
    """Max RSS of this process and of the largest worker process, in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    worker = max(_WORKERS.peak_kb.values(), default=0)
    return {"peak MB": round(own / 1024), "worker MB": round(worker / 1024) or "–"}


def run_case(name: str, scale: float, verify: bool, workers: int, delta: float,
             attack: bool = False, save: Path | None = None, system: str = "icd9") -> dict:
    make, full = CASES[name]
    n = max(int(full * scale), 100)
    dataset, raw = make(n)
    if system == "icd10":
        from code_system import mapped  # bench/code_system.py

        dataset, raw = mapped(dataset), {**raw, "codes": {"hierarchy": "icd10"}}
    config = parse_config(raw, lambda ref: read_hierarchy_file(ref, Path()))
    data = rt_data(dataset, config)
    eps = EPS_SHARE * len(dataset.distinct_codes())
    row = {"case": name, "records": dataset.n_patients,
           "codes": len(dataset.distinct_codes()),
           "avg codes": round(float(np.mean([len(c) for c in data.codes])), 2),
           "δ": delta, "ε": round(eps, 1), "workers": workers}
    runner = partial(gendiag_processes, workers=workers) if workers > 1 else in_process
    _WORKERS.start()
    start = time.perf_counter()
    try:
        anon = artuc(data, config, k=K, m=M, delta=delta, epsilon=float("inf"),
                     rng=np.random.default_rng(0), gendiag_runner=runner)
    except ParameterError as exc:  # Step 16 (δ): a result row, not a crash
        row["failed"] = f"{exc.parameter} {exc.value:g} {exc.rule.split(';')[0]}"
        row["seconds"] = round(time.perf_counter() - start, 1)
        row.update(_peak_mb())
        return row
    seconds = time.perf_counter() - start
    row.update({"clusters": len(anon.clusters), "NCP": round(anon.ncp, 4),
                "UL": round(anon.ul, 4), "suppressed": anon.suppressed_codes,
                "ε met": "yes" if anon.suppressed_codes <= eps else "no",
                "seconds": round(seconds, 1)})
    if save is not None:  # for bench/artuc_format.py: size, load and verification alone
        from ehr_release.algorithms.artuc import release_files

        folder = save / name
        folder.mkdir(parents=True, exist_ok=True)
        for file, data in release_files(anon).items():
            (folder / file).write_bytes(data)
        (folder / "case.json").write_text(json.dumps({"case": name, "records": n,
                                                      "delta": delta}))
    if verify:
        from ehr_release.algorithms.artuc import release_files
        from ehr_release.privacy.kkm import check_kkm

        start = time.perf_counter()
        report = check_kkm(release_files(anon), dataset, config, algorithm="artuc", k=K, m=M,
                            delta=delta, epsilon=eps, constrained=True)
        failed = ", ".join(r.name for r in report.failures)
        row["verified"] = "yes" if report.holds else f"no: {failed}"
        t_verify = time.perf_counter() - start
        row["verify s"] = round(t_verify, 1)
    if attack:
        from ehr_release.algorithms.artuc import release_files
        from ehr_release.privacy.attacks.kkm import attack_kkm

        start = time.perf_counter()
        audit = attack_kkm(release_files(anon), dataset, config, k=K, m=M)
        t_attack = time.perf_counter() - start
        row["attack s"] = round(t_attack, 1)
        row["attack"] = (f"{'passed' if audit.passed else 'FAILED'}: smallest "
                         f"{audit.smallest_candidate_set} over {audit.knowledge_sets_tried:,} "
                         f"sets{'' if audit.exhaustive else ' (sampled + rare)'}")
        if "verify s" in row:   # issue 37 goal 5: attack ≤ verification, same run
            row["attack/verify"] = round(t_attack / max(t_verify, 1e-9), 2)
    row.update(_peak_mb())
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--cases", default="ehrd,informs")
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--attack", action="store_true", help="time the attack audit too")
    ap.add_argument("--workers", type=int, default=usable_cpus())
    ap.add_argument("--delta", type=float, default=DELTA)
    ap.add_argument("--save", type=Path, help="write each case's release to SAVE/<case>/")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    sys.path.insert(0, str(Path(__file__).parent))
    from code_system import add_option

    add_option(ap)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_case(args.one, args.scale, args.verify, args.workers, args.delta,
                                  args.attack, args.save, args.code_system)))
        return
    rows = []
    for case in args.cases.split(","):
        cmd = [sys.executable, __file__, "--one", case, "--scale", str(args.scale),
               "--workers", str(args.workers), "--delta", str(args.delta),
               "--code-system", args.code_system]
        flags = (["--verify"] if args.verify else []) + (["--attack"] if args.attack else []) + (
            ["--save", str(args.save)] if args.save else [])
        out = subprocess.run(cmd + flags, check=True, capture_output=True, text=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cols = list(dict.fromkeys(c for r in rows for c in r))
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r.get(c, "")) for c in cols))


if __name__ == "__main__":
    main()
