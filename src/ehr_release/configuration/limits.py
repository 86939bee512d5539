"""The one way an owner's configuration text becomes data: YAML within a size and a depth.

Why: configuration files (ArtUC's configuration and constraints, its YAML hierarchies,
disassociation's policies, DiffGen's taxonomies) come from outside the code. A 2 KB file of
1,000 nested brackets ended in a ``RecursionError`` traceback — PyYAML's pure-Python
composer recurses once per level, and so does every parser that walks the result — and
nothing bounded the size either. Here the size is checked before parsing
(:data:`MAX_CONFIG_BYTES`), the nesting while the YAML events stream past
(:data:`MAX_DEPTH`; the event parser does not recurse), and the loaded value once more
without recursion, since aliases can nest a small file's nodes far deeper than its text
shows (and can make a structure contain itself). Every refusal is one
:class:`~ehr_release.core.errors.ConfigError` line naming the file.

No real configuration comes near the limits: the shipped ones are a few KB and six levels
deep; a hierarchy written as a YAML tree adds one level per hierarchy level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ehr_release.core.errors import ConfigError

#: Largest configuration file read, in bytes.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: Deepest nesting of mappings and lists in a configuration.
MAX_DEPTH = 32

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def read_config_text(path: Path, where: str | None = None) -> str:
    """The UTF-8 text of a configuration file, refused unread if it is too large.

    ``OSError`` and ``UnicodeDecodeError`` are left to the caller, which words them.
    """
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{where or path}: {size} bytes is larger than a configuration may "
                          f"be ({MAX_CONFIG_BYTES} bytes)")
    return path.read_text(encoding="utf-8")


def load_config_yaml(text: str, where: str) -> Any:
    """``yaml.safe_load(text)`` within :data:`MAX_CONFIG_BYTES` and :data:`MAX_DEPTH`.

    ``yaml.YAMLError`` is left to the caller (each words its own "not valid YAML").
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{where}: {size} bytes is larger than a configuration may be "
                          f"({MAX_CONFIG_BYTES} bytes)")
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(where)
        elif isinstance(event, _CLOSE):
            depth -= 1
    data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader (C or Python)
    check_depth(data, where)
    return data


def check_depth(data: Any, where: str) -> None:
    """Refuse a loaded value nested deeper than :data:`MAX_DEPTH` or containing itself.

    Iterative (an explicit stack), so the check itself cannot overflow, and each node is
    measured once however many aliases share it, so a small file of aliases to aliases
    cannot make the walk exponential.
    """
    if not isinstance(data, dict | list):
        return
    heights: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path: meeting one again is a cycle
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, measured = stack.pop()
        children = [c for c in (node.values() if isinstance(node, dict) else node)
                    if isinstance(c, dict | list)]
        key = id(node)
        if measured:
            height = 1 + max((heights[id(c)] for c in children), default=0)
            if height > MAX_DEPTH:
                raise _too_deep(where)
            open_nodes.discard(key)
            heights[key] = height
            continue
        if key in heights:
            continue
        if key in open_nodes:
            raise ConfigError(f"{where}: an alias makes the configuration contain itself")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children)


def _too_deep(where: str) -> ConfigError:
    return ConfigError(f"{where}: nested deeper than {MAX_DEPTH} levels of mappings and "
                       "lists; a configuration is never that deep")
