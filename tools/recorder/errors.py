"""The error a recording stops with. Raised anywhere in the recorder with a message that says
what is wrong and, for the user's code, where; the command prints it after
"record_program: error: " and exits with status 2 (cli.py)."""


class UsageError(Exception):
    """Bad usage or a user model that cannot be recorded: the message says what."""
