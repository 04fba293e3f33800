"""BadInput: an input the report cannot read, named as the command line names bad input.

The message is one line, in the CLI's form (sim/core/config_error.h): `FILE: REASON` for a whole
file, `FILE: KEY.PATH: REASON` for a JSON value, `FILE:LINE: KEY.PATH: REASON` for a JSONL
record, and `FILE: row N, column NAME: REASON` for a CSV cell (rows counted from 1 after the
header). `moesim report` prints it after "moesim: error: " and exits 2; the Python API
(moesim.report) raises it as moesim.ConfigError with the same fields.
"""

MAX_QUOTED = 60  # characters of an offending value quoted in a message


class BadInput(Exception):
    """The input is not a moesim output this report reads (exit code 2). Attributes: file, line
    (JSONL line, or a CSV row's line counting the header as 1; 0 when unknown), row (CSV data row
    from 1; 0 when not a CSV cell), key (JSON key path or CSV column; "" for the whole file),
    reason."""

    def __init__(self, message, *, file="", line=0, row=0, key="", reason=""):
        super().__init__(_one_line(message))
        self.file = file
        self.line = line
        self.row = row
        self.key = key
        self.reason = reason or str(self)


def _one_line(text):
    return " ".join(str(text).split("\n"))


def quote(value):
    """A value for a message: repr, cut to MAX_QUOTED characters, on one line."""
    text = repr(value)
    if len(text) > MAX_QUOTED:
        text = text[:MAX_QUOTED] + f"... ({len(text)} characters)"
    return _one_line(text)


def in_file(file, reason):
    return BadInput(f"{file}: {reason}", file=file, reason=reason)


def at_key(file, key, reason, line=0):
    where = f"{file}:{line}" if line else file
    return BadInput(f"{where}: {key}: {reason}" if key else f"{where}: {reason}", file=file,
                    line=line, key=key, reason=reason)


def at_cell(file, row, column, reason):
    return BadInput(f"{file}: row {row}, column {column}: {reason}", file=file, line=row + 1,
                    row=row, key=column, reason=reason)
