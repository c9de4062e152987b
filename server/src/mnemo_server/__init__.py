"""Mnemo's composition root: all services in one process (`mnemo up`) or one alone (`mnemo serve`)."""
