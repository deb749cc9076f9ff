"""The ``asyncfs`` command line (also ``python -m asyncfs``).

    asyncfs plugins                       loaded plugins, schemes, metadata, ops offered
    asyncfs doctor                        what was loaded from where, what is missing and why
    asyncfs ls [-l] [-h] [-R] URI...      list folders (a file lists itself)
    asyncfs du [-s] [-h] URI...           bytes below each folder, and in all
    asyncfs stat URI                      size, kind and modification time
    asyncfs cat [--decompress] URI...     write files to standard output
    asyncfs cp [-r] [-j N] [-n] SRC... DST    copy files or trees, across schemes
    asyncfs mv [-n] SRC... DST            move files or folders (copy + rm across schemes)
    asyncfs rm [-r] [-f] URI...           delete files (or trees); never ., .. or a filesystem's top
    asyncfs mkdir [-p] URI...             make directories
    asyncfs glob [-r] PATTERN             list matches (** with -r)
    asyncfs exists URI...                 say which exist
    asyncfs demo                          show asyncfs at work on the built-in plugins

The conventions are those of gsutil, ``aws s3`` and rclone. A source of
ls, du, cp, mv and rm may be a glob pattern (quote it: ``'data/*.bin'``);
one that matches nothing is an error ("matched no objects or files"). With
several sources, or a destination that is a folder or ends in ``/``, cp and
mv put each source inside the destination. ``-n``/``--dry-run`` says what
would be done. ``--plugin PATH`` (before or after the command, any number of
times) loads a third-party plugin first.

Exit status: 0 success; 1 an operation failed (one line on standard error
naming the path and the problem; ``exists`` also when one is missing);
2 a usage error. Output cut short by its reader (``asyncfs cat big | head``)
ends quietly. cat and cp move bytes as stored; ``cat --decompress`` inflates
``.gz``/``.zst``/... by the suffix.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

import anyio

from .. import __version__, core_abi_version
from .._sync import ModularFileSystem
from .._sync.plans import has_glob_meta
from .._uri import join, parse_uri
from ..env import Env
from ..errors import AsyncFSError, NotFoundError, StatusError
from .doctor import HOW_TO_GET, report

__all__ = ["main"]

EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """An operation that cannot go ahead: one line, exit status 1."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asyncfs", description="Asynchronous filesystems, from the shell.")
    parser.add_argument("--version", action="version", version=f"asyncfs {__version__}")
    parser.add_argument("--plugin", action="append", default=[], metavar="PATH", help="load a plugin library first")
    # the same option after the command; kept apart, as argparse would let
    # the subcommand's default overwrite what came before it
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--plugin", dest="plugin_after", action="append", default=[], metavar="PATH", help="as above")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, about: str, *, human: bool = False) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=about, description=about, parents=[after], add_help=not human)
        if human:  # -h is --human-readable here, as in ls and du
            sub.add_argument("--help", action="help", help="show this help message and exit")
            sub.add_argument("-h", "--human-readable", dest="human", action="store_true", help="sizes as 1.2K, 3.4M")
        return sub

    command("plugins", "list the loaded plugins")
    command("doctor", "what was loaded from where, and what is missing (for bug reports)")
    ls = command("ls", "list folders; a file lists itself", human=True)
    ls.add_argument("-l", "--long", action="store_true", help="sizes, kinds and times")
    ls.add_argument("-R", "--recursive", action="store_true", help="list subdirectories too")
    ls.add_argument("uris", nargs="+", metavar="URI")
    du = command("du", "bytes below each folder, and in all", human=True)
    du.add_argument("-s", "--summarize", action="store_true", help="only a total for each argument")
    du.add_argument("uris", nargs="+", metavar="URI")
    command("stat", "size, kind and modification time").add_argument("uri")
    cat = command("cat", "write files to standard output, bytes as stored (- is standard input)")
    cat.add_argument("--decompress", action="store_true", help="inflate by the suffix (.gz, .zst, ...)")
    cat.add_argument("uris", nargs="+", metavar="URI")
    moves = (("cp", "copy files, or trees with -r (- is standard input or output)"), ("mv", "move files or folders"))
    for name, about in moves:
        move = command(name, about)
        if name == "cp":
            move.add_argument("-r", "--recursive", action="store_true", help="copy folders and what they hold")
            move.add_argument("-j", "--jobs", type=int, default=8, metavar="N", help="sources copied at once (8)")
            move.add_argument("--progress", choices=("auto", "on", "off"), default="auto", help="a progress bar")
        move.add_argument("-n", "--dry-run", action="store_true", help="say what would be done, do nothing")
        move.add_argument("sources", nargs="+", metavar="SRC")
        move.add_argument("dst", metavar="DST")
    rm = command("rm", "delete files")
    rm.add_argument("-r", "--recursive", action="store_true", help="delete trees")
    rm.add_argument("-f", "--force", action="store_true", help="ignore paths that do not exist")
    rm.add_argument(
        "--no-preserve-root", dest="top", action="store_true", help="also a filesystem's top (/, mem://, s3://bucket)"
    )
    rm.add_argument("uris", nargs="+", metavar="URI")
    mkdir = command("mkdir", "make directories")
    mkdir.add_argument("-p", "--parents", action="store_true", help="make parents; no error if it exists")
    mkdir.add_argument("uris", nargs="+", metavar="URI")
    glob = command("glob", "list what matches a pattern")
    glob.add_argument("-r", "--recursive", action="store_true", help="** spans folder levels")
    glob.add_argument("pattern")
    command("exists", "say which paths exist").add_argument("uris", nargs="+", metavar="URI")
    demo = command("demo", "show asyncfs at work on the built-in plugins")
    demo.add_argument("--files", type=int, default=2000, help="files in the dataset (2000)")
    return parser


