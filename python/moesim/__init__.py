"""moesim: a deterministic simulator of Mixture-of-Experts inference clusters, from Python.

    import moesim
    r = moesim.run("scenarios/quickstart.toml", {"deployment.replicas": 2}, seed=7)
    r.summary["ttft_ms"]["p99"], r.requests.head(), r.steps.head()

Functions: run, model_show, topo_show, collective, compare, sweep, search (docs/python.md).
Bad input raises ConfigError (a ValueError) with file, key_path and reason.
"""

from ._moesim import version as __version__
from .api import (RunResult, collective, command, compare, model_show, run, search, steps_table,
                  sweep, topo_show)
from .errors import ConfigError, OutputError, UsageError

__all__ = ["__version__", "ConfigError", "UsageError", "OutputError", "RunResult", "run",
           "model_show", "topo_show", "collective", "compare", "sweep", "search", "steps_table", "command"]
