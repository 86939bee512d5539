"""Progress on stderr while ``run`` and ``compare`` work, so a long command is never silent.

On a terminal the display is live (Rich: a spinner and a running clock for the current
stage, each finished stage with its time). Anywhere else — a pipe, a log file, CI — every
step is one plain line, so logs record progress too. stdout is never touched: scripts read
the run id or folder from its last line.

Only stage names, counts, algorithm labels and losses are shown — never a patient value.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import cached_property
from typing import TYPE_CHECKING

from ehr_release.storage.runs import Status

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from ehr_release.comparison.compare import Outcome

#: A release run's stages in order: the status that ends each one, and what it is called.
STAGES: tuple[tuple[Status, str], ...] = (
    (Status.REQUESTED, "ingest"),
    (Status.ANONYMIZED, "anonymize"),
    (Status.VERIFIED, "verify + attack audit"),
    (Status.EVALUATED, "evaluate utility"),
    (Status.CERTIFIED, "certify"),
    (Status.AWAITING_APPROVAL, "park for review"),
)
_ORDER = {status: i for i, (status, _) in enumerate(STAGES)}


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _spinner(console: Console, *columns: object) -> Progress:
    """A started transient Rich display: a spinner, ``columns``, the time elapsed."""
    from rich.progress import Progress, SpinnerColumn, TimeElapsedColumn

    progress = Progress(SpinnerColumn(), *columns, TimeElapsedColumn(), console=console,
                        transient=True)
    progress.start()
    return progress


class _Display:
    """Live Rich output on a terminal, plain lines elsewhere (``live`` forces either)."""

    def __init__(self, live: bool | None, clock: Callable[[], float],
                 started: float | None = None) -> None:
        self._live = live
        self.clock = clock
        self.started = clock() if started is None else started
        self.progress: Progress | None = None

    # Rich loads when something is first shown, not before: ``approve`` refuses a decision
    # before its first step, in the time it takes to ask the database (issue 37 goal 3).
    @cached_property
    def console(self) -> Console:
        return _stderr_console()

    @cached_property
    def live(self) -> bool:
        return self.console.is_terminal if self._live is None else self._live

    @cached_property
    def marks(self) -> tuple[str, str, str]:
        """Done, stopped, none. Plain lines stay ASCII: a log file or a non-UTF-8 terminal
        must take them."""
        return ("✓", "✗", "–") if self.live else ("ok", "!!", "-")

    @property
    def ok(self) -> str:
        return self.marks[0]

    @property
    def no(self) -> str:
        return self.marks[1]

    @property
    def dash(self) -> str:
        return self.marks[2]

    def line(self, text: str) -> None:
        """One finished step: printed above the live display, or as a plain line."""
        if self.progress is not None:
            from rich.text import Text

            self.progress.console.print(Text(text), soft_wrap=True)  # the terminal wraps
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def __enter__(self) -> _Display:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StageProgress(_Display):
    """Follows a release run's status: each stage with the time it took.

    Call it with every status the run reaches (``service.wait_for_status(on_status=…)``).
    Statuses polled too late to see one by one (two stages finished within a poll) are
    reported together.
    """

    def __init__(self, run_id: str, *, records: int | None = None, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 started: float | None = None) -> None:
        super().__init__(live, clock, started)
        self.run_id = run_id
        self.records = records
        self.done = 0  # stages finished so far
        self.stage_started = self.started
        self.task: TaskID | None = None
        if self.live:
            from rich.progress import TextColumn

            self.progress = _spinner(self.console, TextColumn("{task.description}"))
        self.line(f"run {run_id}")

    def _label(self, index: int) -> str:
        name = STAGES[index][1]
        if index == 0 and self.records is not None:
            return f"{name} ({self.records:,} records)"
        return name

    def _start_next(self) -> None:
        if self.progress is not None and self.done < len(STAGES):
            self.task = self.progress.add_task(self._label(self.done) + " ...")

    def __call__(self, status: Status) -> None:
        now = self.clock()
        if status in _ORDER and _ORDER[status] >= self.done:
            self._finish_through(_ORDER[status], f"{now - self.stage_started:7.1f} s "
                                                 f"(total {now - self.started:.1f} s)", now)
        elif status not in _ORDER:
            self._finish_task()
            self.line(f"  {self.no} {status.value} after {now - self.started:.1f} s")

    def resumed_from(self, status: Status) -> None:
        """A resumed run: the stages up to ``status`` finished before this command started.

        They are listed as done earlier (no time: it was not spent here); the next stage
        starts the clock.
        """
        if status in _ORDER and _ORDER[status] >= self.done:
            self._finish_through(_ORDER[status], "(done before)", self.clock())

    def _finish_through(self, last: int, timing: str, now: float) -> None:
        """Stages up to ``last`` are done: one line naming them, then the next one starts."""
        names = ", ".join(self._label(i) for i in range(self.done, last + 1))
        self._finish_task()
        self.line(f"  {self.ok} {names:<34} {timing}")
        self.done, self.stage_started = last + 1, now
        self._start_next()

    def _finish_task(self) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.remove_task(self.task)
            self.task = None

    @contextmanager
    def step(self, label: str) -> Iterator[None]:
        """A step between stages that has no status of its own (starting the Prefect server).

        Its time is shown on its own line and not counted in the next stage's.
        """
        self._finish_task()
        if self.progress is not None:
            self.task = self.progress.add_task(label + " ...")
        yield
        self._finish_task()
        now = self.clock()
        self.line(f"  {self.ok} {label:<34} {now - self.stage_started:7.1f} s")
        self.stage_started = now
        self._start_next()


class StepProgress(_Display):
    """The steps of one command done in this process (``approve``: the decision, then the
    publishing flow), each with its time: steps are told by
    :func:`ehr_release.tasks.steps.step` while the display listens (inside ``with``).

    Nothing is shown before the first step. On leaving the block the step under way is
    finished — as done, or as stopped when the block raised or :meth:`failed` was called.
    """

    def __init__(self, title: str, *, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(live, clock)
        self.title = title
        self.current: str | None = None
        self.step_started = self.started
        self.task: TaskID | None = None
        self.stopped = False
        self._listening: AbstractContextManager[None] | None = None

    def __call__(self, label: str) -> None:
        now = self.clock()
        if self.current is None and self.live:
            from rich.progress import TextColumn

            self.progress = _spinner(self.console, TextColumn("{task.description}"))
        if self.current is None:
            self.line(self.title)
        self._end_step(self.ok, now)
        self.current, self.step_started = label, now
        if self.progress is not None:
            self.task = self.progress.add_task(label + " ...")

    def failed(self) -> None:
        """The step under way did not succeed (shown as stopped when the display closes)."""
        self.stopped = True

    def _end_step(self, mark: str, now: float) -> None:
        if self.current is None:
            return
        if self.progress is not None and self.task is not None:
            self.progress.remove_task(self.task)
            self.task = None
        self.line(f"  {mark} {self.current:<44} {now - self.step_started:6.1f} s "
                  f"(total {now - self.started:.1f} s)")
        self.current = None

    def __enter__(self) -> StepProgress:
        from ehr_release.tasks.steps import listening

        self._listening = listening(self)
        self._listening.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._listening is not None:
            self._listening.__exit__(None, None, None)
            self._listening = None
        if self.current is not None:  # nothing shown yet (a refusal): Rich never loads
            stopped = self.stopped or exc[0] is not None
            self._end_step(self.no if stopped else self.ok, self.clock())
        self.close()


class CompareProgress(_Display):
    """Each comparison candidate's row as it finishes, and how many are done."""

    HEADER = f"{'DONE':>7}  {'ROW: CANDIDATE':<34} {'VERIFIED':<9} {'LOSS':<18} {'TIME':>7}"

    def __init__(self, total: int, *, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(live, clock)
        self.total = total
        self.task: TaskID | None = None
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn

            self.progress = _spinner(self.console, TextColumn("candidates"), BarColumn(),
                                     MofNCompleteColumn())
            self.task = self.progress.add_task("candidates", total=total)
        self.line(f"comparing {total} candidate{'s' if total != 1 else ''}")
        self.line(self.HEADER)

    def __call__(self, outcome: Outcome, done: int, total: int) -> None:
        verdict = ("yes" if outcome.verified
                   else "error" if outcome.error else "no")
        loss = (self.dash if outcome.loss is None
                else f"{outcome.loss_metric} {outcome.loss:.4g}")
        row = f"{outcome.candidate.index}: {outcome.candidate.label}"  # the report's row
        self.line(f"{f'{done}/{total}':>7}  {row:<34} {verdict:<9} "
                  f"{loss:<18} {self.elapsed():6.1f}s")
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, completed=done)