# ---- shared pieces -----------------------------------------------------------------


def _fmt_time(nsec: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(nsec / 1e9))


def _fmt_size(size: int, human: bool) -> str:
    if not human:
        return str(size)
    value = float(size)
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")


async def _expand(env: Env, patterns: Sequence[str]) -> list[str]:
    """Each argument, or what it matches if it is a pattern; a pattern that
    matches nothing is an error, as in gsutil."""
    found: list[str] = []
    for pattern in patterns:
        if not has_glob_meta(pattern):
            found.append(pattern)
            continue
        matches = await env.glob(pattern, recursive="**" in pattern.split("/"))
        if not matches:
            raise CommandError(f"{pattern} matched no objects or files")
        found += matches
    return found


def _basename(uri: str) -> str:
    return uri.rstrip("/").rpartition("/")[2]


async def _refuse_to_remove(env: Env, uri: str, top: bool) -> None:
    """GNU rm's guards, on the path the plugin will see: never an operand
    whose last name is ``.`` or ``..`` (``rm -r /tmp/..`` would empty
    ``/``), and a filesystem's top (``/``, ``mem://``, an object store's
    bucket), however spelled (``/tmp/x/../``, ``../../..`` from near it),
    only with ``--no-preserve-root``."""
    if parse_uri(uri).path.rstrip("/").rpartition("/")[2] in (".", ".."):
        raise CommandError(f"refusing to remove '.' or '..': {uri}")
    if top:
        return
    path = await env.translate_name(uri)
    if not path.startswith("/"):  # relative: it reaches the top through the working directory
        path = os.path.abspath(path)
    segments = [part for part in path.split("/") if part not in ("", ".")]
    if not segments or (env.filesystem(uri).network and len(segments) == 1):
        what = "a bucket" if segments else "the top of its filesystem"
        raise CommandError(f"{uri} is {what}; add --no-preserve-root to delete everything in it")


# ---- the commands ------------------------------------------------------------------


async def _plugins(env: Env) -> int:
    print(f"asyncfs {__version__}, core ABI {core_abi_version()}")
    print(f"{'scheme':<8} {'plugin':<8} {'version':<8} {'API':<9} {'offers':<7} {'transactions':<13} library")
    for info in env.plugins():
        meta = info.metadata
        for scheme in info.schemes:
            fs = env.registry.get(scheme)
            api = "/".join(str(v) for v in fs.api_versions.values())
            offers = f"{len(fs.offered_ops())}/{len(ModularFileSystem.abi_ops())}"
            txn = "native" if fs.offers_transactions() else "generic"
            row = f"{scheme or '(bare)':<8} {meta.name:<8} {meta.version or '-':<8} {api:<9} {offers:<7} {txn:<13}"
            print(f"{row} {meta.library}")
    for name, reason in env.registry.unavailable().items():
        print(f"{name:<8} {name:<8} {'-':<8} {'-':<9} {'-':<7} {'-':<13} unavailable: {reason}")
        if name in HOW_TO_GET:
            print(f"{'':<8} to get it: {HOW_TO_GET[name]}")
    return 0


