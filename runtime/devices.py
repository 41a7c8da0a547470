"""Which GPUs a job's process uses: a decision table (pure) and the thin layer that applies it.

Why: TensorFlow's default is to place work on the first GPU a process sees and to reserve
nearly all the memory of every GPU it sees when it first runs an op. In a pod that is right:
Kubernetes gave the pod its GPUs (`--worker_resource_request gpu=1`), and they are its own. In a
local job every process sees every GPU of the machine: the master's model check, each parameter
server and each worker would reserve the first GPU's memory, so the first to start would take
it and the others fail out of memory, and on a machine of several GPUs every worker would train
on GPU 0.

| role | local job | GPUs |
|---|---|---|
| master, elasticdl's own process | either | none (1) |
| master, in the user's program | yes | all it sees, memory as needed (2) |
| parameter server | yes | none (3) |
| worker | yes | GPU `worker_id mod n`, memory as needed (4) |
| any | no | TensorFlow's default: the pod's GPUs are its own |

(1) It builds, checks and exports the model; it never trains. (2) They are the user's GPUs:
not hidden, but not reserved whole either. (3) It applies updates to values that arrive and
leave as host bytes: on a GPU each push would cross PCIe both ways, and the memory is the
workers'. (4) Workers beyond n share a GPU.

A process that sees no GPU has nothing to decide. The plan must be applied before the process
runs its first TensorFlow op; where that has happened (a user's program that used TensorFlow
before `elasticdl.train`), the process keeps its devices and a warning says what that means.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("elasticdl.devices")

LOCAL_JOB_FLAG = "--local_job"
LOCAL_JOB_HELP = "a local job's process: the job's processes share this machine's GPUs"
"""The flag a local job gives its parameter servers and workers (`local` below); pods go
without it."""
GROWTH_ENV = "TF_FORCE_GPU_ALLOW_GROWTH"
"""TensorFlow's switch for GPU memory taken as needed (its GPU guide), read when it sets up its
GPUs: a user's own value is left as it is."""


class ProcessRole(enum.Enum):
    MASTER = "master"  # elasticdl's own process (the command, a pod's master)
    MASTER_IN_PROGRAM = "master in the user's program"
    PS = "parameter server"
    WORKER = "worker"


@dataclass(frozen=True)
class DevicePlan:
    """`visible`: indexes of the GPUs (as the process sees them) it may use, None for all;
    `memory_growth`: take GPU memory as needed instead of reserving it all at the first op."""

    visible: tuple[int, ...] | None = None
    memory_growth: bool = False


TENSORFLOW_DEFAULT = DevicePlan()


def device_plan(role: ProcessRole, gpus: int, local: bool, worker_id: int = 0) -> DevicePlan:
    """The plan of a process of `role` that sees `gpus` GPUs (see the module's table)."""
    if gpus <= 0:
        return TENSORFLOW_DEFAULT
    if role is ProcessRole.MASTER:
        return DevicePlan(visible=())
    if not local:
        return TENSORFLOW_DEFAULT
    if role is ProcessRole.PS:
        return DevicePlan(visible=())
    if role is ProcessRole.WORKER:
        return DevicePlan(visible=(worker_id % gpus,), memory_growth=True)
    return DevicePlan(memory_growth=True)


def apply_plan(plan: DevicePlan, gpus: list[Any], config: Any, role: ProcessRole) -> bool:
    """Apply `plan` to a process that sees `gpus` (physical devices) through `config`
    (`tf.config`); False, with a warning, when its devices were initialized already."""
    if plan == TENSORFLOW_DEFAULT:
        return True
    chosen = gpus if plan.visible is None else [gpus[i] for i in plan.visible]
    try:
        if plan.visible is not None:
            config.set_visible_devices(chosen, "GPU")
        if plan.memory_growth:
            for gpu in chosen:
                config.experimental.set_memory_growth(gpu, True)
    except RuntimeError as error:  # TensorFlow initialized them: they cannot change now
        log.warning(
            "the %s keeps TensorFlow's GPU settings (%s): it ran TensorFlow before the job; "
            "the job's workers may find no GPU memory free (call "
            "tf.config.experimental.set_memory_growth on your GPUs first)",
            role.value,
            str(error).strip().splitlines()[0] if str(error).strip() else "initialized",
        )
        return False
    if chosen:
        log.info("%s: GPU %s, memory as needed", role.value, [g.name for g in chosen])
    return True


def use_devices(role: ProcessRole, local: bool, worker_id: int = 0) -> bool:
    """Decide and apply this process's GPUs (imports TensorFlow); see `apply_plan`."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return apply_plan(device_plan(role, len(gpus), local, worker_id), gpus, tf.config, role)


@contextlib.contextmanager
def master_devices(local: bool, own_process: bool) -> Iterator[None]:
    """A job's master's GPUs, for as long as it runs; entered before it runs any TensorFlow
    op (its model checks build the model, and the Keras probe may).

    elasticdl's own process (the command, a pod; TensorFlow imported already): none. The user's
    program, local job: memory as needed, through TensorFlow's `GROWTH_ENV` while the job runs
    (read when TensorFlow sets its GPUs up, whenever that comes; not imported here, it would fix
    the Keras mode before the job decides it) and, where TensorFlow was imported already,
    through `tf.config` too, which warns when it ran ops on them before the job."""
    if own_process:
        use_devices(ProcessRole.MASTER, local)
        yield
        return
    unset = local and GROWTH_ENV not in os.environ
    if unset:
        os.environ[GROWTH_ENV] = "true"
    try:
        if local and "tensorflow" in sys.modules:
            use_devices(ProcessRole.MASTER_IN_PROGRAM, local)
        yield
    finally:
        if unset:
            os.environ.pop(GROWTH_ENV, None)
