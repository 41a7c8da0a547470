"""Job options that pace the workers of a chaos test with the fault zoo's input functions.

A `workerN:...@tasks=K` trigger counts the tasks worker N finished. On a busy machine one
worker may start seconds after the other and find every task already trained: the chaos
never fires (CI caught it three times). These options make the outcome independent of when
each worker starts.
"""

from __future__ import annotations

from pathlib import Path

FAULT_ZOO = Path(__file__).resolve().parent / "fault_zoo"

SLOW_WORKER0 = {
    "model_zoo": str(FAULT_ZOO),
    "model_def": "faulty.custom_model",
    "dataset_fn": "faulty.slow_worker0",
    "params": "",
}
"""Worker 0 takes 20 ms a record: however late worker 1 starts, it trains the tasks a
`worker1` trigger counts, and the job is still running when worker 1 is replaced."""

PACED_WORKERS = {**SLOW_WORKER0, "dataset_fn": "faulty.slow_workers"}
"""Every worker takes 2 ms a record (a 128-record task 0.26 s): a trigger that needs both
workers to have trained a task fires however far apart they start."""
