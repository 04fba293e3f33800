"""python3 -m moesim_report INPUT -o REPORT.html [--gpu-price USD] [--title TEXT]

Exit codes: 0 written, 1 the page could not be written, 2 bad input (an INPUT that is not a
moesim run directory, sweep CSV or search JSON, or one whose files do not parse)."""

import argparse
import sys

from .inputs import BadInput
from .page import build_report


def main(argv=None):
    ap = argparse.ArgumentParser(prog="moesim report")
    ap.add_argument("input")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--gpu-price", type=float, default=None)
    ap.add_argument("--title", default=None)
    a = ap.parse_args(argv)
    if a.gpu_price is not None and not a.gpu_price > 0:
        print("moesim report: --gpu-price must be > 0", file=sys.stderr)
        return 2
    try:
        html, kind = build_report(a.input, gpu_price_per_hour=a.gpu_price, title=a.title)
    except BadInput as e:
        print(f"moesim: error: {e}", file=sys.stderr)
        return 2
    try:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(html)
    except OSError as e:
        print(f"moesim: error: cannot write {a.out}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"report: {kind} {a.input} -> {a.out} ({len(html) / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
