"""Exceptions with enough context to act on (file, line, value)."""


class ColltuneError(Exception):
    """Base class: every user-facing error of colltune."""


class ConfigError(ColltuneError):
    """Bad configuration value (names the source: CLI, environment or file:line)."""


class InputError(ColltuneError):
    """Bad input file or argument (names the file, line and value)."""


class BuildError(ColltuneError):
    """The native part could not be compiled."""


class BackendError(ColltuneError):
    """A backend cannot run on this machine (names what to install)."""
