"""Job files (like an ``sbatch`` script's directives): a YAML or JSON mapping of the API's job
fields, and the command line's fields on top of them.

.. code-block:: yaml

    # examples/jobs/mnist-like.yaml
    name: mnist-like
    model: resnet18
    batch_size: 64
    iterations: 200
    gpus: 1
    command: python examples/train_mnist_like.py   # or a list: [python, examples/train_mnist_like.py]

Keys are passed to the service as they are (it rejects unknown ones, naming them), so a field a
newer service accepts needs no newer client. A ``command`` given as a list of arguments is joined
with shell quoting (:func:`shlex.join`), the string form the API stores and the agent splits again.

An unquoted date (``name: 2026-12-01``) is read as the text written: YAML 1.1 would make it a date,
which JSON cannot carry, and no job field is a date (YAML 1.2's core schema has no dates either).
A value JSON cannot carry (``.inf``, ``.nan``, a ``!!binary`` or ``!!set``) is a
:class:`UsageError` naming its field (:func:`sharewise.payload.check_fields`).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from sharewise.errors import UsageError
from sharewise.payload import check_fields

#: The job fields the API documents (docs/API.md); the command line has a flag for each.
JOB_FIELDS = (
    "name",
    "model",
    "batch_size",
    "iterations",
    "gpus",
    "gpu_memory_mb",
    "iteration_time_s",
    "command",
    "priority",
    "gpu_types",
)

TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


MERGE_TAG = "tag:yaml.org,2002:merge"


class JobFileLoader(yaml.SafeLoader):
    """PyYAML's safe loader without its implicit timestamps: an unquoted ``2026-12-01`` stays the
    string ``"2026-12-01"`` (an explicit ``!!timestamp`` still makes a date), and refusing a
    mapping that gives a key twice (PyYAML kept the last value: ``name:`` twice went unnoticed)."""

    yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag != TIMESTAMP_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        """The mapping of ``node``; :class:`yaml.constructor.ConstructorError` when one of its own
        keys comes twice (keys a ``<<`` merge brings in may be overridden, as YAML means them)."""
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = first_line.get(key)
                except TypeError:  # an unhashable key: the base class says so
                    continue
                if first is not None:
                    where = f"lines {first} and {line}" if first != line else f"line {line}"
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice ({where}); give it once", key_node.start_mark
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(text: str) -> Any:
    """The YAML value in ``text``, read by :class:`JobFileLoader`. Raises :class:`yaml.YAMLError`."""
    return yaml.load(text, Loader=JobFileLoader)  # a SafeLoader: no Python objects


def read_job_file(path: str) -> dict[str, Any]:
    """The job fields in the YAML or JSON file at ``path`` (``-``: standard input). Raises
    :class:`UsageError` for an unreadable file, invalid YAML/JSON or anything but a mapping."""
    data = _load(path)
    if not isinstance(data, dict):
        kind = "nothing" if data is None else type(data).__name__
        raise UsageError(
            f"job file {path} must hold a mapping of job fields (name: ..., gpus: ...), got {kind}"
        )
    return normalise(data, f"job file {path}")


def read_jobs_file(path: str) -> list[dict[str, Any]]:
    """The jobs in the YAML or JSON file at ``path`` (``-``: standard input): a list of job-field
    mappings, or a mapping with such a list under ``jobs`` (the bulk endpoint's body). Raises
    :class:`UsageError` for an unreadable file, invalid YAML/JSON, an empty list or an entry that
    is not a mapping (naming its index)."""
    data = _load(path)
    if isinstance(data, dict) and set(data) == {"jobs"}:
        data = data["jobs"]
    if not isinstance(data, list) or not data:
        kind = "nothing" if data is None else "an empty list" if data == [] else type(data).__name__
        raise UsageError(f"jobs file {path} must hold a list of jobs (- name: ...), got {kind}")
    jobs = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise UsageError(
                f"jobs file {path}: job {i} is a {type(entry).__name__}, not a mapping of fields"
            )
        jobs.append(normalise(entry, f"jobs file {path}, job {i}"))
    return jobs


def _load(path: str) -> Any:
    """The YAML or JSON value in the file at ``path`` (``-``: standard input; JSON when the name
    ends in ``.json``). Raises :class:`UsageError` for an unreadable file or invalid text."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read job file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"job file {path} is not UTF-8 text") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys) if path.endswith(".json") else read_yaml(text)
    except RecursionError:  # both parsers recurse once per level of nesting
        raise UsageError(f"job file {path} nests lists or mappings too deeply to read") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"job file {path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except _DuplicateKey as exc:
        raise UsageError(
            f"job file {path}: invalid JSON: key {exc.key!r} given twice; give it once"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"job file {path}: invalid YAML{where}: {problem}") from None
    return data


def parse_sets(assignments: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (``--set``), each value read as a YAML scalar (``4`` is a number,
    ``true`` a boolean, ``'4'`` a string, ``2026-12-01`` the text). Raises :class:`UsageError` for
    a pair without ``=`` or a value JSON cannot carry (``.inf``)."""
    fields: dict[str, Any] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set takes KEY=VALUE, got {item!r}")
        try:
            value = read_yaml(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        except RecursionError:  # PyYAML recurses once per level of nesting
            raise UsageError(f"--set {key.strip()}: the value nests too deeply to read") from None
        fields[key.strip()] = value
    return normalise(fields, "--set")


def normalise(fields: Mapping[Any, Any], where: str) -> dict[str, Any]:
    """``fields`` with string keys and a list ``command`` joined (:func:`shlex.join`). Raises
    :class:`UsageError` (its message beginning with ``where``) for a non-string key, a command list
    holding a non-string or a value JSON cannot carry (:func:`sharewise.payload.check_fields`)."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if not isinstance(key, str):
            raise UsageError(f"{where}: field names are strings, got {key!r}")
        out[key] = value
    command = out.get("command")
    if isinstance(command, list):
        if not all(isinstance(arg, str | int | float) for arg in command):
            raise UsageError(f"{where}: command must be a string or a list of strings")
        out["command"] = shlex.join(str(arg) for arg in command)
    check_fields(out, where)
    return out


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Later layers' fields replace earlier ones' (a file, then flags, then ``--set``); ``None``
    values (a flag not given) are skipped."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if v is not None})
    return merged


class _DuplicateKey(ValueError):
    """A JSON object of a job file gives ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` ``object_pairs_hook``: the object, or :class:`_DuplicateKey` for a key given
    twice (``json`` kept the last value silently)."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(key)
        data[key] = value
    return data
