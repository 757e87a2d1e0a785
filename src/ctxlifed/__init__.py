"""ctxlifed: a context-lifecycle daemon for Claude Code."""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
