"""The user's code: FILE.py:FUNCTION specs loaded as functions, called, and named in errors.

A spec names a function defined in a Python file (`tools/examples/tiny_gpt.py:build_model`),
imported as a module of its own. A spec that does not load ends the command with a message that
says why (LoadError). A user function that raises is named as the user wrote it
(`tiny_gpt.py:build_model()`) with the innermost line of their code that raised (user_frame).
"""

import importlib.util
import inspect
import os
import sys
import traceback

import torch

from .errors import UsageError

# Frames under torch and under tools/ (the recorder) are not the user's.
RECORDER = os.path.dirname(os.path.abspath(__file__))


class LoadError(SystemExit):
    """A FILE.py:FUNCTION that does not load: the message says why. A SystemExit, so that a
    command that does not catch it ends with the message (exit status 1, the measuring command);
    the recorder catches it (exit status 2)."""


def parse_spec(spec, what):
    """FILE.py:NAME -> (FILE.py, NAME); the last colon splits, so a path may hold one."""
    if ":" not in spec:
        raise LoadError(f"{what}: '{spec}' must be FILE.py:FUNCTION")
    path, name = spec.rsplit(":", 1)
    return path, name


def load_function(spec, what):
    """FILE.py:NAME -> the function NAME defined in FILE.py (imported as a module). `what` is
    the flag or argument that gave the spec, for the messages."""
    path, name = parse_spec(spec, what)
    if not os.path.isfile(path):
        raise LoadError(f"{what}: no such file '{path}'")
    module_name = "user_" + os.path.splitext(os.path.basename(path))[0]
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as e:  # the user's code: say where it failed
            del sys.modules[module_name]
            raise LoadError(f"{what}: importing '{path}' failed: {type(e).__name__}: {e}")
    fn = getattr(module, name, None)
    if fn is None:
        names = sorted(n for n in dir(module) if callable(getattr(module, n))
                       and not n.startswith("_"))
        raise LoadError(f"{what}: '{path}' defines no '{name}' (it defines: "
                        f"{', '.join(names) or 'nothing callable'})")
    if not callable(fn):
        raise LoadError(f"{what}: '{path}:{name}' is not callable")
    return fn


def function_name(fn):
    """How the user named `fn`: FILE.py:NAME() for a function of theirs, else NAME(); a
    function the recorder wraps (a batch at one size, in a dtype) is named as the user's."""
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", type(fn).__name__)
    return f"{os.path.basename(code.co_filename)}:{name}()" if code else f"{name}()"


def user_frame(e):
    """Where in the user's code `e` was raised: the innermost frame of its traceback outside
    torch and the recorder itself (tools/examples/ is user code), as ", at FILE:LINE in
    FUNCTION: `SOURCE`" ("" if none)."""
    skip = (os.path.dirname(torch.__file__) + os.sep, RECORDER + os.sep)
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not os.path.abspath(f.filename).startswith(skip)]
    if not frames:
        return ""
    f = frames[-1]
    source = f" `{f.line.strip()}`" if f.line else ""
    return f", at {os.path.basename(f.filename)}:{f.lineno} in {f.name}:{source}"


def call_user(fn, what=None):
    """fn(), a user function: what it raises becomes a UsageError naming it (`what`, else
    function_name) and the line that raised."""
    try:
        return fn()
    except Exception as e:
        raise UsageError(f"{what or function_name(fn)} raised {type(e).__name__}: {e}"
                         f"{user_frame(e)}")
