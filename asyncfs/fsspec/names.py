"""Storage options as fsspec's own filesystems spell them, for the bridge:
s3fs's names for the s3 plugin's options, gcsfs's for the gs plugin's and
adlfs's for the az plugin's, so that ``storage_options`` written for
``s3://``, ``gs://`` or ``az://`` (pandas, Dask, zarr, a team's config
file) work unchanged with ``asyncfs+s3://``, ``asyncfs+gs://`` and
``asyncfs+az://``. Every other scheme's options are its plugin's names as
they are."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["FOREIGN_NAMES", "plugin_options"]

Put = Callable[[str, Any, str], None]  # (plugin option, value, the name it was given as)

# s3fs's keyword arguments, and the keys of its client_kwargs (boto3's
# client arguments), by the s3 plugin option each sets
_S3FS = {
    "key": "access_key_id",
    "username": "access_key_id",
    "secret": "secret_access_key",
    "password": "secret_access_key",
    "token": "session_token",
    "anon": "anonymous",
    "endpoint_url": "endpoint",
}
_CLIENT = {
    "endpoint_url": "endpoint",
    "region_name": "region",
    "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
}
# botocore's Config arguments (s3fs's config_kwargs), seconds as the
# plugin's milliseconds
_SECONDS = {"connect_timeout": "connect_timeout_ms", "read_timeout": "read_timeout_ms"}
_ADDRESSING = {"path": 1, "virtual": 0}

# s3fs's keyword arguments that change which data is reached, who pays
# for it or how it is stored: asyncfs cannot honour them, and leaving one
# out (as unknown keys are left out) would do something else than asked
_S3FS_REFUSED = {
    "requester_pays": "requests are not sent as requester-pays",
    "version_aware": "reads are pinned by ETag, not object versions",
    "s3_additional_kwargs": "no extra request parameters (such as server-side encryption) are sent",
    "session": "credentials come from the plugin's own chain (key/secret/token, the environment, profiles)",
}

# gcsfs's keyword arguments, by the gs plugin option each sets; its token
# is read by _gcsfs_token
_GCSFS = {"endpoint_url": "endpoint", "project": "project", "default_location": "location"}
# gcsfs's token values that mean the plugin's own credential chain
_GCSFS_DEFAULT_TOKENS = ("google_default", "cloud", "cache")
_GCSFS_REFUSED = {
    "requester_pays": "requests are not billed to the requester's project",
    "session_kwargs": "requests go through the plugin's own HTTP engine, not aiohttp",
}

# adlfs's keyword arguments, by the az plugin option each sets (anon is
# read by _adlfs); the schemes adlfs serves
_ADLFS = {"account_name": "account", "account_key": "account_key", "sas_token": "sas_token"}
_ADLFS |= {"connection_string": "connection_string", "tenant_id": "tenant_id", "client_id": "client_id"}
_ADLFS |= {"client_secret": "client_secret"}
_AZURE = ("az", "abfs", "abfss")
_ADLFS_REFUSED = {
    "credential": "credentials come from the plugin's own chain (pass account_key, sas_token or a token instead)",
    "location_mode": "requests go to the primary endpoint only",
}

# the names each scheme takes besides its plugin's own, and whose they
# are, for error messages
FOREIGN_NAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "s3": ("s3fs", (*_S3FS, "client_kwargs", "config_kwargs")),
    "gs": ("gcsfs", (*_GCSFS, "token")),
    **{scheme: ("adlfs", (*_ADLFS, "anon", "account_host")) for scheme in _AZURE},
}


def plugin_options(scheme: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """options with s3fs's names (scheme ``s3``) as the plugin's. A value
    given twice, under two names, is an InvalidArgumentError."""
    if scheme == "gs":
        return _gcsfs(options)
    if scheme in _AZURE:
        return _adlfs(options)
    if scheme != "s3":
        return dict(options)
    out: dict[str, Any] = {}
    given: dict[str, str] = {}  # by which name each was set

    def put(name: str, value: Any, given_as: str) -> None:
        if name in out and out[name] != value:
            raise InvalidArgumentError(
                f"asyncfs+s3: {given[name]} and {given_as} both set {name!r}, to different values"
            )
        out[name], given[name] = value, given_as

    for key, value in options.items():
        if key == "client_kwargs":
            _client(_mapping(key, value), put)
        elif key == "config_kwargs":
            _config(_mapping(key, value), put)
        elif key in _S3FS_REFUSED:
            raise InvalidArgumentError(f"asyncfs+s3 cannot honour s3fs's {key!r}: {_S3FS_REFUSED[key]}")
        else:
            put(_S3FS.get(key, key), value, key)
    return out


def _mapping(key: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"asyncfs+s3: {key} must be a dict, not {type(value).__name__}")
    return value


def _client(kwargs: Mapping[str, Any], put: Put) -> None:
    for key, value in kwargs.items():
        where = f"client_kwargs[{key!r}]"
        if key in _CLIENT:
            put(_CLIENT[key], value, where)
        elif key == "verify":  # boto3's: a bool, or the CA bundle's path
            if isinstance(value, bool):
                put("verify_tls", value, where)
            else:
                put("ca_bundle", value, where)
        else:
            raise _unknown(where, [*_CLIENT, "verify"])


def _config(kwargs: Mapping[str, Any], put: Put) -> None:
    for key, value in kwargs.items():
        where = f"config_kwargs[{key!r}]"
        if key in _SECONDS:
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InvalidArgumentError(f"asyncfs+s3: {where} must be seconds, not {value!r}")
            put(_SECONDS[key], round(value * 1000), where)
        elif key == "region_name":
            put("region", value, where)
        elif key == "retries":
            for name, count in _mapping(where, value).items():
                if name == "max_attempts":
                    put("max_attempts", count, f"{where}[{name!r}]")
                elif name != "mode":  # botocore's retry mode: the plugin has one
                    raise _unknown(f"{where}[{name!r}]", ["max_attempts", "mode"])
        elif key == "s3":
            for name, style in _mapping(where, value).items():
                if name != "addressing_style":
                    raise _unknown(f"{where}[{name!r}]", ["addressing_style"])
                if style not in (*_ADDRESSING, "auto"):
                    raise InvalidArgumentError(
                        f"asyncfs+s3: {where}['addressing_style'] is 'path', 'virtual' or 'auto', not {style!r}"
                    )
                if style != "auto":  # auto: the plugin's own choice
                    put("path_style", _ADDRESSING[style], f"{where}['addressing_style']")
        else:
            raise _unknown(where, [*_SECONDS, "region_name", "retries", "s3"])


def _unknown(where: str, known: list[str]) -> InvalidArgumentError:
    return InvalidArgumentError(f"asyncfs+s3 does not take {where}; it takes {', '.join(known)} there")


def _gcsfs(options: Mapping[str, Any]) -> dict[str, Any]:
    """gcsfs's names as the gs plugin's; the plugin's own pass as they are."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in _GCSFS_REFUSED:
            raise InvalidArgumentError(f"asyncfs+gs cannot honour gcsfs's {key!r}: {_GCSFS_REFUSED[key]}")
        if key == "token":
            out.update(_gcsfs_token(value))
        else:
            name = _GCSFS.get(key, key)
            if name in out and out[name] != value:
                raise InvalidArgumentError(f"asyncfs+gs: {key} and another name both set {name!r}, to different values")
            out[name] = value
    return out


