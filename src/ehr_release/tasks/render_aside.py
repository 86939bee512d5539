"""The final certificate of a publication, rendered on the second CPU.

``approve`` spends its time in two stretches of about equal length that need not wait for
each other (issue 37 goal 3; ``bench/approve.py``): loading Prefect and starting the
publishing flow, and rendering the final certificate and datasheet (WeasyPrint). So when a
publication starts, a process is spawned (:func:`start_renderer`) that imports WeasyPrint
and the certificate's modules while this process loads Prefect; once the flow has built
the certificate's context, the process renders the certificate (:func:`begin`) while this
one renders the datasheet, and the publication takes the PDF (:func:`take`).

The job is a pure function of what it is sent (the same context, the same bytes; the
release flow's certificate is rendered the same way, :mod:`ehr_release.tasks.aside`), and
nothing is published on its strength alone: every check of the publication runs before the
context is built. Should the process be missing, gone, or fail the job, the certificate is
rendered in place as before. It is spawned, never forked (the caller may run Prefect's
threads, see :mod:`ehr_release.runtime.workers`), daemonic, and ends after one job or when this
process hangs up.
"""

from __future__ import annotations

import multiprocessing
from contextlib import suppress
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ehr_release.documents.certificate import CertificateContext

#: The renderer of this process: (process, pipe, run id of the job handed over or None).
_renderer: list[Any] = []


def start_renderer() -> bool:
    """Spawn the renderer unless one runs already or this process may use one CPU only, or
    may not start children (a daemonic worker), or no CPU is free now. True if one is
    running.

    The last as for the release flow's second process (:func:`ehr_release.tasks.aside.
    _cpu_free`): a second process pays for itself only on a free CPU; on a busy machine its
    own imports only add to the work (``bench/approve.py`` at load 13–20: 57–67 s against
    44–46 s without it)."""
    from ehr_release.runtime.cpus import usable_cpus
    from ehr_release.tasks import aside

    if _renderer:
        return True
    if (usable_cpus() < 2 or multiprocessing.current_process().daemon
            or not aside._cpu_free()):
        return False
    context = multiprocessing.get_context("spawn")
    here, there = context.Pipe()
    process = context.Process(target=_serve, args=(there,), daemon=True,
                              name="publish-render")
    process.start()
    there.close()
    _renderer[:] = [process, here, None]
    return True


def begin(run_id: str, ctx: CertificateContext) -> bool:
    """Hand the renderer the final certificate of ``run_id``; True if it took it."""
    if not _renderer or _renderer[2] is not None or not _renderer[0].is_alive():
        return False
    try:
        _renderer[1].send(ctx)
    except (OSError, ValueError):
        stop_renderer()
        return False
    _renderer[2] = run_id
    return True


def take(run_id: str) -> bytes | None:
    """The certificate rendered for ``run_id``, or None (render it in place). The renderer
    ends either way: it serves one publication."""
    if not _renderer or _renderer[2] != run_id:
        return None
    try:
        status, pdf = _renderer[1].recv()
    except (EOFError, OSError):
        status, pdf = "lost", None
    stop_renderer()
    return pdf if status == "ok" and isinstance(pdf, bytes) else None


def stop_renderer() -> None:
    """End the renderer, whatever it is doing."""
    if not _renderer:
        return
    process, conn, _ = _renderer
    _renderer.clear()
    with suppress(Exception):
        conn.close()
    with suppress(Exception):
        process.terminate()
        process.join(timeout=5)


def _serve(conn: Connection) -> None:
    """Import the renderer's modules, then render the one certificate it is sent."""
    with suppress(Exception):
        import weasyprint  # noqa: F401 - the point: loaded while the flow starts

        import ehr_release.documents.certificate  # noqa: F401
    try:
        ctx = conn.recv()
    except (EOFError, OSError):
        return  # the publication ended (or failed a check) before it needed the PDF
    try:
        from ehr_release.documents.certificate import render_certificate_pdf

        result: tuple[str, Any] = ("ok", render_certificate_pdf(ctx))
    except Exception:  # noqa: BLE001 - the publication renders it in place and raises there
        result = ("failed", None)
    with suppress(EOFError, OSError):
        conn.send(result)
