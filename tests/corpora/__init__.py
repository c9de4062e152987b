"""Test and benchmark data as code: poisoning attacks and benign notes (guard), planted fake secrets (redact)."""
