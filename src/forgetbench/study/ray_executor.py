"""`--executor ray`: the study's jobs (models, evaluations, sweep trials) as Ray tasks, behind the
same `submit(function, *args) -> Future` interface as the local process pool (study/pool.py), so
the code that submits them and gathers their results is the same.

One job is one task that declares its resources (`--cpus-per-trial`, `--gpus-per-trial`). Every
output goes to the run folder the driver names (a shared file system on a multi-machine cluster),
exactly as with the process pool. A task whose worker process dies is retried by Ray
(`max_retries`); the retried job enters the same stage folder, whose lock the dead process no
longer holds, and the unlearning engine resumes from the last checkpoint there."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from forgetbench.errors import ConfigError

# Ray's own default for tasks; kept explicit because resuming a killed trial depends on it.
MAX_RETRIES = 3


def _call(plugins: tuple[str, ...], function: Any, *args: Any) -> Any:
    # Like the process pool's initializer: one torch thread per declared CPU, no loading bars,
    # the driver's method plugins (their files on the shared file system).
    import os

    import torch

    from forgetbench.methods.plugins import load_plugins
    from forgetbench.study.pool import quiet_transformers

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    quiet_transformers()
    load_plugins(plugins, source="the study's plugins")
    return function(*args)


class RayPool:
    """Jobs as Ray tasks on the cluster at `address`, or on a local Ray started here with
    `workers` CPUs (and stopped at `shutdown`)."""

    def __init__(
        self, *, address: str | None, workers: int, cpus: float = 1.0, gpus: float = 0.0
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError(
                "--executor ray needs Ray, which is not installed",
                "pip install 'forgetbench[ray]'",
            ) from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            import os

            # Workers run this interpreter's forgetbench: the driver's import path goes along.
            env = {k: v for k in ("PYTHONPATH",) if (v := os.environ.get(k))}
            env["OMP_NUM_THREADS"] = str(max(1, int(cpus)))
            kwargs: dict[str, Any] = {"runtime_env": {"env_vars": env}}
            if address is None:
                kwargs.update(num_cpus=workers, num_gpus=0 if not gpus else None)
            else:
                kwargs["address"] = address
            ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
        total = ray.cluster_resources().get("CPU", 1)
        self.workers = max(1, int(total // max(cpus, 1e-9)))
        self._remote = ray.remote(_call).options(
            num_cpus=cpus, num_gpus=gpus, max_retries=MAX_RETRIES
        )

    def submit(self, function: Any, *args: Any) -> Future:
        from forgetbench.methods.plugins import loaded_plugins

        return self._remote.remote(loaded_plugins(), function, *args).future()

    def shutdown(self, **_: Any) -> None:
        if self._started:
            self._ray.shutdown()
