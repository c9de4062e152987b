"""The CLI's one user-facing error (kept apart from the HTTP client so `up` need not import httpx)."""


class ClientError(Exception):
    """A request the CLI could not complete; the message is for the user."""
