"""colltune: benchmark, tune, deploy and profile MPI collective operations."""

__version__ = "0.1.0"