async def _ls(env: Env, uris: Sequence[str], long: bool, recursive: bool, human: bool) -> int:
    async def show(path: str, label: str) -> None:
        if long:
            stats = await env.stat(path)
            kind = "d" if stats.is_directory else "-"
            print(f"{kind} {_fmt_size(stats.length, human):>12} {_fmt_time(stats.mtime_nsec)} {label}")
        else:
            print(label)

    for uri in await _expand(env, uris):
        if not await env.isdir(uri):
            await show(uri, uri)  # a file lists itself; a missing one is an error
            continue
        if not recursive:
            for name in await env.listdir(uri):
                await show(join(uri, name), name)
            continue
        async for directory, dirs, files in env.walk(uri):
            for name in sorted(dirs + files):
                await show(join(directory, name), join(directory, name))
    return 0


async def _du(env: Env, uris: Sequence[str], summarize: bool, human: bool) -> int:
    for uri in await _expand(env, uris):
        if not await env.isdir(uri):
            print(f"{_fmt_size(await env.size(uri), human)}\t{uri}")
            continue
        totals: dict[str, int] = {}
        order: list[str] = []
        async for directory, _, files in env.walk(uri):
            stats = await asyncio.gather(*(env.stat(join(directory, name)) for name in files))
            totals[directory] = sum(s.length for s in stats)  # a link to a folder counts 0
            order.append(directory)
        for directory in reversed(order):  # children before their parents
            parent = directory.rstrip("/").rpartition("/")[0]
            if directory != uri and parent in totals:
                totals[parent] += totals[directory]
            if not summarize:
                print(f"{_fmt_size(totals[directory], human)}\t{directory}")
        if summarize:
            print(f"{_fmt_size(totals[uri], human)}\t{uri}")
    return 0


async def _stat(env: Env, uri: str) -> int:
    stats = await env.stat(uri)
    print(f"{uri}\n  kind: {'directory' if stats.is_directory else 'file'}\n  size: {stats.length}")
    print(f"  modified: {_fmt_time(stats.mtime_nsec)}")
    return 0


async def _cat(env: Env, uris: Sequence[str], decompress: bool) -> int:
    """Each file's bytes to standard output, written from a thread: a pipe
    whose reader is slow (``| less``) blocks the write, never the loop."""
    out = sys.stdout.buffer
    for uri in uris:
        async with env.open(uri, "rb", compression="infer" if decompress else None) as f:
            while chunk := await f.read(1 << 20):
                await anyio.to_thread.run_sync(out.write, chunk)
    await anyio.to_thread.run_sync(out.flush)
    return 0


async def _targets(env: Env, sources: Sequence[str], dst: str) -> list[tuple[str, str]]:
    """(source, target) pairs: into dst when there are several sources or
    dst is a folder (or ends in /), else dst itself."""
    expanded = await _expand(env, sources)
    into = len(expanded) > 1 or dst.endswith("/") or await env.isdir(dst)
    return [(src, join(dst, _basename(src)) if into else dst) for src in expanded]


async def _cp(env: Env, sources: Sequence[str], dst: str, args: argparse.Namespace) -> int:
    from tqdm import tqdm  # noqa: PLC0415 (only copies draw a bar)

    pairs = await _targets(env, sources, dst)
    folders = [src for src, _ in pairs if await env.isdir(src)]
    if folders and not args.recursive:
        raise CommandError(f"{folders[0]} is a directory (use -r)")
    if args.dry_run:
        for src, target in pairs:
            print(f"would copy {src} -> {target}")
        return 0
    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    jobs = asyncio.Semaphore(max(args.jobs, 1))
    with tqdm(unit="B", unit_scale=True, disable=not show, file=sys.stderr) as bar:

        async def one(src: str, target: str) -> None:
            async with jobs:
                await env.copy(src, target, recursive=src in folders, progress=bar.update)

        await asyncio.gather(*(one(src, target) for src, target in pairs))
    return 0


async def _mv(env: Env, sources: Sequence[str], dst: str, dry_run: bool) -> int:
    for src, target in await _targets(env, sources, dst):
        if dry_run:
            print(f"would move {src} -> {target}")
        elif env.filesystem(src) is env.filesystem(target):
            await env.rename(src, target)  # a folder too
        else:  # streamed across schemes, then the source removed
            folder = await env.isdir(src)
            await env.copy(src, target, recursive=folder)
            await (env.rmtree(src) if folder else env.rm(src))
    return 0


