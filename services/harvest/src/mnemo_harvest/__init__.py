"""Mnemo's harvest service: finished coding-agent sessions become redacted, re-derivable memory."""
