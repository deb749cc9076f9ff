"""``asyncfs doctor``: what this installation loaded, from where, for bug
reports. The runtime and every plugin with its library path, metadata, table
versions and flags; the optional plugins this installation lacks and how to
get them; the bundled libraries of a binary wheel; the settings that change
behaviour."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from .. import __version__
from .._native import libraries as _libs
from .._native import speedups as _extension
from .._plugins import binding, core_abi_version
from .._sync import ModularFileSystem, Registry
from ..errors import StatusError

__all__ = ["report"]

# The environment variables asyncfs or its built-in plugins read.
_SETTINGS = (
    "ASYNCFS_LIB_DIR",
    "ASYNCFS_NO_SPEEDUPS",
    "ASYNCFS_LOCK_DIR",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_S3_ADDRESSING_STYLE",
    "AWS_ACCESS_KEY_ID",
)

HOW_TO_GET = {
    "s3": (
        "install a binary wheel of asyncfs (pip install --only-binary asyncfs asyncfs), which carries s3, "
        "or install libcurl, OpenSSL and expat with their headers and reinstall from source (docs/install.md)"
    ),
}


def _speedups() -> str:
    if _extension.SPEEDUPS is not None:
        return f"in C: {_extension.SPEEDUPS.__file__}"
    return f"in Python: {_extension.WHY_NOT}"


def report(registry: Registry) -> str:
    """The text ``asyncfs doctor`` prints."""
    lib_dir = _libs.lib_dir()
    lines = [
        f"asyncfs {__version__} at {Path(__file__).parent}",
        f"python {platform.python_version()} ({sys.executable}), {platform.platform()}",
        f"core ABI {core_abi_version()}; status runtime {_libs.library_path('runtime')}",
        f"native libraries from {lib_dir}",
        f"plugins bound {binding()}",
        f"lines split and handed over, bulk reads cut into files {_speedups()}",
    ]
    bundled = lib_dir.parent.parent / "asyncfs.libs"  # where auditwheel puts a wheel's bundled libraries
    if bundled.is_dir():
        lines.append(f"bundled libraries ({bundled}): {', '.join(sorted(p.name for p in bundled.iterdir()))}")
    lines.append("plugins:")
    for info in registry.plugins():
        meta = info.metadata
        fs = registry.get(info.schemes[0])
        flags = [name for name, on in (("atomic-writes", meta.atomic_writes), ("network", meta.network)) if on]
        tables = ", ".join(f"{table} API {api}" for table, api in fs.api_versions.items())
        lines += [
            f"  {meta.name} {meta.version or '(no version)'}: schemes {', '.join(repr(s) for s in info.schemes)}",
            f"    library {meta.library}",
            f"    core ABI {meta.min_core_abi}..{meta.max_core_abi}; {tables}; flags: {', '.join(flags) or 'none'}",
            f"    offers {len(fs.offered_ops())} filesystem ops; transactions "
            f"{'native' if fs.offers_transactions() else 'generic'}",
        ]
        source = _credential_source(fs) if meta.network else None
        if source is not None:
            lines.append(f"    credentials: {source}")
    for name, reason in registry.unavailable().items():
        lines += [f"  {name}: unavailable: {reason}", f"    to get it: {HOW_TO_GET.get(name, 'see docs/install.md')}"]
    settings = [f"{key}={'(set)' if 'KEY' in key else os.environ[key]}" for key in _SETTINGS if key in os.environ]
    lines.append(f"settings: {', '.join(settings) or 'none from the environment'}")
    return "\n".join(lines)


def _credential_source(fs: ModularFileSystem) -> str | None:
    """Where a network plugin's requests get their credentials, as the
    plugin reports it (the read-only option credential_source, which asks
    its credential chain), or None when it does not say."""
    try:
        value = fs.get_option("credential_source").value
    except StatusError:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
