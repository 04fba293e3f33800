"""The exceptions of the moesim module (docs/python.md).

Bad input of any kind (a scenario, model or topology file, a scenario dict, an override, an
argument, a file given to steps_table, report or engine) raises ConfigError, a ValueError
carrying where the problem is and why, as the command line prints it before exiting with code 2.
"""


class ConfigError(ValueError):
    """Bad input. Attributes: file (the file, or the name standing for a scenario dict; "" when
    the input was an argument), key_path (dotted TOML key, JSON key path or CSV column; "" when
    none; also as key), reason, line and column (0 when unknown). str() is the command line's
    one-line message."""

    def __init__(self, message, file="", key_path="", reason="", line=0, column=0):
        super().__init__(message)
        self.file = file
        self.key_path = key_path
        self.reason = reason or message
        self.line = line
        self.column = column

    @property
    def key(self):
        return self.key_path


class UsageError(ConfigError):
    """A bad argument (what the command line reports as a usage error): reason says which."""


class OutputError(OSError):
    """An output file could not be written (the command line's exit code 1). Attributes: file
    (when known) and reason."""

    def __init__(self, message, file="", key_path="", reason="", line=0, column=0):
        super().__init__(message)
        self.file = file
        self.reason = reason or message


class EngineError(RuntimeError):
    """moesim-engine failed at run time (its exit code 1: out of device memory, no device, a
    device or library error) or was killed. Attributes: exit_code (negative: the signal),
    reason (its error line), stderr (all it printed there)."""

    def __init__(self, message, exit_code=1, stderr=""):
        super().__init__(message)
        self.exit_code = exit_code
        self.reason = message
        self.stderr = stderr
