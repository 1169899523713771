"""The SDK's version, sent to the coordinator in ``WorkerHello``."""

__version__ = "0.1.0"
