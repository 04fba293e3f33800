"""The two commands that are not the typed API: report (the Python package moesim_report, called
in this process) and engine (the moesim-engine binary, run as a child process: the simulator and
the engine never link each other, docs/architecture.md). Both raise the module's exceptions with
the file and reason, as the other functions do.
"""

import os
import re
import shutil
import subprocess
import sys

from . import checks as ck
from .errors import ConfigError, EngineError, OutputError, UsageError

try:  # where the build put moesim-engine and the report package (python/CMakeLists.txt)
    from . import _build
except ImportError:  # pragma: no cover - an install without the generated file
    _build = None


def _report_package():
    try:
        import moesim_report
    except ImportError:
        where = getattr(_build, "REPORT_DIR", None)
        if not where or not os.path.isdir(os.path.join(where, "moesim_report")):
            raise UsageError("cannot import moesim_report (put the repository's python/ on "
                             "PYTHONPATH)", reason="cannot import moesim_report") from None
        sys.path.append(where)
        import moesim_report
    return moesim_report


def report(input, out, *, gpu_price_per_hour=None, title=None):
    """`moesim report INPUT --out OUT`: one self-contained HTML page of a run directory, a sweep
    CSV or a search JSON (docs/report.md), written atomically to `out`. Returns {"kind": "run" |
    "sweep" | "search", "out": out, "bytes": its size}. Bad input (an input that is not a moesim
    output, or one of whose files holds a value of the wrong type or range) raises ConfigError
    with file, line, key_path (the CSV column or JSON key) and reason; a page that cannot be
    written, OutputError."""
    path = ck.path("input", input, required=True)
    out = ck.path("out", out, required=True)
    price = ck.number("gpu_price_per_hour", gpu_price_per_hour)
    if price is not None and not price > 0:
        raise ck.usage("gpu_price_per_hour", f"must be > 0, got {price}")
    title = ck.text("title", title)
    mr = _report_package()
    try:
        kind, size = mr.write_report(path, out, gpu_price_per_hour=price, title=title)
    except mr.BadInput as e:
        raise ConfigError(str(e), file=e.file, key_path=e.key, reason=e.reason,
                          line=e.line) from None
    except mr.WriteError as e:
        raise OutputError(f"cannot write {out}: {e.strerror}", file=out,
                          reason=f"cannot write {out}: {e.strerror}") from None
    except OSError as e:  # reading the input
        raise ck.bad_file(e.filename or path, e.strerror or str(e)) from None
    return {"kind": kind, "out": out, "bytes": size}


def engine_path():
    """moesim-engine as `moesim engine` finds it: $MOESIM_ENGINE, then the build tree's (where
    this module was built), then the first on PATH; UsageError naming what was tried."""
    env = os.environ.get("MOESIM_ENGINE")
    candidates = [env] if env else [getattr(_build, "ENGINE", None), "moesim-engine"]
    tried = []
    for c in candidates:
        if not c:
            continue
        found = shutil.which(c) if os.sep not in c else (c if os.access(c, os.X_OK) else None)
        if found:
            return found
        tried.append(c)
    raise UsageError("cannot run moesim-engine (build the moesim-engine target, or set "
                     "MOESIM_ENGINE to its path); tried: " + ", ".join(tried),
                     reason="cannot run moesim-engine")


def _arg(i, a):
    if isinstance(a, bool):
        raise ck.usage(f"args[{i}]", f"want a string, path or number, got {a!r}")
    if isinstance(a, int):
        return str(ck.integer(f"args[{i}]", a))
    if isinstance(a, float):
        return repr(ck.number(f"args[{i}]", a))
    if isinstance(a, str):
        return ck.text(f"args[{i}]", a)
    return ck.path(f"args[{i}]", a)


# The engine's error line: "moesim-engine: error: FILE:LINE: FIELD: reason" for a bad trace,
# "moesim-engine: error: REASON" or "moesim-engine: REASON (see moesim-engine --help)" else.
_LOCATED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?:(?P<key>[^:\s]+): )?(?P<reason>.*)$")


def _error_line(stderr):
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def engine(*args, timeout_s=None):
    """`moesim engine ARGS...` (= `moesim-engine ARGS...`, docs/engine.md): e.g.
    engine("replay", "steps.jsonl", "--out", "meas.jsonl", "--backend", "cpu"). Returns what
    the engine printed on stdout; what it printed on stderr goes to sys.stderr. Exit code 2
    raises ConfigError (a bad trace: file, line, key_path and reason) or UsageError (a bad
    option), 1 raises EngineError (a run-time failure), as does a signal or timeout_s."""
    argv = [engine_path()] + [_arg(i, a) for i, a in enumerate(args)]
    timeout_s = ck.number("timeout_s", timeout_s)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                           timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise EngineError(f"moesim-engine: did not finish in {timeout_s:g} s", exit_code=-9,
                          stderr="") from None
    except OSError as e:
        raise UsageError(f"cannot run {argv[0]}: {e.strerror}",
                         reason=f"cannot run {argv[0]}: {e.strerror}") from None
    if r.returncode == 0:
        if r.stderr:
            sys.stderr.write(r.stderr)
        return r.stdout
    line = _error_line(r.stderr)
    if r.returncode == 2:
        message = re.sub(r"^moesim-engine: (error: )?", "", line)
        m = _LOCATED.match(message)
        if m and os.path.exists(m.group("file")):
            raise ConfigError(message, file=m.group("file"), key_path=m.group("key") or "",
                              reason=m.group("reason"), line=int(m.group("line")))
        for a in argv[1:]:  # "FILE: reason" about a file given as an argument
            if not a.startswith("-") and message.startswith(a + ": "):
                raise ConfigError(message, file=a, reason=message[len(a) + 2:])
        raise UsageError(message, reason=message)
    if r.returncode < 0:
        raise EngineError(f"moesim-engine: killed by signal {-r.returncode}" +
                          (f" ({line})" if line else ""), exit_code=r.returncode, stderr=r.stderr)
    raise EngineError(line or f"moesim-engine: exit code {r.returncode}", exit_code=r.returncode,
                      stderr=r.stderr)
