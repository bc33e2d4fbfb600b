"""The training code's functions by name, wherever in cmix.learn they live, and a
monkeypatch that replaces one in every module that imported it (a function moved between
modules is patched where its callers look it up)."""

import importlib
import pkgutil

import cmix.learn


def _modules() -> list:
    return [importlib.import_module(m.name)
            for m in pkgutil.walk_packages(cmix.learn.__path__, "cmix.learn.")]


def __getattr__(name: str):
    """The object named ``name`` in the module that defines it."""
    for module in _modules():
        obj = module.__dict__.get(name)
        if obj is not None and getattr(obj, "__module__", module.__name__) == module.__name__:
            return obj
    for module in _modules():
        if name in module.__dict__:
            return module.__dict__[name]
    raise AttributeError(name)


def patch(monkeypatch, name: str, value) -> None:
    """Replace ``name`` with ``value`` in every cmix.learn module bound to its current
    object."""
    current = [m for m in _modules() if name in m.__dict__]
    home = __getattr__(name)
    holders = [m for m in current if m.__dict__[name] is home] or current
    assert holders, name
    for module in holders:
        monkeypatch.setattr(module, name, value)
