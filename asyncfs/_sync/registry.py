"""The registry of loaded plugins: scheme -> :class:`ModularFileSystem`.

Built-in plugins (posix for ``file://`` and bare paths, memory for ``mem://``)
load through :meth:`Registry.load_plugin`, exactly like a third-party library.
Plugins are never unloaded.
"""

from __future__ import annotations

import copyreg
import logging
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import _uri
from .._native import Option
from .._native import libraries as _libs
from .._plugins import PluginMetadata, init_filesystems, open_plugin
from ..errors import SchemeAlreadyRegisteredError, UnknownSchemeError
from .filesystem import ModularFileSystem

__all__ = [
    "BUILTIN_PLUGINS",
    "OPTIONAL_PLUGINS",
    "PluginInfo",
    "Registry",
    "RegistryRecipe",
    "add_load_listener",
    "default_registry",
    "get_filesystem",
    "load_plugin",
]

_log = logging.getLogger("asyncfs.plugins")

BUILTIN_PLUGINS = ("posix", "memory")
# Built only when the system has their libraries (see Registry.unavailable).
OPTIONAL_PLUGINS = ("s3", "http", "gs", "az")


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin: its metadata and the schemes it registered."""

    metadata: PluginMetadata
    schemes: tuple[str, ...]


@dataclass(frozen=True)
class RegistryRecipe:
    """How to rebuild a registry in another process: the process-wide one
    or a new one (with or without the built-in plugins), the third-party
    plugin libraries it had loaded, by path, in load order, and the options
    set on its filesystems that travel (secrets only when set with
    ``travels=True``: :meth:`ModularFileSystem.set_option`)."""

    default: bool
    builtins: bool
    libraries: tuple[str, ...]
    options: tuple[tuple[str, tuple[Option, ...]], ...] = ()

    def build(self) -> Registry:
        registry = default_registry() if self.default else Registry(builtins=self.builtins)
        loaded = {info.metadata.library for info in registry.plugins()}
        for library in self.libraries:
            if library not in loaded:
                registry.load_plugin(library)
        for scheme, options in self.options:
            registry.get(scheme).set_configuration(options, travels=True)
        return registry


class Registry:
    """Maps URI schemes to filesystems. Thread-safe."""

    def __init__(self, *, builtins: bool = True) -> None:
        self._filesystems: dict[str, ModularFileSystem] = {}
        self._plugins: list[PluginInfo] = []
        self._unavailable: dict[str, str] = {}
        self._lock = threading.Lock()
        self._builtins = builtins
        _registries.add(self)
        if builtins:
            for name in BUILTIN_PLUGINS:
                self.load_plugin(_libs.library_path(name))
            for name in OPTIONAL_PLUGINS:
                reason = _libs.unavailable_reason(name)
                if reason is None:
                    self.load_plugin(_libs.library_path(name))
                else:
                    self._unavailable[name] = reason
        self._builtin_libraries = {info.metadata.library for info in self._plugins}

    def recipe(self) -> RegistryRecipe:
        """What another process needs to rebuild this registry."""
        with self._lock:
            libraries = tuple(
                info.metadata.library for info in self._plugins if info.metadata.library not in self._builtin_libraries
            )
            options = tuple(
                (scheme, fs.travelling_options()) for scheme, fs in self._filesystems.items() if fs.travelling_options()
            )
        return RegistryRecipe(default=self is _default, builtins=self._builtins, libraries=libraries, options=options)

    def load_plugin(self, library: str | os.PathLike[str], *, replace: bool = False) -> PluginInfo:
        """Load a plugin library and register every scheme it provides.

        A refusal raises a :class:`~asyncfs.errors.PluginError` subclass and
        leaves the registry as it was. A scheme that is already registered is
        an error unless ``replace`` is true.
        """
        path = os.fspath(library)
        plugin = open_plugin(path)
        schemes = [tables.scheme for tables in plugin.schemes]
        plugin_name = plugin.metadata.name if plugin.metadata.has_metadata else None
        with self._lock:
            seen: set[str] = set()
            for scheme in schemes:
                if scheme in seen or (scheme in self._filesystems and not replace):
                    owner = self._filesystems.get(scheme)
                    by = f" by {owner.metadata.library}" if owner is not None else " twice by this plugin"
                    raise SchemeAlreadyRegisteredError(
                        f"scheme {scheme!r} is already registered{by}; pass replace=True to replace it",
                        library=path,
                        scheme=scheme,
                        item="scheme",
                        plugin=plugin_name,
                    )
                seen.add(scheme)
            init_filesystems(plugin)
            for tables in plugin.schemes:
                self._filesystems[tables.scheme] = ModularFileSystem(tables, plugin.metadata, plugin.memory_free)
            info = PluginInfo(plugin.metadata, tuple(schemes))
            self._plugins.append(info)
        if _log.isEnabledFor(logging.INFO):
            served = ", ".join(f"{s}://" if s else "bare paths" for s in schemes)
            _log.info("loaded plugin %s from %s: %s", plugin_name or "(no metadata)", path, served)
        for listener in list(_load_listeners):
            listener(info)
        return info

    def schemes(self) -> list[str]:
        """The schemes registered, sorted."""
        with self._lock:
            return sorted(self._filesystems)

    def plugins(self) -> list[PluginInfo]:
        """The plugins loaded, in load order."""
        with self._lock:
            return list(self._plugins)

    def unavailable(self) -> dict[str, str]:
        """Optional built-in plugins that this installation lacks, each with
        the reason (for ``s3``: which system libraries the build missed)."""
        return dict(self._unavailable)

    def get(self, scheme: str) -> ModularFileSystem:
        """The filesystem serving scheme; :class:`UnknownSchemeError`
        when none does."""
        try:
            return self._filesystems[scheme]
        except KeyError:
            known = ", ".join(repr(s) for s in self.schemes())
            hint = f"; {self._unavailable[scheme]}" if scheme in self._unavailable else ""
            raise UnknownSchemeError(
                f"no plugin registered for scheme {scheme!r} (registered: {known}){hint}"
            ) from None

    def for_uri(self, uri: str) -> ModularFileSystem:
        """The filesystem serving uri (bare paths go to the "" scheme)."""
        return self.get(_uri.scheme_of(_uri.check_uri(uri)))


_load_listeners: list[Callable[[PluginInfo], None]] = []


def add_load_listener(listener: Callable[[PluginInfo], None]) -> None:
    """Call listener with each plugin any registry loads from now on (the
    fsspec bridge registers the new schemes as protocols this way)."""
    _load_listeners.append(listener)


_default: Registry | None = None
_default_lock = threading.Lock()
_registries: weakref.WeakSet[Registry] = weakref.WeakSet()


def _fresh_locks_in_child() -> None:
    """After a fork, locks that another thread of the parent held would
    never be released in the child: give the child new ones. Plugins keep
    their state; they are told nothing (docs/plugin-abi.md)."""
    global _default_lock
    _default_lock = threading.Lock()
    for registry in list(_registries):
        registry._lock = threading.Lock()
        for fs in registry._filesystems.values():
            fs._fresh_locks_in_child()  # and the Envs' own filesystems made from it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_locks_in_child)


def default_registry() -> Registry:
    """The process-wide registry, with the built-in plugins, made on first
    use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Registry()
        return _default


