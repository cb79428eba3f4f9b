"""genscope.Error instances raised from the pure-Python modules (same type as the C++ ones)."""

from ._genscope import Error


def make_error(name: str, message: str) -> Error:
    """A genscope.Error with the stable `name` and the explanation `message`."""
    error = Error(f"{name}: {message}")
    error.name = name
    error.message = message
    return error
