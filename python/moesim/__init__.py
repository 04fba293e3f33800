"""moesim: a deterministic simulator of Mixture-of-Experts inference clusters, from Python.

    import moesim
    r = moesim.run("scenarios/quickstart.toml", {"deployment.replicas": 2}, seed=7)
    r.summary["ttft_ms"]["p99"], r.requests.head(), r.steps.head()

Functions, one per command of the `moesim` command line (docs/python.md): run, model_show,
topo_show, collective, compare, sweep, sweep_merge, sweep_plan, search, layers, prune,
calibrate, validate, derive_profile, trace_fit (each on the simulator's typed API, sim/api.h),
report (the report package, in process) and engine (moesim-engine, a child process). Bad input
raises ConfigError (a ValueError) with file, line, key_path and reason; a bad argument
UsageError (a ConfigError) naming it.
"""

from ._moesim import version as __version__
from .api import (RunResult, calibrate, collective, compare, derive_profile, layers, model_show,
                  prune, run, search, steps_table, sweep, sweep_merge, sweep_plan, topo_show,
                  trace_fit, validate)
from .command import COMMANDS, command
from .errors import ConfigError, EngineError, OutputError, UsageError
from .external import engine, report

__all__ = ["__version__", "ConfigError", "UsageError", "OutputError", "EngineError", "RunResult",
           "run", "model_show", "topo_show", "collective", "compare", "sweep", "sweep_merge",
           "sweep_plan", "search", "layers", "prune", "calibrate", "validate", "derive_profile",
           "trace_fit", "report", "engine", "steps_table", "command", "COMMANDS"]