def load_plugin(library: str | os.PathLike[str], *, replace: bool = False) -> PluginInfo:
    """Load a plugin into the process-wide registry."""
    return default_registry().load_plugin(library, replace=replace)


def get_filesystem(uri: str) -> ModularFileSystem:
    """The filesystem serving uri in the process-wide registry."""
    return default_registry().for_uri(uri)


# ---- pickling: a filesystem travels as its scheme, library and options ------------------


def _reduce_filesystem(fs: ModularFileSystem) -> tuple[Any, ...]:
    """A filesystem pickles as (scheme, plugin library, travelling options):
    the receiving process serves the scheme from its process-wide registry,
    loading the library there if the scheme is not registered yet, and sets
    the options there (see :meth:`ModularFileSystem.set_option`). So does
    one made by :meth:`ModularFileSystem.new_instance` (an Env's): in a
    worker, the copies that tasks receive share one filesystem and its
    connections. Registered here, with the registry the rebuild needs."""
    return (_rebuild_filesystem, (fs.scheme, fs.metadata.library, fs.travelling_options()))


def _rebuild_filesystem(scheme: str, library: str, options: tuple[Option, ...] = ()) -> ModularFileSystem:
    registry = default_registry()
    if scheme not in registry.schemes():
        registry.load_plugin(library)
    fs = registry.get(scheme)
    if options:
        fs.set_configuration(options, travels=True)
    return fs


copyreg.pickle(ModularFileSystem, _reduce_filesystem)
