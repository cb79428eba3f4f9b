"""load_step(run, name, path=None): a model_loading step that counts what was loaded.

Modules created inside the block are seen through ``torch.nn.Module.__init__`` (every module
constructor calls it) and ``__setstate__`` (``torch.load`` of a pickled module), wrapped
while at least one load_step is open and only for the threads that opened one; the wrapped
functions are restored when the last one closes. Parameters and buffers are read when the
block ends, so weights assigned after construction (``load_state_dict``, diffusers' meta-device
loading) are the ones counted. Each tensor is counted once.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Dict, List, Optional

from ._tensors import caller

_lock = threading.Lock()
_collectors: Dict[int, List["LoadStep"]] = {}  # thread -> open load steps
_saved: Dict[str, Any] = {}  # the original torch.nn.Module methods while wrapped


def _note(module: Any) -> None:
    for collector in _collectors.get(threading.get_ident(), ()):
        collector._created.append(weakref.ref(module))


def _wrap_module_class() -> None:
    import torch

    cls = torch.nn.Module
    init, setstate = cls.__init__, cls.__setstate__
    _saved.update(init=init, setstate=setstate)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if _collectors:
            _note(self)

    def __setstate__(self: Any, state: Any) -> None:
        setstate(self, state)
        if _collectors:
            _note(self)

    cls.__init__ = __init__
    cls.__setstate__ = __setstate__
    _saved.update(wrapped_init=__init__, wrapped_setstate=__setstate__)


def _unwrap_module_class() -> None:
    """Restores the originals, unless someone wrapped them again meanwhile: then ours stay in
    their chain, inert (no collector is open)."""
    import torch

    cls = torch.nn.Module
    for attr, key in (("__init__", "init"), ("__setstate__", "setstate")):
        if cls.__dict__.get(attr) is _saved.pop("wrapped_" + key):
            setattr(cls, attr, _saved[key])
        _saved.pop(key)


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _path_size(path: str) -> Optional[int]:
    if os.path.isfile(path):
        return os.path.getsize(path)
    if os.path.isdir(path):  # a diffusers folder: every file below it
        total = 0
        for root, _, files in os.walk(path):
            for f in files:
                full = os.path.join(root, f)
                if os.path.isfile(full):
                    total += os.path.getsize(full)
        return total
    return None


class LoadStep:
    """The context manager of load_step(); `figures` holds the counts after exit."""

    def __init__(self, run: Any, name: str, path: Optional[str] = None) -> None:
        self.run = run
        self.name = name
        self.path = os.fspath(path) if path is not None else None
        self.step: Any = None
        self.figures: Optional[Dict[str, Any]] = None  #: Set on exit (None if the load failed).
        self._created: List[Any] = []
        self._tracked: List[Any] = []

    def track(self, module: Any) -> Any:
        """Counts `module` too (one created before the block, or outside torch.nn); returns it."""
        self._tracked.append(module)
        return module

    def __enter__(self) -> "LoadStep":
        self.step = self.run.step("model_loading", f"load {self.name}", source=caller())
        self.step.__enter__()
        if self.step.active:
            with _lock:
                if not _collectors:
                    _wrap_module_class()
                _collectors.setdefault(threading.get_ident(), []).append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            if self.step.active:
                with _lock:
                    mine = _collectors.get(threading.get_ident(), [])
                    if self in mine:
                        mine.remove(self)
                        if not mine:
                            del _collectors[threading.get_ident()]
                        if not _collectors:
                            _unwrap_module_class()
                if exc_type is None:
                    try:
                        self._count()
                    except Exception as e:  # noqa: BLE001
                        self.step.record_monitoring_error(
                            "torch.load_step", f"{type(e).__name__}: {e}")
        finally:
            self.step.__exit__(exc_type, exc, tb)
        return False

    def _count(self) -> None:
        modules = [m for m in (ref() for ref in self._created) if m is not None]
        for module in self._tracked:  # with their submodules
            modules.extend(module.modules() if hasattr(module, "modules") else [module])
        seen = set()
        parameters = tensors = tensor_bytes = 0
        dtypes: Dict[str, int] = {}
        devices: Dict[str, int] = {}
        roots = []
        children = {id(c) for m in modules for c in m.children()}
        for module in modules:
            if id(module) not in children and id(module) not in seen:
                roots.append(type(module).__name__)
            own = [(True, t) for t in module._parameters.values()]
            own += [(False, t) for t in module._buffers.values()]
            for is_parameter, t in own:
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                n = t.numel()
                nbytes = n * t.element_size()
                tensors += 1
                tensor_bytes += nbytes
                if is_parameter:
                    parameters += n
                dtypes[_dtype_name(t.dtype)] = dtypes.get(_dtype_name(t.dtype), 0) + 1
                devices[str(t.device)] = devices.get(str(t.device), 0) + nbytes
            seen.add(id(module))
        file_size = None
        if self.path is not None:
            file_size = _path_size(self.path)
            if file_size is None:
                self.step.record_monitoring_error("torch.load_step",
                                                  f"{self.path}: no such file or folder")
            self.step.label("file", self.path)
        self.step.add_counter("parameters", float(parameters))
        self.step.add_counter("tensors", float(tensors))
        self.step.add_counter("bytes", float(file_size if file_size is not None else tensor_bytes))
        self.figures = {"component": self.name, "file": self.path, "file_size_bytes": file_size,
                        "modules": roots, "parameters": parameters, "tensors": tensors,
                        "tensor_bytes": tensor_bytes, "dtypes": dtypes, "device_bytes": devices}
        self.step.attach("model_component", self.name, self.figures)


def load_step(run: Any, name: str, path: Optional[str] = None) -> LoadStep:
    """A ``model_loading`` step "load <name>" counting the modules created inside it.

    Counters: ``parameters`` (elements of the parameters), ``tensors`` (parameters and
    buffers), ``bytes`` (the file or folder size when `path` is given, else the tensors'
    bytes); attachment ``model_component`` with the details. ``step.track(module)`` adds a
    module created elsewhere.
    """
    return LoadStep(run, name, path)
