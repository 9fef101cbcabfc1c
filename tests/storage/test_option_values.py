"""``--storage-option`` values typed as s3fs and gcsfs take them, or refused in one line."""

from __future__ import annotations

from typing import Any

import pytest

from ckptgate.storage.option_values import OptionValueError, parse_storage_options, parse_value


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        ("anon=false", {"anon": False}),
        ("anon=True", {"anon": True}),
        ("use_ssl=true", {"use_ssl": True}),
        ("max_concurrency=8", {"max_concurrency": 8}),
        ("listings_expiry_time=2.5", {"listings_expiry_time": 2.5}),
        ("default_block_size=8388608", {"default_block_size": 8388608}),
        ("default_block_size=8 MiB", {"default_block_size": 8 * 2**20}),
        ("block_size=16MB", {"block_size": 16 * 10**6}),
        (
            'client_kwargs={"region_name": "eu-west-1"}',
            {"client_kwargs": {"region_name": "eu-west-1"}},
        ),
        (
            's3_additional_kwargs={"ServerSideEncryption": "AES256"}',
            {"s3_additional_kwargs": {"ServerSideEncryption": "AES256"}},
        ),
        ("endpoint_url=http://127.0.0.1:9000", {"endpoint_url": "http://127.0.0.1:9000"}),
        ("profile=dev", {"profile": "dev"}),
        ("token=null", {"token": None}),
        ("fixed=[1, 2]", {"fixed": [1, 2]}),
        ('version="2"', {"version": "2"}),  # a quoted number stays text
        ("retries=3", {"retries": 3}),
        ("unknown=1e3", {"unknown": 1000.0}),
        ("empty=", {"empty": ""}),
        ("key=a=b", {"key": "a=b"}),
    ],
)
def test_values_are_typed(pair: str, expected: dict[str, Any]) -> None:
    assert parse_storage_options([pair]) == expected


def test_a_later_value_for_a_key_wins() -> None:
    assert parse_storage_options(["anon=true", "anon=false"]) == {"anon": False}


@pytest.mark.parametrize(
    ("pair", "allowed"),
    [
        ("anon=maybe", "anon takes true or false"),
        ("anon=1", "anon takes true or false"),
        ("default_block_size=lots", "takes a size in bytes"),
        ("default_block_size=true", "takes a size in bytes"),
        ("default_block_size=0", "takes a positive size in bytes"),
        ("max_concurrency=2.5", "takes a whole number"),
        ("client_kwargs=eu-west-1", "client_kwargs takes a JSON object"),
        ("client_kwargs=[1]", "client_kwargs takes a JSON object"),
        ('config_kwargs={"retries": ', "not valid JSON"),
        ("timeout=soon", "takes a number of seconds"),
        ("=1", "expected KEY=VALUE"),
        ("anon", "expected KEY=VALUE"),
    ],
)
def test_a_bad_value_names_the_option_the_value_and_what_is_allowed(
    pair: str, allowed: str
) -> None:
    with pytest.raises(OptionValueError) as caught:
        parse_storage_options([pair])
    message = str(caught.value)
    assert message.startswith("--storage-option ") and "\n" not in message
    assert pair in message or repr(pair) in message
    assert allowed in message


def test_invalid_json_lists_what_is_allowed() -> None:
    with pytest.raises(OptionValueError, match="allowed: a number, true or false"):
        parse_value("extra", "{not json")
