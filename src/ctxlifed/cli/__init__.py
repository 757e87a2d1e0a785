"""ctxlifectl: the command-line client. Imports protocol-level constants and runtime paths only, never the server."""
