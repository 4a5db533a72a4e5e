"""The one exception type for bad user input; only harness/cli.py turns it into an exit status."""


class UserError(Exception):
    """Bad input from the user: the message names the bad value and the fix, in one line."""
