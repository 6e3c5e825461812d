"""The run directory: the contract between the recorder and the analyzer.

``RunWriter`` appends step records, events, the skiplist and meta to a run directory,
crash-safe (every record reaches the OS when written) and with TensorBoard scalars written
off the training thread; ``load_run`` reads it back into pandas as far as it is valid.

Example:
    >>> from sentinel.store import RunWriter, load_run
    >>> with RunWriter("logs/run1") as w:  # doctest: +SKIP
    ...     w.write_step({"step": 0, "loss": 2.3})
    >>> load_run("logs/run1").steps.loc[0, "loss"]  # doctest: +SKIP
    2.3
"""

from sentinel.store.reader import Run, load_run
from sentinel.store.skiplist import read_skiplist
from sentinel.store.tb_sink import TensorBoardSinkConfig
from sentinel.store.writer import RunWriter, ensure_run_dir

__all__ = ["Run", "RunWriter", "TensorBoardSinkConfig", "ensure_run_dir", "load_run", "read_skiplist"]
