"""python3 -m moesim_report INPUT --out REPORT.html [--gpu-price-per-hour USD] [--title TEXT]

Exit codes: 0 written, 1 the page could not be written, 2 bad input (an INPUT that is not a
moesim run directory, sweep CSV or search JSON, or one whose files do not parse; an --out whose
directory does not exist or is not writable, or that is a directory: checked before any work).
The page is written to a temporary file beside --out and renamed over it when complete."""

import argparse
import os
import sys

from .inputs import BadInput
from .page import build_report


def main(argv=None):
    ap = argparse.ArgumentParser(prog="moesim report")
    ap.add_argument("input")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--gpu-price-per-hour", type=float, default=None)
    ap.add_argument("--title", default=None)
    a = ap.parse_args(argv)
    if a.gpu_price_per_hour is not None and not a.gpu_price_per_hour > 0:
        print("moesim report: --gpu-price-per-hour must be > 0", file=sys.stderr)
        return 2
    out_dir = os.path.dirname(os.path.abspath(a.out))
    why = None
    if os.path.isdir(a.out):
        why = "is a directory"
    elif not os.path.isdir(out_dir):
        why = f"directory {out_dir} does not exist"
    elif not os.access(out_dir, os.W_OK | os.X_OK):
        why = f"directory {out_dir} is not writable"
    if why:
        print(f"moesim: error: {a.out}: --out: {why}", file=sys.stderr)
        return 2
    try:
        html, kind = build_report(a.input, gpu_price_per_hour=a.gpu_price_per_hour, title=a.title)
    except BadInput as e:
        print(f"moesim: error: {e}", file=sys.stderr)
        return 2
    tmp = os.path.join(out_dir, f".{os.path.basename(a.out)}.tmp.{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(html)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, a.out)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        print(f"moesim: error: cannot write {a.out}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"report: {kind} {a.input} -> {a.out} ({len(html) / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
