"""Methods from installed packages: the entry-point group ``cmix.methods``.

A package names each method as an entry point of the group (``name = module:object``).
The object is either

- a **factory**: called with the method's mapping of ``plugin_config`` (the config key
  :attr:`cmix.learn.config.Plugin.plugin_config`, ``{}`` when it has none), it returns an
  unfitted scikit-learn classifier; cmix fits it on the labeled rows' standardised dosages
  and covariates and scores its ``predict_proba`` (:class:`SklearnFactoryMethod`); or
- a **class** implementing the method protocol of cmix's own methods
  (:class:`cmix.learn.methods.base.FittedMethod`; a torch method subclasses
  :class:`cmix.learn.methods.network.NetworkMethod` and fits a group of runs at once).

Reading them loads every entry point of the group once. A name taken by a built-in
method or by two packages, an entry point that fails to import, or an object of neither
form is a :class:`cmix.errors.CmixError` of one line naming the package.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from importlib.metadata import entry_points

import numpy as np

from ...errors import CmixError
from ..data import standardised_dosage
from .base import FittedMethod, full_proba

#: the entry-point group a package registers its methods under
ENTRY_POINT_GROUP = "cmix.methods"
#: the module of the torch methods' base class (named, not imported: it imports torch)
NETWORK_MODULE = "cmix.learn.methods.network"


@dataclass(frozen=True)
class PluginMethod:
    """One installed method: its name, the class that fits it, one summary line, whether
    it trains a torch network, and the package (distribution) it comes from."""

    name: str
    cls: type
    summary: str
    network: bool
    package: str


class SklearnFactoryMethod(FittedMethod):
    """A scikit-learn classifier from a plugin's factory, fitted on the labeled rows
    (training labeled and validation) with features (n, M + K) float64: the standardised
    dosages (:func:`cmix.learn.data.standardised_dosage`, the training split's moments)
    and the standardised covariates beside them. ``factory`` and ``plugin`` are set on the
    subclass made for each entry point (:func:`factory_method`)."""

    family = "plugin"
    FIELDS = ("model", "n_classes", "mean", "sd")
    factory = None
    plugin = ""

    def features(self, x: np.ndarray, covariates: np.ndarray) -> np.ndarray:
        """(n, M + K) float64 of int8 dosages x (n, M) and covariates (n, K)."""
        return np.hstack([standardised_dosage(x, self.mean, self.sd),
                          np.asarray(covariates, dtype=np.float64)])

    def fit(self, data):
        s = data.splits
        self.mean, self.sd, self.n_classes = data.mean, data.sd, s.n_classes
        t = time.perf_counter()
        x = self.features(data.rows(s.labeled).cpu().numpy(), data.cov[s.labeled])
        t = data.add_time("load", t)
        settings = (self.cfg.plugin.plugin_config or {}).get(self.plugin, {})
        model = type(self).factory(dict(settings))
        if not (hasattr(model, "fit") and hasattr(model, "predict_proba")):
            raise CmixError(f"method {self.plugin!r}: its factory returned "
                            f"{type(model).__name__}, not a scikit-learn classifier "
                            "(fit and predict_proba)")
        self.model = model.fit(x, s.label[s.labeled])
        data.add_time("fit", t)
        self.report["validation"] = {"fit_rows": "labeled (train_labeled + validation)",
                                     "plugin_config": dict(settings)}
        return self

    def predict_proba(self, x, covariates):
        return full_proba(self.model, self.features(x, covariates), self.n_classes)


def factory_method(name: str, factory) -> type:
    """The :class:`SklearnFactoryMethod` subclass of the entry point ``name``: its class
    name (what a checkpoint records) names the method."""
    return type(f"Plugin_{name}", (SklearnFactoryMethod,),
                {"factory": staticmethod(factory), "plugin": name,
                 "__doc__": factory.__doc__ or SklearnFactoryMethod.__doc__})


def package_of(ep) -> str:
    """The distribution an entry point comes from (its top-level module without one)."""
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else ep.value.split(":")[0].split(".")[0]


def load_plugin(ep, package: str) -> PluginMethod:
    """The :class:`PluginMethod` of one entry point; CmixError naming the package when it
    fails to import or is neither a method class nor a callable factory."""
    where = f"package {package!r}: cmix.methods entry point {ep.name} = {ep.value}"
    try:
        obj = ep.load()
    except Exception as err:     # anything the plugin's import raises, as one line
        raise CmixError(f"{where} failed to import ({type(err).__name__}: {err})") from None
    if isinstance(obj, type) and issubclass(obj, FittedMethod):
        cls = obj
    elif callable(obj) and not isinstance(obj, type):
        cls = factory_method(ep.name, obj)
    else:
        raise CmixError(f"{where} is neither a FittedMethod class nor a factory of "
                        "scikit-learn classifiers")
    # the docstring's first paragraph, its lines joined: one line however it is wrapped
    first = inspect.cleandoc(obj.__doc__ or "").split("\n\n")[0]
    summary = (" ".join(first.split()) or "a method") + f" (plugin, package {package})"
    network = any(c.__module__ == NETWORK_MODULE for c in cls.__mro__)
    return PluginMethod(ep.name, cls, summary, network, package)


def plugin_methods(built_in: set) -> list[PluginMethod]:
    """Every installed method of the entry-point group, sorted by name; CmixError (one
    line naming the package) for a name in ``built_in`` or given by two packages, or an
    entry point that does not load (:func:`load_plugin`)."""
    found: dict[str, PluginMethod] = {}
    found_at: dict[str, str] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        package = package_of(ep)
        if ep.name in built_in:
            raise CmixError(f"package {package!r}: its method {ep.name!r} (cmix.methods "
                            f"entry point {ep.value}) has the name of a built-in cmix "
                            "method; rename it in the package's entry points")
        if ep.name in found and (found[ep.name].package, ep.value) == (package, found_at[ep.name]):
            continue                   # the same package seen twice on the path
        if ep.name in found:
            raise CmixError(f"package {package!r}: its method {ep.name!r} has the name of "
                            f"package {found[ep.name].package!r}'s; rename one of them")
        found[ep.name], found_at[ep.name] = load_plugin(ep, package), ep.value
    return list(found.values())
