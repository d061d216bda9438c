"""The evaluation tasks, registered by name in `TASKS` (each module registers its factory).

Adding one: a module here with a class holding `name`, `subsets`, `requests`, `process` and
`results` (`forgetbench.eval.tasks.task.Task`) and a factory registered with
`@TASKS.register("name")` that returns it, or None where it does not apply; imported below, and
named in `forgetbench.eval.runner.TASK_ORDER`. Its metrics go in `forgetbench.metrics.METRICS`.
"""

from forgetbench.eval.tasks import (  # noqa: F401  (registration)
    formats,
    lume,
    mia,
    muse,
    probes,
    rwku,
    tofu,
    wmdp,
)
from forgetbench.eval.tasks.task import TASKS, EvalSetup, Task, TaskResult, run_task

__all__ = ["TASKS", "EvalSetup", "Task", "TaskResult", "run_task"]
