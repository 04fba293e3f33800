"""Checks of the Python arguments of moesim's functions before they reach the compiled module.

pybind11 converts arguments by type: an int beyond 64 bits, a str where a number belongs or a
float where an int belongs fails as a TypeError that lists the whole signature, and a NaN or an
infinity passes into C++ where a range check may not expect it. So every argument is checked
here first, as the command line checks its options: the type, integers in the 64-bit range,
floats finite, sequences of the right items; a bad one raises UsageError naming the argument
and the reason. The ranges of each option (seed >= 0, confidence in (0, 1), ...) stay the typed
API's own checks (sim/api), which give the command line's messages.
"""

import math
import numbers
import os

from .errors import ConfigError, UsageError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def usage(name, reason):
    message = f"{name}: {reason}" if name else reason
    return UsageError(message, reason=message)


def _shown(v):
    text = repr(v)
    return text if len(text) <= 60 else text[:60] + "..."


def integer(name, v, lo=INT64_MIN, hi=INT64_MAX):
    """v as an int (None stays None): a Python or numpy integer, not a bool, in [lo, hi]."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise usage(name, f"want an integer, got {type(v).__name__} {_shown(v)}")
    v = int(v)
    if not INT64_MIN <= v <= INT64_MAX:
        raise usage(name, f"{v} is beyond the 64-bit integer range [-2^63, 2^63 - 1]")
    if v < lo:
        raise usage(name, f"must be >= {lo}, got {v}")
    if v > hi:
        raise usage(name, f"must be <= {hi}, got {v}")
    return v


def number(name, v):
    """v as a finite float (None stays None): an int or a float, not a bool, not NaN or inf."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise usage(name, f"want a number, got {type(v).__name__} {_shown(v)}")
    try:
        f = float(v)
    except OverflowError:
        raise usage(name, f"{v} is beyond double's range") from None
    if not math.isfinite(f):
        raise usage(name, f"{f} is not a finite number")
    return f


def text(name, v):
    """v as a str (None stays None)."""
    if v is None:
        return None
    if not isinstance(v, str):
        raise usage(name, f"want a string, got {type(v).__name__} {_shown(v)}")
    _utf8(name, v)
    return v


def flag(name, v):
    if not isinstance(v, bool):
        raise usage(name, f"want True or False, got {type(v).__name__} {_shown(v)}")
    return v


def _utf8(name, s):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise usage(name, f"{_shown(s)} is not valid Unicode text") from None


def path(name, v, required=False):
    """A path (str or os.PathLike) as a str; None stays None unless `required`."""
    if v is None:
        if required:
            raise usage(name, "missing: want a file path")
        return None
    if not isinstance(v, (str, os.PathLike)):
        raise usage(name, f"want a file path (str or os.PathLike), got {type(v).__name__} "
                    f"{_shown(v)}")
    p = os.fspath(v)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not p:
        raise usage(name, "an empty path")
    if "\0" in p:
        raise usage(name, f"{_shown(p)} holds a NUL character")
    _utf8(name, p)
    return p


def paths(name, v, required=False):
    """One path or an iterable of paths, as a list of str."""
    if v is None:
        if required:
            raise usage(name, "missing: want a file path or a list of them")
        return []
    if isinstance(v, (str, os.PathLike)):
        return [path(name, v)]
    if not _iterable(v):
        raise usage(name, f"want a file path or a list of them, got {type(v).__name__} "
                    f"{_shown(v)}")
    return [path(f"{name}[{i}]", p, required=True) for i, p in enumerate(v)]


def _iterable(v):
    if isinstance(v, (str, bytes, dict)):
        return False
    try:
        iter(v)
    except TypeError:
        return False
    return True


def integers(name, v, lo=INT64_MIN):
    """A list or tuple of integers (None stays None)."""
    if v is None:
        return None
    if not _iterable(v):
        raise usage(name, f"want a list of integers, got {type(v).__name__} {_shown(v)}")
    return [integer(f"{name}[{i}]", x, lo=lo) for i, x in enumerate(v)]


def numbers_(name, v):
    """A list or tuple of finite numbers (None stays None)."""
    if v is None:
        return None
    if not _iterable(v):
        raise usage(name, f"want a list of numbers, got {type(v).__name__} {_shown(v)}")
    return [number(f"{name}[{i}]", x) for i, x in enumerate(v)]


def window(name, v):
    """(start_s, end_s): two finite numbers (None stays None)."""
    if v is None:
        return None
    items = list(v) if _iterable(v) else None
    if items is None or len(items) != 2:
        raise usage(name, f"want (start_s, end_s), got {_shown(v)}")
    start, end = items
    return (number(f"{name}[0]", start), number(f"{name}[1]", end))


def strings(name, v):
    """One str or an iterable of them, as a list."""
    if v is None:
        return []
    if isinstance(v, str):
        return [text(name, v)]
    if not _iterable(v):
        raise usage(name, f"want a string or a list of them, got {type(v).__name__} {_shown(v)}")
    return [text(f"{name}[{i}]", x) for i, x in enumerate(v)]


def bad_file(file, reason, line=0, key_path=""):
    """ConfigError naming a file (and a line, key), as the readers of sim/ raise it."""
    where = f"{file}:{line}" if line else file
    message = f"{where}: {key_path}: {reason}" if key_path else f"{where}: {reason}"
    return ConfigError(message, file=file, key_path=key_path, reason=reason, line=line)
