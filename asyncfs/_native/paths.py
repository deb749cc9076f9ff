"""The path rules that live once, in C (``plugins/common/plugin_paths.c``),
where the plugins and the runtime use them: these call the runtime's copy,
so Python and every plugin clean a path the same way."""

from __future__ import annotations

from . import binding

__all__ = ["clean_path", "translate_name"]


def clean_path(path: str) -> str:
    """Collapse "//", "." and ".."; drop a trailing "/"; "" becomes ".".

    The rule lives once, in C (``plugins/common/plugin_paths.c``), where the
    plugins and the runtime use it; this calls the runtime's copy."""
    return _by_runtime("ASYNCFS_CleanPath", path)


def translate_name(uri: str) -> str:
    """TensorFlow's generic TranslateName: "" stays "", an empty path is
    "/", otherwise the cleaned path part of the URI (the runtime's rule, as
    :func:`clean_path`)."""
    return _by_runtime("ASYNCFS_GenericTranslateName", uri)


def _by_runtime(function: str, text: str) -> str:
    raw = text.encode("utf-8", "surrogateescape")
    cap = len(raw) + 2  # cleaning never lengthens a path; "" becomes "." or "/"
    out = binding.ffi.new("char[]", cap)
    length = getattr(binding.runtime(), function)(raw, out, cap)
    if length < 0:
        raise MemoryError(f"{function} ran out of memory")
    return bytes(binding.ffi.buffer(out, length)).decode("utf-8", "surrogateescape")