async def _rm(env: Env, uris: Sequence[str], recursive: bool, force: bool, top: bool) -> int:
    for uri in uris:
        await _refuse_to_remove(env, uri, top)  # as typed, and each match of a pattern
    for uri in await _expand(env, uris):
        await _refuse_to_remove(env, uri, top)
        try:
            await env.rm(uri)  # a file, or a link (to a folder too), as rm removes it
            continue
        except NotFoundError:
            if force:
                continue
            if not await env.isdir(uri):
                raise
        except StatusError:
            if not await env.isdir(uri):
                raise
        if not recursive:
            raise CommandError(f"{uri} is a directory (use -r)")
        await env.rmtree(uri)
    return 0


async def _mkdir(env: Env, uris: Sequence[str], parents: bool) -> int:
    for uri in uris:
        await (env.makedirs(uri) if parents else env.mkdir(uri))
    return 0


async def _glob(env: Env, pattern: str, recursive: bool) -> int:
    matches = await env.glob(pattern, recursive=recursive)
    if not matches:
        raise CommandError(f"{pattern} matched no objects or files")
    for match in matches:
        print(match)
    return 0


async def _exists(env: Env, uris: Sequence[str]) -> int:
    found = await env.files_exist(list(uris))
    for uri, present in zip(uris, found, strict=True):
        print(f"{'yes' if present else 'no '} {uri}")
    return 0 if all(found) else EXIT_FAILED


async def _doctor(env: Env) -> int:
    print(report(env.registry))
    return 0


async def _demo(env: Env, files: int) -> int:
    from .demo import run_demo  # noqa: PLC0415 (only the demo needs it)

    return await run_demo(env, files=files)


# Each command: its parsed arguments to the coroutine that runs it.
_COMMANDS: dict[str, Callable[[Env, argparse.Namespace], Awaitable[int]]] = {
    "plugins": lambda env, a: _plugins(env),
    "doctor": lambda env, a: _doctor(env),
    "ls": lambda env, a: _ls(env, a.uris, a.long, a.recursive, a.human),
    "du": lambda env, a: _du(env, a.uris, a.summarize, a.human),
    "stat": lambda env, a: _stat(env, a.uri),
    "cat": lambda env, a: _cat(env, a.uris, a.decompress),
    "cp": lambda env, a: _cp(env, a.sources, a.dst, a),
    "mv": lambda env, a: _mv(env, a.sources, a.dst, a.dry_run),
    "rm": lambda env, a: _rm(env, a.uris, a.recursive, a.force, a.top),
    "mkdir": lambda env, a: _mkdir(env, a.uris, a.parents),
    "glob": lambda env, a: _glob(env, a.pattern, a.recursive),
    "exists": lambda env, a: _exists(env, a.uris),
    "demo": lambda env, a: _demo(env, a.files),
}


async def _run(args: argparse.Namespace) -> int:
    async with Env() as env:
        for library in [*args.plugin, *args.plugin_after]:
            await env.load_plugin(library)
        return await _COMMANDS[args.command](env, args)


def _quiet_stdout() -> None:
    """The reader of standard output went away: point it at /dev/null so
    that the interpreter's own flush at exit has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _standard_streams(args: argparse.Namespace) -> None:
    """``-`` names standard input among cat's and cp's sources (as for cat,
    and aws s3 cp): /dev/stdin, which asyncfs reads onward. As cp's DST it
    is standard output, which cp then writes as cat does: into the stream,
    never replacing or cutting the file a shell sent it to (``>>``)."""
    if args.command == "cp" and args.dst == "-":
        if args.recursive or args.dry_run:
            raise CommandError("- (standard output) takes files, without -r or -n")
        args.command, args.uris, args.decompress = "cat", args.sources, False
    if args.command == "cat":
        args.uris = [_standard_input(uri) for uri in args.uris]
    elif args.command == "cp":
        args.sources = [_standard_input(uri) for uri in args.sources]


def _standard_input(arg: str) -> str:
    if arg != "-":
        return arg
    if not os.path.exists("/dev/stdin"):
        raise CommandError("- (standard input) is /dev/stdin, which this system does not have")
    return "/dev/stdin"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        _standard_streams(args)
        return asyncio.run(_run(args))
    except BrokenPipeError:  # before OSError, of which it is one
        _quiet_stdout()
        return 0
    except (CommandError, AsyncFSError, OSError) as exc:  # one line, no traceback
        print(f"asyncfs {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
