"""The one base of every error a user is told about in one line (``qcn: error: ...``).

Each layer derives its own errors from :class:`QcnError`, so the command line catches this
base once and anything else is a bug that deserves its traceback.
"""


class QcnError(Exception):
    """A mistake in the user's input or environment; the message says what and where."""
