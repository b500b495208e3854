"""What a stage's task generator is given: the command's context, as an interface.

pipeline.Context is the one implementation; the stages name this Protocol instead, so that no
stage imports the pipeline that imports the stages. The two rules an earlier stage needs of a
later one (``agent_finished`` for the workspace, ``workspace_diff`` for the agent) come through it.
"""

from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core.layout import Layout
from ..core.records import LeftOut, Selection, SkippedFile, StandinsView, SweEnvView, TestsTree
from .benchmark import AnyTask, Benchmark, Task
from .modes import AgentMode, Mode
from .options import Options

if TYPE_CHECKING:
    from .swebench import SweTask


class StageContext(Protocol):
    layout: Layout
    benchmark: Benchmark
    tasks: list[AnyTask]
    modes: dict[str, Mode]
    options: Options
    selection: Selection | None
    group: tuple[str, ...] | None
    benchmark_names: tuple[str, ...]
    shadow: dict[str, list[str]] | None

    def agent_finished(
        self, layout: Layout, mode: AgentMode, task: AnyTask, agent_task_name: str
    ) -> bool: ...

    def unit_agent_inputs(self, mode: AgentMode, task: AnyTask) -> tuple[list[str], str | None]: ...

    def tests_tree(self, layout: Layout, task: AnyTask) -> TestsTree | None: ...

    def swe_env(self, task: AnyTask) -> SweEnvView | None: ...

    def swe_env_pending(self, task: AnyTask) -> tuple[str, dict[str, str]] | None: ...

    @staticmethod
    def swe_env_at_run(task: "SweTask", layout: Layout) -> SweEnvView | str: ...

    @staticmethod
    def swe_services(
        layout: Layout, task: "SweTask", directory: Path, workspace: Path, log: Path
    ) -> AbstractContextManager[StandinsView | None]: ...

    @staticmethod
    def workspace_diff(
        bare: str | Path, workspace: str | Path, base: str, kind: str = ...
    ) -> tuple[bytes, list[SkippedFile], list[LeftOut]]: ...

    def nginx_tasks(self) -> list[Task]: ...

    def mode_list(self) -> list[Mode]: ...

    def group_mode_list(self) -> list[Mode]: ...

    def in_group(self, name: str) -> bool: ...

    def mode_tasks(self, mode: Mode) -> list[AnyTask]: ...

    def units(self) -> Iterator[tuple[Benchmark, Mode, AnyTask]]: ...

    def nginx_units(self) -> Iterator[tuple[Benchmark, Mode, Task]]: ...

    def agent_units(self) -> Iterator[tuple[Benchmark, AgentMode, AnyTask]]: ...

    def build_order(self) -> list[Task]: ...

    def base_build_plan(self) -> list[tuple[str, Task, str | None]]: ...

    def mode_groups(self) -> Iterator[tuple[Benchmark, Mode, list[AnyTask]]]: ...

    def start_order(self, bench: Benchmark, mode: Mode, ids: Collection[str]) -> list[str]: ...
