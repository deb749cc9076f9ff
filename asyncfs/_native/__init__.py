"""The C boundary: where Python meets the runtime and the plugins' tables.

The cffi declarations (pre-parsed from the headers' CDEF regions), the
status runtime, loaded once, and the one place where a C status becomes a
Python exception (:mod:`.binding`); where the native libraries and the
header lie (:mod:`.libraries`); marshalling of strings, arrays and options
(:mod:`.marshal`); the path rules the runtime holds (:mod:`.paths`); the
runtime's system calls for the aiofiles drop-in (:mod:`.local`); plugins'
log lines moved into Python's logging (:mod:`.logs`); TFRecord
framing (:mod:`.records`); the HTTP requests a call made, for traces
(:mod:`.requests`); and the optional extension module
``asyncfs._speedups`` (:mod:`.speedups`). Every layer above reaches C only
through these names.
"""

from . import binding, libraries, local, logs, speedups
from .binding import UNBOUNDED, CData, check, check_count, error_from, ffi, raise_status, runtime, thread_status
from .marshal import (
    Option,
    OptionValue,
    cut_files,
    decode,
    encode,
    free_options,
    made,
    option_from_c,
    option_to_c,
    refuse_text,
    take_string,
    unpack_statistics,
    unpack_strings,
)
from .paths import clean_path, translate_name
from .records import RecordParser, Stop, find_header
from .requests import Request, collected

__all__ = [
    "UNBOUNDED",
    "CData",
    "Option",
    "OptionValue",
    "RecordParser",
    "Request",
    "Stop",
    "binding",
    "check",
    "check_count",
    "clean_path",
    "cut_files",
    "decode",
    "encode",
    "error_from",
    "ffi",
    "find_header",
    "free_options",
    "libraries",
    "local",
    "logs",
    "made",
    "option_from_c",
    "option_to_c",
    "raise_status",
    "refuse_text",
    "runtime",
    "speedups",
    "take_string",
    "thread_status",
    "translate_name",
    "unpack_statistics",
    "unpack_strings",
    "collected",
]
