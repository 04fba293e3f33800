"""moesim: a deterministic simulator of Mixture-of-Experts inference clusters, from Python.

    import moesim
    r = moesim.run("scenarios/quickstart.toml", {"deployment.replicas": 2}, seed=7)
    r.summary["ttft_ms"]["p99"], r.requests.head(), r.steps.head()

Functions: run, model_show, topo_show, collective, compare, sweep, sweep_merge, sweep_plan,
search, layers, prune, calibrate, validate, derive_profile (docs/python.md), each on the
simulator's typed API (sim/api.h). Bad input raises ConfigError (a ValueError) with file, line,
key_path and reason.
"""

from ._moesim import version as __version__
from .api import (RunResult, calibrate, collective, compare, derive_profile, layers, model_show,
                  prune, run, search, steps_table, sweep, sweep_merge, sweep_plan, topo_show,
                  validate)
from .command import command
from .errors import ConfigError, OutputError, UsageError

__all__ = ["__version__", "ConfigError", "UsageError", "OutputError", "RunResult", "run",
           "model_show", "topo_show", "collective", "compare", "sweep", "sweep_merge",
           "sweep_plan", "search", "layers", "prune", "calibrate", "validate", "derive_profile",
           "steps_table", "command"]
