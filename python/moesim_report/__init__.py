"""moesim_report: one self-contained HTML page of moesim outputs (docs/report.md).

Inputs: a run directory (`moesim run --out DIR`), a sweep CSV (`moesim sweep --out FILE.csv`, or
a directory holding one) or a search document (`moesim search --json > FILE.json`). The page has
every figure inlined (SVG or base64 PNG drawn by matplotlib), no script or style from the
network, and opens offline. `moesim report` runs this package; `python3 -m moesim_report` too.
"""

from .inputs import BadInput, detect
from .page import WriteError, build_report, write_report

__all__ = ["BadInput", "WriteError", "detect", "build_report", "write_report"]
