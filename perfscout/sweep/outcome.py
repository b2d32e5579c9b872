"""What a sweep session reports, and what an executor needs from the driver that runs it.

Its own module so that the executors (the local loop in :mod:`.runner`, :mod:`.dask_executor`)
and the driver depend on it rather than on each other: the runner hands pending tasks to an
executor, the executor stores results through the driver's :class:`SweepDriver` methods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from perfscout.state.records import CompressionResult
    from perfscout.sweep.spec import SweepSpec, SweepTask
    from perfscout.tools.results_store import ResultStore


@dataclass
class SweepOutcome:
    run_dir: Path
    run_id: str
    session: int
    total: int
    already_done: int
    ran: int
    statuses: dict[str, int] = field(default_factory=dict)
    executor: str = "local"
    dashboard: str = ""
    #: How the session shared the cores: jobs, codec threads per task, and any scaling note.
    scheduling: dict[str, Any] = field(default_factory=dict)

    def count(self, status: str) -> None:
        self.ran += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1


class SweepDriver(Protocol):
    """The driver of one session as an executor sees it (``SweepRunner`` is the one)."""

    spec: SweepSpec
    jobs: int
    run_id: str
    platform_id: str
    console: Console
    dask: Any

    @property
    def stopping(self) -> bool: ...  # Ctrl-C / SIGTERM asked the session to stop

    def task_dir(self, task: SweepTask) -> Path: ...

    def run_meta(self) -> dict[str, str]: ...

    def progress(self) -> Progress: ...

    def store_result(self, store: ResultStore, record: CompressionResult, attempt_id: int | None, tag: str,
                     outcome: SweepOutcome) -> None: ...