def _gcsfs_token(token: Any) -> dict[str, Any]:
    """gcsfs's token: None or a keyword naming the default credentials
    (the plugin's chain), "anon", a credentials file's path; any other
    string is a bearer token, as the plugin's own option takes it."""
    if token is None or token in _GCSFS_DEFAULT_TOKENS:
        return {}
    if token == "anon":
        return {"anonymous": 1}
    if isinstance(token, str | os.PathLike):
        path = os.fspath(token)
        if path.endswith(".json") or os.path.isfile(path):
            return {"credentials_file": path}
        if token == "browser":
            raise InvalidArgumentError(
                "asyncfs+gs does not open a browser to log in: run `gcloud auth application-default login`"
            )
        return {"token": path}
    raise InvalidArgumentError(
        f"asyncfs+gs takes gcsfs's token as None, 'anon', 'google_default', 'cloud', a credentials file's path "
        f"or a bearer token, not a {type(token).__name__} (pass the service account file's path instead)"
    )


def _adlfs(options: Mapping[str, Any]) -> dict[str, Any]:
    """adlfs's names as the az plugin's; the plugin's own pass as they are."""
    out: dict[str, Any] = {}
    for key, given in options.items():
        if key in _ADLFS_REFUSED:
            raise InvalidArgumentError(f"asyncfs+az cannot honour adlfs's {key!r}: {_ADLFS_REFUSED[key]}")
        if given is None:
            continue  # adlfs's default: the plugin's
        value: Any
        if key == "anon":
            name, value = "anonymous", int(bool(given))
        elif key == "account_host":  # adlfs: the blob endpoint's host
            name, value = "endpoint", f"https://{given}"
        else:
            name, value = _ADLFS.get(key, key), given
        if name in out and out[name] != value:
            raise InvalidArgumentError(f"asyncfs+az: {key} and another name both set {name!r}, to different values")
        out[name] = value
    return out
