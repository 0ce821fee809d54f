"""Errors the workbench raises for bad input: one clear line that says what to do."""


class WorkbenchError(ValueError):
    """Base class: a problem with the user's input, reported without a traceback by the CLI."""


class ModelLoadError(WorkbenchError):
    """The model could not be loaded (missing path, corrupt file, unknown signature or tags)."""


class ConversionParamsError(WorkbenchError):
    """A conversion parameter has an impossible value."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (TensorFlow's run to pages), or its type."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
