"""Typed ``--storage-option KEY=VALUE`` values, as fsspec's filesystems expect them.

On the command line every value is text, but s3fs and gcsfs take numbers, booleans and
mappings: ``S3FileSystem(anon: bool, use_ssl: bool, default_block_size: int, client_kwargs:
dict, config_kwargs: dict, s3_additional_kwargs: dict, ...)`` (s3fs's API docs), and a string
``"false"`` for ``anon`` is truthy. So a value is read as JSON where it looks like JSON
(``true``, ``false``, ``null``, a number, ``{...}``, ``[...]``, a quoted string), else kept as
text; Python's ``True``/``False``/``None`` are accepted too. Options whose type the libraries
fix are checked against it (``anon=maybe`` is refused, ``default_block_size=8MiB`` is read as
a size in bytes), with one line naming the option, the value and what is allowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ckptgate.sizing.units import UnitError, parse_bytes

__all__ = ["OptionValueError", "parse_storage_options", "parse_value"]

ALLOWED = "a number, true or false, null, a JSON object or list, or text"

BOOL_KEYS = frozenset(
    {"anon", "use_ssl", "requester_pays", "version_aware", "default_fill_cache",
     "default_cache_type_fill", "skip_instance_cache", "use_listings_cache", "fixed_upload_size",
     "cache_regions", "asynchronous", "requests_timeout_disabled", "auto_mkdir", "secure"}
)  # fmt: skip
"""Options that s3fs, gcsfs or fsspec take as booleans."""
BYTES_KEYS = frozenset({"default_block_size", "block_size", "blocksize", "max_buffer_size"})
"""Options that are a size in bytes (a number, or '8 MiB')."""
INT_KEYS = frozenset({"max_concurrency", "retries", "max_retries", "max_pool_connections"})
FLOAT_KEYS = frozenset({"listings_expiry_time", "timeout", "connect_timeout", "read_timeout"})
MAPPING_KEYS = frozenset(
    {"client_kwargs", "config_kwargs", "s3_additional_kwargs", "consistency_kwargs", "headers"}
)
"""Options that are mappings of further parameters (a JSON object)."""

_NUMBER = re.compile(r"^-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)$")
_PYTHON = {"True": True, "False": False, "None": None}


class OptionValueError(ValueError):
    """A storage option's value cannot be used; the message is one line for the user."""


def _refuse(key: str, raw: str, allowed: str) -> OptionValueError:
    return OptionValueError(f"--storage-option {key}={raw}: {allowed}")


def parse_value(key: str, raw: str) -> Any:
    """``raw`` as the type ``key`` takes (see the module docstring)."""
    text = raw.strip()
    value: Any = raw
    if text in _PYTHON:
        value = _PYTHON[text]
    elif text.lower() in ("true", "false", "null") or _NUMBER.match(text):
        value = json.loads(text.lower())
    elif text and text[0] in '{["':
        try:
            value = json.loads(text)
        except ValueError as error:
            raise _refuse(key, raw, f"not valid JSON ({error}); allowed: {ALLOWED}") from None
    return _checked(key, raw, value)


def _checked(key: str, raw: str, value: Any) -> Any:
    if key in BOOL_KEYS and not isinstance(value, bool):
        raise _refuse(key, raw, f"{key} takes true or false")
    if key in BYTES_KEYS:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise _refuse(key, raw, f"{key} takes a size in bytes (8388608 or '8 MiB')")
        try:
            size = parse_bytes(value, f"--storage-option {key}")
        except UnitError:
            raise _refuse(key, raw, f"{key} takes a size in bytes (8388608 or '8 MiB')") from None
        if size < 1:
            raise _refuse(key, raw, f"{key} takes a positive size in bytes")
        return size
    if key in INT_KEYS and (isinstance(value, bool) or not isinstance(value, int)):
        raise _refuse(key, raw, f"{key} takes a whole number")
    if key in FLOAT_KEYS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _refuse(key, raw, f"{key} takes a number of seconds")
        return float(value)
    if key in MAPPING_KEYS and not isinstance(value, dict):
        example = '{"region_name": "eu-west-1"}'
        raise _refuse(key, raw, f"{key} takes a JSON object, e.g. {key}='{example}'")
    return value


def parse_storage_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings (repeatable option) to typed storage options; a later key wins."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OptionValueError(f"--storage-option {pair!r}: expected KEY=VALUE")
        options[key] = parse_value(key, raw)
    return options
