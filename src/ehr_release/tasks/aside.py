"""Work of the release flow done on the second CPU, in a process of its own.

Two stages need not wait for the work beside them (issue 18 goal 1: 58,302 records, k=5,
m=2, where the flow process alone was the run's critical path while the second CPU idled):

* the utility evaluation needs only the candidate release, not the verifier's and the
  attack's verdicts (3 s beside their 0.7 s): :func:`begin_evaluation` hands it over right
  after the anonymization, and the evaluate stage takes the report (:func:`take_evaluation`)
  at the same point of the sequence as before, so the run's records, audit events and
  certificate are written in the same order;
* the certificate's PDF (0.6 s) is rendered there while the flow renders the datasheet
  (0.3 s) from the same recorded facts (:func:`begin_certificate`, :func:`take_certificate`).

The work is mostly interpreted Python: under the GIL a thread would only take turns with
the flow, hence a process. The flow process of a CLI run spawns it first thing
(:mod:`ehr_release.flows.launch`): it reads and checks the request's input while the flow
process loads Prefect, and hands the dataset to the head start (:func:`take_input`,
:mod:`ehr_release.flows.head_start`); then it imports the evaluation's and the certificate's
modules while the flow anonymizes, and derives what the evaluation needs of the input and
the parameters alone (the entry's ``prepare_evaluation``: a disassociation's comparator and
its workloads with their true answers, which depend on no release). Nothing is published
on the strength of it: the flow still fails on a verification or an attack that does not
hold, and then ends the process (:func:`stop_worker`) without reading its report.

Each job is a pure function of what it is sent and of the input it read: a seeded run's
evaluation stream is made in the flow process and shipped with its state, so the report
(chart bytes included) is the one the stage would compute in place; an unseeded run's
is drawn from OS entropy here, as the flow would draw it, so that what the evaluation
derives from the input and its stream alone can be derived ahead. The certificate is
rendered from the context the certify stage built. The process is spawned, never forked
(the flow process has Prefect's threads running; see :mod:`ehr_release.runtime.workers`),
and daemonic: it ends with the flow process, and sees the end of its pipe if that is
killed. Should it be gone, or a job fail there, the stage does the work in place as
before (an error is then raised by the stage itself, with its own traceback). One job is
out at a time.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ehr_release.model.reports import UtilityReport

if TYPE_CHECKING:
    import numpy as np

    from ehr_release.documents.certificate import CertificateContext
    from ehr_release.model.dataset import Dataset
    from ehr_release.planning.plan import ReleasePlan
    from ehr_release.planning.request import ReleaseRequest
    from ehr_release.registry import ReleaseFiles

EVALUATE = "evaluate"
CERTIFICATE = "certificate"


@dataclass
class _Worker:
    process: Any  # a spawned multiprocessing.Process
    conn: Connection
    job: tuple[str, str] | None = None  # (kind, run id) of the job handed over, if any
    sender: threading.Thread | None = None
    input_unread: bool = True  # its first message, the input it read, is still in the pipe
    read: Any = None  # the dataset it read and sent, which it keeps (not sent back to it)


_worker: _Worker | None = None
_PROC = Path("/proc")


def start_worker(request_path: Path) -> bool:
    """Spawn the worker for the request at ``request_path``, unless there is one already or
    this process has one CPU only, or no CPU is free now (:func:`_cpu_free`), or may not
    start children (a daemonic Dask worker). True
    if a worker is running. It first reads and checks the request's input, as the flow's
    head start would (:func:`take_input`), then imports what its jobs need."""
    global _worker
    from ehr_release.runtime.cpus import usable_cpus

    if _worker is not None:
        return True
    if usable_cpus() < 2 or multiprocessing.current_process().daemon or not _cpu_free():
        return False
    context = multiprocessing.get_context("spawn")
    here, there = context.Pipe()
    process = context.Process(
        target=_serve, args=(there, str(request_path)), daemon=True, name="release-aside"
    )
    _start_off_stdout(process)
    there.close()
    _worker = _Worker(process, here)
    return True


#: How often :func:`_cpu_free` looks at the CPUs, and how long it waits between looks.
CPU_LOOKS = 3
CPU_LOOK_GAP_S = 0.01


def _cpu_free() -> bool:
    """Whether no other program is running now on the CPUs this run's own two processes
    leave: in one of :data:`CPU_LOOKS` looks :data:`CPU_LOOK_GAP_S` apart, fewer runnable
    processes, besides this one and its parent (the CLI, still reading the input), than
    usable CPUs less one.

    Why: the second process pays for itself only on a free CPU. With another program busy on
    the second CPU, runs with it took 14.6–15.6 s against 13.0–13.7 s without it (issue 18
    goal 1, ``bench/governed_run.py``): its ≈ 2 extra CPU seconds then cost more than the
    overlap gains. The kernel's own count (``/proc/loadavg``) cannot tell: it includes the
    CLI and this process. Why several looks: a program busy on the CPU is runnable in each,
    while a background service waking for a few milliseconds (the Prefect server, a
    broker's timer) is caught by one look about one time in twenty on an idle machine here,
    and the run then went without its second process (16.5 s against 10.1–12.2 s,
    ``bench/governed_run.py``, issue 37 goal 1). Where ``/proc`` cannot be read, the CPU
    is taken as free."""
    from ehr_release.runtime.cpus import usable_cpus

    room = usable_cpus() - 1
    for look in range(CPU_LOOKS):
        if look:
            _wait_between_looks()
        others = _other_runnable()
        if others is None or others < room:
            return True
    return False


def _wait_between_looks() -> None:
    time.sleep(CPU_LOOK_GAP_S)


def _other_runnable() -> int | None:
    """How many processes other than this one and its parent are runnable now; None where
    ``/proc`` cannot be read."""
    ours = {os.getpid(), os.getppid()}
    others = 0
    try:
        entries = list(os.scandir(_PROC))
    except OSError:
        return None
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
        except OSError:  # ended meanwhile, or not ours to read
            continue
        others += stat[stat.rfind(b")") + 2:][:1] == b"R"  # state follows "(name) "
    return others


def _start_off_stdout(process: Any) -> None:
    """Start ``process`` with stderr as its stdout.

    Until the flow process writes ``ready``, its stdout is the CLI's pipe, and the CLI reads
    one line from it, or its end if the flow process dies first: neither this child nor
    the resource tracker multiprocessing starts with the first one may hold it open.
    """
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        process.start()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def take_input(request: ReleaseRequest) -> tuple[Dataset, str] | None:
    """The dataset the worker read for ``request``, and its fingerprint; None if there is no
    worker, if it read another request (the file changed) or its read failed: the caller
    then reads the input itself, and meets the error if there is one."""
    worker = _worker
    if worker is None or not worker.input_unread:
        return None
    worker.input_unread = False
    try:
        status, result = worker.conn.recv()
    except (EOFError, OSError):
        stop_worker()
        return None
    if status != "ok":
        return None
    read, dataset, fingerprint = result
    if read != request:
        return None
    worker.read = dataset
    return dataset, fingerprint


def begin_evaluation(plan: ReleasePlan, files: ReleaseFiles) -> bool:
    """Hand the worker (if any) the candidate to evaluate; the evaluate stage takes it.

    The original data goes along unless the plan's dataset is the very object the worker
    read and sent (:func:`take_input`): it evaluates on its own copy of it then. So does
    the run's random stream, unless the run has no seed: then the worker evaluates with the
    stream it drew from OS entropy itself (as the flow would), the one from which it
    derived the evaluation's release-independent part ahead (:func:`_prepare_evaluation`).
    """
    worker = _worker
    held = worker is not None and worker.read is not None and plan.dataset is worker.read
    dataset = None if held else plan.dataset
    from ehr_release.parameters.params import SEED

    rng = None if plan.params.get(SEED) is None else plan.rng()
    return _begin(
        EVALUATE,
        plan.run_id,
        (plan.algorithm, plan.run_id, files, dataset, plan.stage_params(), rng),
    )


def take_evaluation(run_id: str) -> UtilityReport | None:
    """The report the worker computed for ``run_id``, or None: no worker was handed this
    run, or it failed or died (the stage then evaluates in place)."""
    report = _take(EVALUATE, run_id)
    return report if isinstance(report, UtilityReport) else None


def evaluation_pending(run_id: str) -> bool:
    """True while the worker is still evaluating ``run_id`` (its report not yet sent): the
    flow may spend that wait on work of its own, which would otherwise delay it."""
    worker = _worker
    if worker is None or worker.job != (EVALUATE, run_id) or not worker.process.is_alive():
        return False
    if worker.input_unread:  # the input it read is first in the pipe: cannot tell
        return False
    try:
        return not worker.conn.poll(0)
    except (EOFError, OSError):
        return False


def begin_certificate(run_id: str, ctx: CertificateContext) -> bool:
    """Hand the worker (if any) the certificate to render; True if it took it."""
    return _begin(CERTIFICATE, run_id, (ctx,))


def take_certificate(run_id: str) -> bytes | None:
    """The certificate PDF the worker rendered for ``run_id``, or None (render it here)."""
    pdf = _take(CERTIFICATE, run_id)
    return pdf if isinstance(pdf, bytes) else None


def stop_worker() -> None:
    """End the worker, whatever it is doing (a failed run does not wait for its report)."""
    global _worker
    worker, _worker = _worker, None
    if worker is None:
        return
    with suppress(Exception):
        worker.conn.close()
    with suppress(Exception):
        worker.process.terminate()
        worker.process.join(timeout=5)


def _begin(kind: str, run_id: str, payload: tuple[Any, ...]) -> bool:
    """Send a job from a thread: the worker reads it only once it is free (its imports
    done), and the flow goes on meanwhile."""
    worker = _worker
    if worker is None or worker.job is not None or not worker.process.is_alive():
        return False
    worker.job = (kind, run_id)
    worker.sender = threading.Thread(
        target=_send, args=(worker.conn, (kind, payload)), daemon=True, name="release-aside-send"
    )
    worker.sender.start()
    return True


def _take(kind: str, run_id: str) -> Any:
    """The result of the job handed over, if it is this one and succeeded; else None. A
    worker that failed a job or died is stopped."""
    worker = _worker
    if worker is None or worker.job != (kind, run_id):
        return None
    worker.job = None
    if worker.input_unread:  # nobody took it: it is not this job's result
        worker.input_unread = False
        with suppress(EOFError, OSError):
            worker.conn.recv()
    try:
        if worker.sender is not None:
            worker.sender.join()
        status, result = worker.conn.recv()
    except (EOFError, OSError):
        status, result = "lost", None
    if status != "ok":
        stop_worker()
    return result if status == "ok" else None


def _send(conn: Connection, job: tuple[str, tuple[Any, ...]]) -> None:
    with suppress(Exception):  # a worker that died is met by _take
        conn.send(job)


# --------------------------------------------------------------------------- in the worker
#: In the worker: the dataset it read (:func:`_read_input`), for the evaluation.
_held: list[Any] = []
#: In the worker: the state of its own random stream before the evaluation's part ahead
#: drew from it (:func:`_prepare_evaluation`), for an unseeded run's evaluation.
_stream: list[dict[str, Any]] = []


def _evaluate(
    name: str, run_id: str, files: ReleaseFiles, dataset: Any, params: dict[str, Any], rng: Any
) -> UtilityReport:
    from ehr_release.registry import get as get_algorithm
    from ehr_release.release.verification import as_released

    entry = get_algorithm(name)
    if dataset is None:  # the one this process read (begin_evaluation)
        (dataset,) = _held
    if rng is None:  # an unseeded run: this process's own stream (begin_evaluation)
        rng = _own_stream()
    return entry.evaluate(files, as_released(entry, dataset, run_id), params, rng)


def _own_stream() -> np.random.Generator:
    """A stream in the state the part ahead started from, else a fresh one from entropy."""
    from ehr_release.core.randomness import check_random_state

    rng = check_random_state(None)
    if _stream:
        rng.bit_generator.state = _stream[0]
    return rng


def _certificate(ctx: CertificateContext) -> bytes:
    from ehr_release.documents.certificate import render_certificate_pdf

    return render_certificate_pdf(ctx)


_JOBS: dict[str, Callable[..., Any]] = {EVALUATE: _evaluate, CERTIFICATE: _certificate}


def _serve(conn: Connection, request_path: str) -> None:
    """Read the request's input, import what the jobs need, then do each job the flow
    sends until it hangs up."""
    read, algorithm = _read_input(request_path, given_up=lambda: _flow_gone_on(conn))
    try:
        conn.send(read)
    except (EOFError, OSError):
        return
    if algorithm is not None:
        _preload(algorithm)
        _index_input()
        if read[0] == "ok":
            _prepare_evaluation(read[1][0])
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            return  # the flow is done, or ended before handing anything over
        try:
            result: tuple[str, Any] = ("ok", _JOBS[kind](*payload))
        except Exception:  # noqa: BLE001 - the stage does it in place and raises it there
            result = ("failed", None)
        try:
            conn.send(result)
        except (EOFError, OSError):
            return


def _flow_gone_on(conn: Connection) -> bool:
    """Whether the flow process has ended, or sent a job: either way the request it was
    started for will not be written now (the flow runs only once it is)."""
    parent = multiprocessing.parent_process()
    if parent is not None and not parent.is_alive():
        return True
    try:
        return conn.poll(0)
    except (EOFError, OSError):
        return True


def _read_input(request_path: str, given_up: Callable[[], bool] = lambda: False
                ) -> tuple[tuple[str, Any], str | None]:
    """The request at ``request_path`` with its dataset and fingerprint (as
    :func:`ehr_release.planning.plan.make_plan` reads them), and the request's algorithm.
    The request may not be written yet (the CLI starts the flow process first): it is
    waited for until ``given_up()``."""
    from ehr_release.planning.request import ReleaseRequest
    from ehr_release.storage.run_folder import wait_for_request

    if not wait_for_request(Path(request_path), given_up=given_up):
        return ("failed", None), None
    try:
        request = ReleaseRequest.model_validate_json(Path(request_path).read_text())
    except Exception:  # noqa: BLE001 - the flow reads the request itself and reports it
        return ("failed", None), None
    try:
        from ehr_release.planning.intake import load_request_dataset

        dataset = load_request_dataset(request)
        _held[:] = [dataset]
        return ("ok", (request, dataset, dataset.fingerprint())), request.algorithm
    except Exception:  # noqa: BLE001 - the flow reads the input itself and reports it
        return ("failed", None), request.algorithm


def _index_input() -> None:
    """What an evaluation derives from the input first, derived while the flow still
    anonymizes: the code system's hierarchy (cached per process) and the records' code sets
    (cached on the dataset; a family whose release renames patients evaluates a renamed
    copy, which derives its own), 0.2-0.3 s of a 58,302-record disassociation evaluation."""
    with suppress(Exception):
        from ehr_release.model.hierarchy import code_hierarchy

        (dataset,) = _held
        dataset.code_sets()
        code_hierarchy(dataset.code_system)


def _prepare_evaluation(request: ReleaseRequest) -> None:
    """What the request's evaluation derives from the input, parameters and random stream
    alone (the entry's ``prepare_evaluation``: a disassociation's comparator and workloads),
    derived while the flow still anonymizes; kept for an evaluation of the dataset this
    process read, which :func:`_evaluate` then runs on. The parameters are parsed as the
    flow parses them, and the stream is the run's: the seeded one the flow will send, or
    for an unseeded run one drawn here from OS entropy (kept, :func:`_own_stream`)."""
    with suppress(Exception):
        from ehr_release.planning.plan import run_stream
        from ehr_release.registry import get as get_algorithm
        from ehr_release.release.verification import as_released

        entry = get_algorithm(request.algorithm)
        if entry.prepare_evaluation is None:
            return
        (dataset,) = _held
        params = entry.parse(request.params)
        rng = run_stream(params)
        _stream[:] = [rng.bit_generator.state]
        entry.prepare_evaluation(as_released(entry, dataset, request.run_id), params, rng)


def _preload(algorithm: str) -> None:
    """What the jobs import at their first call: the evaluation's module and the chart
    library first (the evaluation comes first), then the certificate's renderer."""
    with suppress(Exception):
        importlib.import_module("ehr_release.utility.plotting")
    with suppress(Exception):
        from ehr_release.registry import get as get_algorithm

        module = getattr(get_algorithm(algorithm).evaluate, "lazy_module", None)
        if isinstance(module, str):
            importlib.import_module(module)
    for name in ("weasyprint", "ehr_release.documents.certificate"):
        with suppress(Exception):
            importlib.import_module(name)
