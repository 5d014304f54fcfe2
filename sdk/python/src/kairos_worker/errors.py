"""Exceptions a handler raises on purpose."""


class RetryableError(Exception):
    """Fails the attempt with exactly this message as its error; the attempt
    is retried while the job's `maxAttempts` allows.

    Any other exception (except `PermanentError`) fails it the same way,
    reported as `TypeName: message`, and is retried too: a failure is taken
    to be transient unless the handler says otherwise.
    """


class PermanentError(Exception):
    """Fails the attempt with exactly this message as its error, and says no
    retry can help (invalid params, a permanent refusal): the result carries
    `"retryable": false`, so the execution fails at once whatever attempts
    the job has left.
    """
