"""The ``asyncfs`` command line (also ``python -m asyncfs``).

    asyncfs plugins                 loaded plugins, schemes, metadata, ops offered
    asyncfs doctor                  what was loaded from where, what is missing and why
    asyncfs ls [-l] [-R] URI        list a directory
    asyncfs stat URI                size, kind and modification time
    asyncfs cat URI...              write files to standard output
    asyncfs cp [-r] SRC DST         copy files or trees, across schemes, concurrently
    asyncfs mv SRC DST              rename within a scheme (copy + rm across)
    asyncfs rm [-r] URI...          delete files (or trees)
    asyncfs mkdir [-p] URI...       make directories
    asyncfs glob PATTERN            list matches
    asyncfs exists URI...           say which exist (status 1 if any does not)
    asyncfs demo                    show asyncfs at work on the built-in plugins

``--plugin PATH`` (any number of times) loads a third-party plugin first.
Errors print one line naming the path and the problem, with a non-zero exit
status; there are no tracebacks for user mistakes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

from . import __version__, core_abi_version
from ._uri import join
from .doctor import HOW_TO_GET, report
from .env import Env
from .errors import AsyncFSError
from .filesystem import ModularFileSystem

__all__ = ["main"]

EXIT_ERROR = 2
EXIT_MISSING = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asyncfs", description="Filesystems as native plugins, from the shell.")
    parser.add_argument("--version", action="version", version=f"asyncfs {__version__}")
    parser.add_argument("--plugin", action="append", default=[], metavar="PATH", help="load a plugin library first")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("plugins", help="list the loaded plugins")
    commands.add_parser("doctor", help="what was loaded from where, and what is missing (for bug reports)")
    ls = commands.add_parser("ls", help="list a directory")
    ls.add_argument("-l", "--long", action="store_true", help="sizes, kinds and times")
    ls.add_argument("-R", "--recursive", action="store_true", help="list subdirectories too")
    ls.add_argument("uri")
    commands.add_parser("stat", help="size, kind and modification time").add_argument("uri")
    commands.add_parser("cat", help="write files to standard output").add_argument("uris", nargs="+")
    cp = commands.add_parser("cp", help="copy a file or, with -r, a tree")
    cp.add_argument("-r", "--recursive", action="store_true")
    cp.add_argument("--progress", choices=("auto", "on", "off"), default="auto", help="show a progress bar")
    cp.add_argument("src")
    cp.add_argument("dst")
    mv = commands.add_parser("mv", help="move a file")
    mv.add_argument("src")
    mv.add_argument("dst")
    rm = commands.add_parser("rm", help="delete files")
    rm.add_argument("-r", "--recursive", action="store_true", help="delete trees")
    rm.add_argument("uris", nargs="+")
    mkdir = commands.add_parser("mkdir", help="make directories")
    mkdir.add_argument("-p", "--parents", action="store_true", help="make parents; no error if it exists")
    mkdir.add_argument("uris", nargs="+")
    commands.add_parser("glob", help="list what matches a pattern").add_argument("pattern")
    commands.add_parser("exists", help="say which paths exist").add_argument("uris", nargs="+")
    demo = commands.add_parser("demo", help="show asyncfs at work on the built-in plugins")
    demo.add_argument("--files", type=int, default=2000, help="files in the dataset (2000)")
    return parser


def _fmt_time(nsec: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(nsec / 1e9))


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


async def _ls(env: Env, uri: str, long: bool, recursive: bool) -> int:
    async def show(directory: str, names: list[str]) -> None:
        for name in names:
            path = join(directory, name)
            if long:
                stats = await env.stat(path)
                kind = "d" if stats.is_directory else "-"
                print(f"{kind} {stats.length:>12} {_fmt_time(stats.mtime_nsec)} {path if recursive else name}")
            else:
                print(path if recursive else name)

    if not recursive:
        await show(uri, await env.listdir(uri))
        return 0
    if not await env.isdir(uri):
        await env.listdir(uri)  # raises the right error
    async for directory, dirs, files in env.walk(uri):
        await show(directory, sorted(dirs + files))
    return 0


async def _stat(env: Env, uri: str) -> int:
    stats = await env.stat(uri)
    print(f"{uri}\n  kind: {'directory' if stats.is_directory else 'file'}\n  size: {stats.length}")
    print(f"  modified: {_fmt_time(stats.mtime_nsec)}")
    return 0


async def _cat(env: Env, uris: Sequence[str]) -> int:
    out = sys.stdout.buffer
    for uri in uris:
        async with env.open(uri, "rb") as f:
            while chunk := await f.read(1 << 20):
                out.write(chunk)
    out.flush()
    return 0


async def _cp(env: Env, src: str, dst: str, recursive: bool, progress: str) -> int:
    from tqdm import tqdm  # noqa: PLC0415 (only copies draw a bar)

    show = progress == "on" or (progress == "auto" and sys.stderr.isatty())
    if not await env.isdir(src):
        if await env.isdir(dst):
            dst = join(dst, src.rstrip("/").rpartition("/")[2])
        await env.copy(src, dst)
        return 0
    if not recursive:
        print(f"asyncfs cp: {src} is a directory (use -r)", file=sys.stderr)
        return EXIT_ERROR
    files: list[tuple[str, str]] = []
    async for directory, dirs, names in env.walk(src):
        relative = directory[len(src.rstrip("/")) :].lstrip("/")
        target = join(dst, relative) if relative else dst
        await env.makedirs(target)
        for name in dirs:
            await env.makedirs(join(target, name))
        files += [(join(directory, name), join(target, name)) for name in names]
    sizes = await asyncio.gather(*(env.size(f) for f, _ in files))
    bar = tqdm(total=sum(sizes), unit="B", unit_scale=True, disable=not show, file=sys.stderr)
    copied = 0
    semaphore = asyncio.Semaphore(64)

    async def one(pair: tuple[str, str], size: int) -> None:
        nonlocal copied
        async with semaphore:
            await env.copy(*pair)
        copied += 1
        bar.update(size)
        bar.set_postfix_str(f"{copied}/{len(files)} files", refresh=False)

    with bar:
        await asyncio.gather(*(one(pair, size) for pair, size in zip(files, sizes, strict=True)))
    return 0


async def _mv(env: Env, src: str, dst: str) -> int:
    if env.filesystem(src) is env.filesystem(dst):
        await env.rename(src, dst)
    else:
        await env.copy(src, dst)
        await env.rm(src)
    return 0


async def _rm(env: Env, uris: Sequence[str], recursive: bool) -> int:
    for uri in uris:
        if await env.isdir(uri):
            if not recursive:
                print(f"asyncfs rm: {uri} is a directory (use -r)", file=sys.stderr)
                return EXIT_ERROR
            await env.rmtree(uri)
        else:
            await env.rm(uri)
    return 0


async def _mkdir(env: Env, uris: Sequence[str], parents: bool) -> int:
    for uri in uris:
        await (env.makedirs(uri) if parents else env.mkdir(uri))
    return 0


async def _glob(env: Env, pattern: str) -> int:
    for match in await env.glob(pattern):
        print(match)
    return 0


async def _exists(env: Env, uris: Sequence[str]) -> int:
    found = await env.files_exist(list(uris))
    for uri, present in zip(uris, found, strict=True):
        print(f"{'yes' if present else 'no '} {uri}")
    return 0 if all(found) else EXIT_MISSING


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
    "ls": lambda env, a: _ls(env, a.uri, a.long, a.recursive),
    "stat": lambda env, a: _stat(env, a.uri),
    "cat": lambda env, a: _cat(env, a.uris),
    "cp": lambda env, a: _cp(env, a.src, a.dst, a.recursive, a.progress),
    "mv": lambda env, a: _mv(env, a.src, a.dst),
    "rm": lambda env, a: _rm(env, a.uris, a.recursive),
    "mkdir": lambda env, a: _mkdir(env, a.uris, a.parents),
    "glob": lambda env, a: _glob(env, a.pattern),
    "exists": lambda env, a: _exists(env, a.uris),
    "demo": lambda env, a: _demo(env, a.files),
}


async def _run(args: argparse.Namespace) -> int:
    async with Env() as env:
        for library in args.plugin:
            await env.load_plugin(library)
        return await _COMMANDS[args.command](env, args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except (AsyncFSError, OSError) as exc:  # user mistakes: one line, no traceback
        print(f"asyncfs {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
