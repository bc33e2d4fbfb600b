"""The error type of a user's mistake: :class:`CmixError`.

Every module raises it for a bad input or argument; the CLI prints its message alone
(one line, no traceback) and exits with status 1.
"""


class CmixError(Exception):
    """A problem with the user's input or arguments.

    The CLI prints the message alone (no traceback) and exits with status 1, so the
    message must say which file, line or column is wrong and what was expected.
    """
