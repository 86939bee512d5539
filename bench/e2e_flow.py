"""The whole release flow on generated patients, against calling the algorithm directly.

For one dataset (default 1,000,000 generated patients, disassociation k=5, m=2) it runs:

* ``direct`` — read the file, anonymize, verify, evaluate, render the certificate PDF: the
  plain function calls the flow wraps, no Prefect;
* ``flow/<runner>`` — ``release_flow`` with that task runner (threads, a local Dask
  cluster) against the local Prefect server, approved by a reviewer thread the moment it
  waits, then published.

Each case runs in a fresh process so its peak memory (max RSS; Dask workers are separate
processes and reported apart) is its own. Orchestration overhead = flow time to
``awaiting_approval`` minus the direct time (the issue's goal: ≤ 10 s per run).

    .venv/bin/python bench/e2e_flow.py [--patients 1000000] [--runners threads,dask:2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARAMS = {"k": "5", "m": "2", "seed": "1"}

DIRECT = """
import json, resource, sys, time
from datetime import UTC, datetime
from ehr_release.documents.certificate import CertificateContext, render_certificate_pdf
from ehr_release.ingest import read_dataset
from ehr_release.core.randomness import check_random_state
from ehr_release.registry import get
t = {}; t0 = time.perf_counter()
ds = read_dataset(sys.argv[1]); t["read"] = time.perf_counter() - t0
e = get("disassociation"); p = e.parse(json.loads(sys.argv[2]))
s = time.perf_counter(); files = e.anonymize(ds, p, check_random_state(1))
t["anonymize"] = time.perf_counter() - s
s = time.perf_counter(); v = e.verify(files, ds, p); t["verify"] = time.perf_counter() - s
s = time.perf_counter(); u = e.evaluate(files, ds, p, check_random_state(1))
t["evaluate"] = time.perf_counter() - s
s = time.perf_counter()
ctx = CertificateContext(run_id="rel-" + "0" * 32, requester="bench",
    created_at=datetime.now(UTC), algorithm=e.name, algorithm_summary=e.summary,
    privacy_model=e.privacy_model, parameters=p, dataset_source=ds.source,
    dataset_rows=ds.n_patients, dataset_fingerprint=ds.fingerprint(),
    dataset_schema=ds.schema(), manifest=[(n, "", len(b)) for n, b in files.items()],
    verification=v, utility=u, approval=None,
    audit_head="0" * 64, audit_events=0, status="certified")
render_certificate_pdf(ctx); t["certificate"] = time.perf_counter() - s
t["total"] = time.perf_counter() - t0
print(json.dumps({"holds": v.holds, "times": t,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

FLOW = """
import json, os, resource, sys, threading, time
from prefect.settings import PREFECT_API_URL, temporary_settings
from ehr_release.flows.server import configure_prefect_home, ensure_api, stop_local_server
configure_prefect_home()
from ehr_release.flows.release import release_flow
from ehr_release.flows.runners import make_task_runner
from ehr_release.planning.request import ReleaseRequest
from ehr_release.service import decide_and_resume
from ehr_release.storage import runs
from ehr_release.storage.runs import Status
api = ensure_api()
req = ReleaseRequest(run_id=runs.new_run_id(), input_path=sys.argv[1], algorithm="disassociation",
    params=json.loads(sys.argv[2]), requester="steward", out_dir=sys.argv[3],
    approval_timeout_s=3600, task_runner=sys.argv[4])
marks = {}
def reviewer():
    while True:
        try:
            status = runs.get_run(req.run_id).status
        except Exception:
            status = None
        if status in (Status.AWAITING_APPROVAL, Status.FAILED):
            marks["awaiting"] = time.perf_counter()
            if status == Status.AWAITING_APPROVAL:
                decide_and_resume(req.run_id, reviewer="reviewer", decision="approve",
                                  reason="bench")
            return
        time.sleep(0.05)
with temporary_settings(updates={PREFECT_API_URL: api}):
    threading.Thread(target=reviewer, daemon=True).start()
    t0 = time.perf_counter()
    wall0 = time.time()
    status = release_flow.with_options(task_runner=make_task_runner(sys.argv[4]))(req)
    end = time.perf_counter()
stop_local_server()  # its home is a temporary folder: nobody else would ever stop it
from datetime import datetime
from ehr_release.storage.audit import export_events
stages, last = {}, wall0
for line in export_events(req.run_id, "jsonl").splitlines():
    ev = json.loads(line)
    at = datetime.fromisoformat(ev["created_at"]).timestamp()
    stages[ev["action"]] = round(at - last, 2)
    last = at
print(json.dumps({"status": status, "to_awaiting": marks.get("awaiting", end) - t0,
                  "stages": stages,
                  "total": end - t0,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "workers_peak_mb":
                      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _child(code: str, *args: str, env_home: Path) -> dict:
    import os

    env = {**os.environ, "EHR_RELEASE_HOME": str(env_home), "EHR_RELEASE_TEST_MODE": "1",
           "EHR_RELEASE_DATABASE_URL": f"sqlite:///{env_home / 'db.sqlite'}"}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"case failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--patients", type=int, default=1_000_000)
    ap.add_argument("--runners", default="threads,dask:2")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from ehr_release.samples.sample import generate_sample, write_sample

    with tempfile.TemporaryDirectory(prefix="ehr-e2e-") as tmp:
        work = Path(tmp)
        data = work / "patients.parquet"
        t = time.perf_counter()
        write_sample(generate_sample(args.patients, seed=2014), data)
        print(f"generated {args.patients:,} patients in {time.perf_counter() - t:.1f} s")
        params = json.dumps(PARAMS)
        flow_stages: list[tuple[str, dict]] = []
        direct = _child(DIRECT, str(data), params, env_home=work / "direct")
        d = direct["times"]
        print(f"\n{'case':<16}{'to awaiting s':>14}{'total s':>10}{'peak MB':>10}"
              f"{'children MB':>12}{'overhead s':>12}")
        print(f"{'direct':<16}{d['total']:>14.1f}{d['total']:>10.1f}{direct['peak_mb']:>10.0f}"
              f"{'-':>12}{'-':>12}")
        for runner in args.runners.split(","):
            home = work / runner.replace(":", "-")
            r = _child(FLOW, str(data), params, str(work / "out"), runner, env_home=home)
            print(f"{'flow/' + runner:<16}{r['to_awaiting']:>14.1f}{r['total']:>10.1f}"
                  f"{r['peak_mb']:>10.0f}{r['workers_peak_mb']:>12.0f}"
                  f"{r['to_awaiting'] - d['total']:>12.1f}   ({r['status']})")
            flow_stages.append((runner, r["stages"]))
        print("\ndirect stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in d.items()))
        for runner, stages in flow_stages:  # seconds since the previous audit event
            print(f"flow/{runner} stages (s since previous event): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))


if __name__ == "__main__":
    main()
