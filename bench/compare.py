"""``compare`` of disassociation + ArtUC over k = 5, 10, 25 on 10,000 patients (issue 18 goal 4).

The issue measured this comparison at 17 min, silent, every ArtUC candidate re-running RmR
and Baseline for its own evaluation; the goal is ≤ 2 min with each candidate's row streamed
as it finishes.

The case: 10,000 patients from the project's own generator
(:func:`ehr_release.samples.sample.generate_sample`, the one ``ehr-release sample`` writes; seed
2014), written as the wide CSV a steward would give; ArtUC with
``examples/artuc-mimic/config.yaml`` (its ``defaults:`` give m = 2, δ = 0.3, ε = 6 %; the
sample has the same MIMIC-style demographics), disassociation with m = 2, both over
``--param-grid k=5,10,25``. The comparison is the CLI's own path,
:func:`ehr_release.service.start_comparison` (the flow on the request's task runner, against
this home's local Prefect server), in a fresh home under a temporary folder. The server is
started first and timed apart (``server start``): a steward's server is usually up already.

Per candidate it prints the seconds of each stage — ``anonymize`` (pseudonymized as
released), ``verify+attack`` (closed world, verifier, source ids, attack audit),
``evaluate`` (ArtUC's includes its RmR and Baseline comparators) — and when its row
streamed (seconds from the comparison's start). Then the comparison's wall time, the CPU
seconds of this process (every candidate runs in it: the task runner's threads) and of the
Prefect server (from ``/proc``), and when the first row streamed. ``--profile DIR`` writes
one cProfile per candidate and stage (``DIR/<row>-<stage>.prof``; cProfile follows one
thread, so each stage is profiled alone even when candidates run side by side) and prints
the top functions by cumulative time.

``--budget S`` (default 3600) reports a comparison still running after S seconds with what
it has (rows streamed, stages done, ``> s`` for the stage under way) and leaves it.

Measured (2026-11-27, this 2-core machine otherwise idle, numba's cache warm): the issue's
case, ``--seed 1``, threads, in 94.4 and 96.5 s (160.7 and 164.2 CPU s in this process):
disassociation's rows at 12–13 s, ArtUC k = 25 at 25–26 s, k = 10 at 39 s, k = 5 at 94–95 s
(its anonymization, 89–91 s, is the critical path: 222,284 GenDiag calls over 642 merges,
each a partner search of ≈ 350 clusters). The previous stop's code took 147.2 s in the same
session; the steps between are in ``docs/benchmarks.md``.

``--seed N`` fixes every candidate's randomness (it sets ``EHR_RELEASE_TEST_MODE=1``, as a
seed needs) and prints each row's metrics' SHA-256, so two runs can be checked for the same
results.

    .venv/bin/python bench/compare.py [--patients 10000] [--k 5,10,25]
        [--algorithms disassociation,artuc] [--runner threads] [--seed 1]
        [--param compare=true] [--budget 3600] [--profile DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from process_cpu import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "artuc-mimic" / "config.yaml"
STAGES = ("anonymize", "verify+attack", "evaluate")


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class StageClock:
    """Seconds of each stage of each candidate, measured in the thread that runs it.

    A candidate runs start to end in one task-runner thread, so the thread remembers which
    candidate (row) it is working on from the first stage's release id.
    """

    def __init__(self, profile_dir: Path | None) -> None:
        self.seconds: dict[int, dict[str, float]] = {}
        self.running: dict[int, tuple[str, float]] = {}  # row → (stage, start)
        self.profile_dir = profile_dir
        self._row = threading.local()
        self._lock = threading.Lock()

    def timed(self, stage: str, fn: Callable[..., Any],
              row_of: Callable[..., int | None]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            row = row_of(*args, **kwargs)
            if row is not None:
                self._row.value = row
            row = getattr(self._row, "value", -1)
            prof = cProfile.Profile() if self.profile_dir else None
            t0 = time.perf_counter()
            with self._lock:
                self.running[row] = (stage, t0)
            if prof:
                prof.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                if prof:
                    prof.disable()
                    prof.dump_stats(str(self.profile_dir / f"{row}-{stage}.prof"))
                with self._lock:
                    self.seconds.setdefault(row, {})[stage] = time.perf_counter() - t0
                    self.running.pop(row, None)
        return call


def instrument(clock: StageClock) -> None:
    """Time the stages of :func:`ehr_release.flows.compare.candidate_task` (its module's names)."""
    from ehr_release.flows import compare as flow

    def row_of_release(*args: Any, **_: Any) -> int:
        return int(str(args[-1]).rsplit("-", 1)[1])

    real_get = flow.get_algorithm

    def get_timed(name: str) -> Any:
        entry = real_get(name)
        return replace(entry, evaluate=clock.timed("evaluate", entry.evaluate,
                                                   lambda *a, **k: None))

    flow.anonymize_as_released = clock.timed("anonymize", flow.anonymize_as_released,
                                             row_of_release)
    flow.verify_and_attack = clock.timed("verify+attack", flow.verify_and_attack,
                                         row_of_release)
    flow.get_algorithm = get_timed


def run(args: argparse.Namespace, tmp: Path) -> None:
    home = tmp / "home"
    os.environ["EHR_RELEASE_HOME"] = str(home)
    os.environ["EHR_RELEASE_DATABASE_URL"] = f"sqlite:///{home / 'db.sqlite'}"
    os.environ["EHR_RELEASE_RELEASES_ROOT"] = str(tmp)  # the report lands under the root
    os.environ.pop("PREFECT_API_URL", None)
    if args.seed is not None:
        os.environ["EHR_RELEASE_TEST_MODE"] = "1"
    from ehr_release.flows.server import configure_prefect_home

    configure_prefect_home()  # before Prefect is imported

    from ehr_release import service
    from ehr_release.flows.server import ensure_api, stop_local_server
    from ehr_release.planning.request import ComparisonRequest
    from ehr_release.samples.sample import generate_sample, write_sample

    data = write_sample(generate_sample(args.patients, seed=2014), tmp / "extract.csv")
    params = {"m": "2", "config": str(CONFIG)}
    if args.seed is not None:
        params["seed"] = str(args.seed)
    params.update(a.split("=", 1) for a in args.param)
    request = ComparisonRequest(
        comparison_id="cmp-" + secrets.token_hex(16), input_path=str(data),
        algorithms=args.algorithms.split(","), params=params,
        grid={"k": args.k.split(",")}, requester="bench", out_dir=str(tmp / "out"),
        task_runner=args.runner)
    profile_dir = Path(args.profile).resolve() if args.profile else None
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
    clock = StageClock(profile_dir)
    instrument(clock)

    t = time.perf_counter()
    ensure_api()
    server_start = time.perf_counter() - t
    state = json.loads((home / "prefect-server.json").read_text())
    server_pid = int(state["pid"])
    candidates = service.comparison_candidates(request)
    outcomes: dict[int, Any] = {}
    streamed: dict[int, float] = {}
    box: dict[str, Any] = {}
    try:
        server_cpu0, cpu0 = cpu_seconds(server_pid) or 0.0, _own_cpu()
        t0 = time.perf_counter()

        def shown(outcome: Any, done: int, total: int) -> None:
            at = streamed[outcome.candidate.index] = time.perf_counter() - t0
            outcomes[outcome.candidate.index] = outcome
            print(f"  row {outcome.candidate.index} streamed at {at:6.1f} s ({done}/{total}): "
                  f"{outcome.candidate.label}", flush=True)

        def compare() -> None:
            box["report"] = service.start_comparison(request, on_candidate=shown)

        worker = threading.Thread(target=compare, daemon=True)
        worker.start()
        worker.join(args.budget)
        wall = time.perf_counter() - t0
        cpu = _own_cpu() - cpu0
        server_cpu = (cpu_seconds(server_pid) or 0.0) - server_cpu0
    finally:
        stop_local_server()
    finished = "report" in box
    print()
    print(f"{args.patients:,} patients; runner {args.runner}; seed {args.seed}"
          + ("" if finished else f"; NOT FINISHED within the budget of {args.budget:.0f} s"
             " (unfinished stages: '>' seconds so far)"))
    head = ["row", "candidate", "verified", "loss", *(f"{s} s" for s in STAGES), "streamed at s"]
    if args.seed is not None:
        head.append("metrics sha256")
    print(" | ".join(head))
    for c in candidates:
        o = outcomes.get(c.index)
        secs = clock.seconds.get(c.index, {})
        running = clock.running.get(c.index)
        cells = [str(c.index), c.label]
        if o is None:
            cells += ["–", "–"]
        else:
            cells += ["yes" if o.verified else ("error: " + o.error if o.error else "no"),
                      "–" if o.loss is None else f"{o.loss_metric} {o.loss:.4g}"]
        for stage in STAGES:
            if stage in secs:
                cells.append(f"{secs[stage]:.1f}")
            elif running and running[0] == stage:
                cells.append(f"> {time.perf_counter() - running[1]:.0f}")
            else:
                cells.append("–")
        cells.append(f"{streamed[c.index]:.1f}" if c.index in streamed else "–")
        if args.seed is not None:
            digest = hashlib.sha256(json.dumps(o.metrics if o else None,
                                               sort_keys=True).encode())
            cells.append(digest.hexdigest()[:16] if o else "–")
        print(" | ".join(cells))
    print()
    print("server start s | compare wall s | CPU s (this process) | server CPU s | "
          "first row at s | rows streamed | recommended row")
    first = f"{min(streamed.values()):.1f}" if streamed else "–"
    print(f"{server_start:.1f} | {wall:.1f}{'' if finished else ' (stopped)'} | {cpu:.1f} | "
          f"{server_cpu:.1f} | {first} | {len(streamed)}/{len(candidates)} | "
          f"{box['report']['recommended_row'] if finished else '–'}", flush=True)
    if profile_dir:
        for path in sorted(profile_dir.glob("*.prof")):
            print(f"\n== {path.name}")
            pstats.Stats(str(path)).sort_stats("cumulative").print_stats(args.top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patients", type=int, default=10_000)
    ap.add_argument("--k", default="5,10,25")
    ap.add_argument("--algorithms", default="disassociation,artuc")
    ap.add_argument("--runner", default="threads")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--param", action="append", default=[],
                    help="extra fixed parameter NAME=VALUE (repeatable), e.g. compare=true")
    ap.add_argument("--profile", default=None, help="folder for one cProfile per stage")
    ap.add_argument("--budget", type=float, default=3600,
                    help="seconds after which the unfinished comparison is reported and left")
    ap.add_argument("--top", type=int, default=25, help="functions shown per profile")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    tmp = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.flush()
    os._exit(0)  # an unfinished comparison's task threads are left running: do not wait


if __name__ == "__main__":
    main()
