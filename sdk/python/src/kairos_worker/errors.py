"""Exceptions a handler raises on purpose."""


class RetryableError(Exception):
    """Fails the attempt with exactly this message as its error.

    Any other exception fails it too, reported as `TypeName: message`. Every
    failed attempt is retried while the job's `maxAttempts` allows (the
    protocol has no "do not retry" outcome), hence the name.
    """
