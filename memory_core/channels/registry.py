"""The channels a search runs: every module of :mod:`memory_core.channels` that defines
``CHANNEL`` (a :class:`memory_core.channels.base.Channel`), plus any given to
:func:`register`, in run order (stage, then order, then name).

Adding a channel is a module with its ``CHANNEL`` (and its settings); nothing lists it here.

    >>> [c.name for c in channels()]
    ['dense', 'keyword', 'temporal', 'entity', 'graph', 'recency']
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from memory_core.channels.base import Channel

_added: dict[str, Channel] = {}


@functools.cache
def _builtin() -> tuple[Channel, ...]:
    import memory_core.channels as package

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        channel = getattr(module, "CHANNEL", None)
        if channel is not None:
            found.append(channel)
    return tuple(found)


def channels() -> tuple[Channel, ...]:
    """Every channel, in run order."""
    every = {c.name: c for c in _builtin()}
    every.update(_added)
    return tuple(sorted(every.values(), key=lambda c: (c.stage, c.order, c.name)))


def register(channel: Channel) -> Channel:
    """Add a channel defined outside this package (a name already taken is replaced)."""
    _added[channel.name] = channel
    return channel


def unregister(name: str) -> None:
    """Remove a channel :func:`register` added."""
    _added.pop(name, None)
