"""Loading plugin libraries: each opened from a private copy bound to the
runtime (:mod:`.copies`, over the ELF reader :mod:`.elf`), and what its
``TF_InitPlugin`` reports checked before anything is used (:mod:`.loader`:
TensorFlow's order, every pointer probed, tables copied as the smaller of
the plugin's size and the core's). Plugins are never unloaded.
"""

from .loader import (
    LoadedPlugin,
    PluginMetadata,
    SchemeTables,
    binding,
    core_abi_version,
    init_filesystem,
    init_filesystems,
    open_plugin,
)

__all__ = [
    "LoadedPlugin",
    "PluginMetadata",
    "SchemeTables",
    "binding",
    "core_abi_version",
    "init_filesystem",
    "init_filesystems",
    "open_plugin",
]
