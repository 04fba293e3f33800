"""python3 -m moesim_report INPUT --out REPORT.html [--gpu-price-per-hour USD] [--title TEXT]

Exit codes: 0 written, 1 the page could not be written, 2 bad input (an INPUT that is not a
moesim run directory, sweep CSV or search JSON, or one whose files do not parse or hold a value
of the wrong type or range: one line naming the file, row and column or key; an --out whose
directory does not exist or is not writable, or that is a directory: checked before any work).
An error the checks did not foresee is one line too (exit 1), never a traceback.
The page is written to a temporary file beside --out and renamed over it when complete."""

import argparse
import os
import sys
import traceback

from .inputs import BadInput
from .page import WriteError, write_report


def internal_error(e):
    """An exception the input checks did not foresee, on one line: its type, message and where
    it was raised (a bug of the report, to be reported with the input)."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    text = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {text}{where} (a bug of moesim report: please report it)"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="moesim report")
    ap.add_argument("input")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--gpu-price-per-hour", type=float, default=None)
    ap.add_argument("--title", default=None)
    a = ap.parse_args(argv)
    if a.gpu_price_per_hour is not None and not 0 < a.gpu_price_per_hour < float("inf"):
        print("moesim report: --gpu-price-per-hour must be a finite number > 0", file=sys.stderr)
        return 2
    try:
        kind, size = write_report(a.input, a.out, gpu_price_per_hour=a.gpu_price_per_hour,
                                  title=a.title)
    except BadInput as e:
        print(f"moesim: error: {e}", file=sys.stderr)
        return 2
    except WriteError as e:
        print(f"moesim: error: cannot write {a.out}: {e.strerror}", file=sys.stderr)
        return 1
    except OSError as e:  # reading the input (a directory it cannot list, ...)
        print(f"moesim: error: {e.filename or a.input}: {e.strerror or e}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"moesim: error: {a.input}: out of memory reading it", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a bug of the report: one line, not a traceback
        print(f"moesim: error: {a.input}: the report failed: {internal_error(e)}",
              file=sys.stderr)
        return 1
    print(f"report: {kind} {a.input} -> {a.out} ({size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
