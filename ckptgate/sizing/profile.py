"""Loading a cluster profile: shipped names or paths, YAML, ``--set`` overrides, dump.

The schema is sizing.schema, the generic reader sizing.reader; this is the only module in
``sizing`` that does I/O: it reads the profile file.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import typing
from pathlib import Path
from typing import Any

import yaml

from ckptgate.sizing.architecture import Architecture
from ckptgate.sizing.reader import Context, ProfileError, build, dump, key_paths
from ckptgate.sizing.schema import (
    CheckpointSpec,
    ClusterSpec,
    DcpSpec,
    FailureSpec,
    ModelSpec,
    Parallelism,
    Profile,
    RestartSpec,
    RetentionSpec,
    RunSpec,
    cross_check,
)

SHIPPED_PROFILES: tuple[str, ...] = (
    "7b",
    "70b",
    "405b",
    "405b-meta",
    "405b-fsdp",
    "tmpfs",
    "mlperf-8b",
    "mlperf-70b",
    "mlperf-405b",
    "mlperf-1t",
)

__all__ = [
    "SHIPPED_PROFILES",
    "Architecture",
    "CheckpointSpec",
    "ClusterSpec",
    "DcpSpec",
    "FailureSpec",
    "ModelSpec",
    "Parallelism",
    "Profile",
    "ProfileError",
    "RestartSpec",
    "RetentionSpec",
    "RunSpec",
    "dump_profile",
    "load_profile",
    "profile_from_dict",
    "profile_to_dict",
]


def _parse_override(text: str) -> tuple[list[str], Any]:
    key, sep, value_text = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ProfileError(
            f"--set {text}: not of the form key.path=value; allowed: e.g. "
            "--set checkpoint.interval_s='10 min' or --set cluster.gpus=1024"
        )
    parts = key.split(".")
    if any(not p.strip() for p in parts):
        raise ProfileError(
            f"--set {text}: empty part in key path {key!r}; allowed: dotted keys such as "
            "model.architecture.hidden"
        )
    try:
        value = yaml.safe_load(value_text) if value_text.strip() else None
    except yaml.YAMLError:
        value = value_text
    return [p.strip() for p in parts], value


def _apply_overrides(raw: dict[str, Any], overrides: typing.Iterable[str]) -> dict[str, str]:
    touched: dict[str, str] = {}
    for text in overrides:
        parts, value = _parse_override(text)
        node = raw
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                prefix = ".".join(parts[: depth + 1])
                raise ProfileError(
                    f"--set {text}: {prefix} is a value ({child!r}), not a section; "
                    f"allowed: set {prefix}=... itself"
                )
            node = child
        node[parts[-1]] = value
        touched[".".join(parts)] = text
    return touched


class _ProfileLoader(yaml.SafeLoader):
    """yaml's SafeLoader, except that a key written twice in one mapping is a ProfileError
    (plain YAML keeps the last one silently). The key path of every mapping is worked out
    from the document's node tree before construction, so the message can name it."""

    def __init__(self, text: str, source: str):
        super().__init__(text)
        self.source = source
        self.paths: dict[int, str] = {}

    def construct_document(self, node: yaml.Node) -> Any:
        self._record_paths(node, "")
        return super().construct_document(node)

    def _record_paths(self, node: yaml.Node, path: str) -> None:
        if id(node) in self.paths:  # an alias seen before
            return
        if isinstance(node, yaml.MappingNode):
            self.paths[id(node)] = path
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    self._record_paths(value_node, _join(path, str(key_node.value)))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._record_paths(item, f"{path}[{index}]")

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *anchor" merges keys that the mapping may override
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = first_line.get(key)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if first is not None:
                path = _join(self.paths.get(id(node), ""), str(key))
                raise ProfileError(
                    f"{self.source}:{line}: duplicate key {path} (first at line {first}); "
                    "allowed: each key once"
                )
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _read_yaml(text: str, source: str) -> dict[str, Any]:
    loader = _ProfileLoader(text, source)
    try:
        raw = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = " ".join(str(exc.problem or exc.context or "").split())
        raise ProfileError(
            f"{source}{position}: malformed YAML: {problem}; allowed: a YAML mapping "
            "(see sizing/profiles/405b.yaml)"
        ) from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{source}: malformed YAML: {' '.join(str(exc).split())}") from None
    finally:
        loader.dispose()
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ProfileError(
            f"{source}: top level is {type(raw).__name__} {raw!r:.40}; allowed: a YAML mapping "
            "with keys model, cluster, failures, checkpoint, restart, retention"
        )
    return raw


def _locate(name_or_path: str | Path) -> tuple[str, str, str]:
    """(text, source for messages, default name) of a shipped name or a path."""
    text_name = str(name_or_path)
    if text_name in SHIPPED_PROFILES:
        resource = importlib.resources.files("ckptgate.sizing") / "profiles" / f"{text_name}.yaml"
        return resource.read_text(encoding="utf-8"), f"sizing/profiles/{text_name}.yaml", text_name
    path = Path(name_or_path)
    try:
        return path.read_text(encoding="utf-8"), str(path), path.stem
    except FileNotFoundError:
        raise ProfileError(
            f"--profile {text_name}: not a shipped cluster profile and no such file; "
            f"allowed: {', '.join(SHIPPED_PROFILES)}, or a path to a YAML file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"--profile {text_name}: cannot read the file: {exc}") from None


def profile_from_dict(
    raw: dict[str, Any],
    source: str = "<dict>",
    overrides: typing.Iterable[str] = (),
    default_name: str = "profile",
) -> Profile:
    """Validate a raw mapping (as YAML gives it), with overrides applied on top."""
    raw = _deep_copy(raw)
    touched = _apply_overrides(raw, overrides)
    given = key_paths(raw)  # the file's keys and the --set ones, before any default
    raw.setdefault("name", default_name)
    raw.setdefault("description", "")
    ctx = Context(source, touched)
    profile = build(ctx, Profile, raw, "")
    profile = dataclasses.replace(profile, source=source, given_keys=given)
    cross_check(ctx, profile)
    return profile


def load_profile(name_or_path: str | Path, overrides: typing.Iterable[str] = ()) -> Profile:
    """Load a shipped cluster profile by name (7b, 70b, 405b, tmpfs) or a YAML file by path,
    then apply ``key.path=value`` overrides. Raises ProfileError with one line on bad input."""
    text, source, default_name = _locate(name_or_path)
    raw = _read_yaml(text, source)
    return profile_from_dict(raw, source, overrides, default_name)


def _deep_copy(raw: Any) -> Any:
    if isinstance(raw, dict):
        return {k: _deep_copy(v) for k, v in raw.items()}
    if isinstance(raw, list):
        return [_deep_copy(v) for v in raw]
    return raw


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """The profile as the YAML schema's plain mapping; loading it gives an equal Profile."""
    return dump(profile)


def dump_profile(profile: Profile) -> str:
    """The profile as YAML text."""
    return yaml.safe_dump(profile_to_dict(profile), sort_keys=False)
