"""The `mnemo` command: run Mnemo (up, serve) and talk to it (write, search, get, status, workspace)."""
