"""Environment-backed settings: frozen dataclasses whose fields name their MNEMO_* variable."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class SettingsError(ValueError):
    """One or more environment variables are missing or malformed; the message lists them all."""


@dataclasses.dataclass(frozen=True)
class EnvVar:
    """How one settings field is read: variable name, default, parser and documentation."""

    name: str
    default: Any
    doc: str
    parse: Callable[[str], Any]
    shown_default: str | None = None


def parse_bool(raw: str) -> bool:
    """Accepts the usual spellings of true and false, refuses anything else."""
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def parse_positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError(f"must be positive, got {raw!r}")
    return value


def parse_non_negative_float(raw: str) -> float:
    value = float(raw)
    if value < 0:
        raise ValueError(f"must not be negative, got {raw!r}")
    return value


def parse_positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(f"must be a positive integer, got {raw!r}")
    return value


def parse_non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(f"must be a non-negative integer, got {raw!r}")
    return value


def parse_port(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a port number 0-65535, got {raw!r}")
    return value


def one_of(*choices: str) -> Callable[[str], str]:
    """A parser that accepts only the given (case-insensitive) choices."""

    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}; got {raw!r}")
        return value

    return parse


def setting(
    name: str,
    default: Any,
    doc: str,
    parse: Callable[[str], Any] = str,
    shown_default: str | None = None,
) -> Any:
    """Declares a settings field read from the environment variable `name`."""
    var = EnvVar(name=name, default=default, doc=doc, parse=parse, shown_default=shown_default)
    return dataclasses.field(default=default, metadata={"env": var})


def env_vars(cls: type) -> list[EnvVar]:
    """The environment variables a settings class reads, in declaration order."""
    return [f.metadata["env"] for f in dataclasses.fields(cls) if "env" in f.metadata]


def _load(cls: type[T], env: Mapping[str, str], problems: list[str]) -> T | None:
    """`cls` from `env`, adding what is wrong to `problems` (and returning None) instead of raising."""
    values: dict[str, Any] = {}
    before = len(problems)
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        var: EnvVar | None = field.metadata.get("env")
        if var is None or var.name not in env:
            continue
        raw = env[var.name]
        try:
            values[field.name] = var.parse(raw)
        except ValueError as exc:
            problems.append(f"{var.name}: {exc}")
    if len(problems) > before:
        return None
    instance = cls(**values)
    validate = getattr(instance, "validate", None)
    if validate is not None:
        try:
            validate()
        except SettingsError as exc:
            problems.append(str(exc).removeprefix("invalid configuration: "))
            return None
    return instance


def load(cls: type[T], environ: Mapping[str, str] | None = None) -> T:
    """Builds `cls` from the environment, reporting every malformed variable at once."""
    return load_all((cls,), environ)[0]


def load_all(classes: Sequence[type], environ: Mapping[str, str] | None = None) -> tuple[Any, ...]:
    """Builds every settings class a process uses, reporting every problem across all of them at once."""
    env = os.environ if environ is None else environ
    problems: list[str] = []
    loaded = tuple(_load(cls, env, problems) for cls in classes)
    if problems:
        raise SettingsError("invalid configuration: " + "; ".join(problems))
    return loaded


def markdown_table(classes: tuple[type, ...]) -> str:
    """The README's configuration table: every variable, its default and what it does."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for cls in classes:
        for var in env_vars(cls):
            default = var.shown_default if var.shown_default is not None else f"`{var.default}`"
            if var.shown_default is None and var.default == "":
                default = "(empty)"
            rows.append(f"| `{var.name}` | {default} | {var.doc} |")
    return "\n".join(rows)
