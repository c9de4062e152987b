"""The CLI's commands, one module per concern; each `cmd_*` takes the parsed arguments and returns the exit code.

memory: read and correct memories (write, search, get, supersede, delete, history, audit...);
admin: tokens, workspaces, redaction; harvest: harvest run and status; running: up, serve, bench.
"""
