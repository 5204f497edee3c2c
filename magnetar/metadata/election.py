"""Leader election on a coordination store (Pulsar's ``LeaderElection``; the load manager's key is
``/loadbalance/leader``).

The leader is whoever holds the ephemeral key; its value says who that is (the broker's URLs). Every
candidate watches the key: when it goes (the leader resigned, or its session ended), each candidate tries to
create it and one wins. A candidate finding its own value under an older session of its own replaces it,
as a lock does. On SESSION_LOST the leader steps down at once (it cannot know whether its key still stands,
and two leaders acting on stale views is what the step-down avoids) and elects again when the session is
re-established.

Lifecycle (``ELECTION_TRANSITIONS``): ``NO_LEADER``, ``LEADING``, ``FOLLOWING`` move among each other;
``CLOSED`` ends it. ``on_change`` hears every state change. Knows nothing of storage, ledgers or the broker.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable

from magnetar.core.lifecycle import Transitions
from magnetar.metadata import _rules
from magnetar.metadata.api import BadVersion, MetadataError, MetadataStoreClosed, NotFound, WatchEvent
from magnetar.metadata.coordination import CoordinationStore, Ownership, SessionEvent

logger = logging.getLogger("magnetar.metadata.election")

LEADER_KEY = "/loadbalance/leader"
ELECT_ATTEMPTS_MAX = 16  # each attempt follows a concurrent change of the key
ELECTIONS_QUEUED_MAX = 64


class ElectionState(enum.Enum):
    NO_LEADER = "no-leader"
    LEADING = "leading"
    FOLLOWING = "following"
    CLOSED = "closed"


_OPEN = (ElectionState.NO_LEADER, ElectionState.LEADING, ElectionState.FOLLOWING)
ELECTION_TRANSITIONS = Transitions(ElectionState, {
    **{state: {*_OPEN, ElectionState.CLOSED} - {state} for state in _OPEN},
    ElectionState.CLOSED: set(),
})


class LeaderElection:
    """One candidate in the election at ``key``, proposing ``value``. Call :meth:`start`."""

    def __init__(
        self,
        store: CoordinationStore,
        value: bytes,
        *,
        key: str = LEADER_KEY,
        on_change: Callable[[ElectionState], None] | None = None,
    ) -> None:
        _rules.validate_key(key, allow_root=False)
        self.store = store
        self.key = key
        self.value = value
        self.state = ElectionState.NO_LEADER
        self.leader: bytes | None = None  # the leader's value, as last seen
        self._on_change = on_change
        self._version = -1
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._unwatch: Callable[[], None] | None = None
        self._unlisten: Callable[[], None] | None = None

    @property
    def leading(self) -> bool:
        return self.state is ElectionState.LEADING

    async def start(self) -> ElectionState:
        """Join the election; returns the state it settled in (LEADING or FOLLOWING, or NO_LEADER when the
        store cannot be reached yet: a later event elects again)."""
        self._unwatch = self.store.watch(self.key, self._on_watch)
        self._unlisten = self.store.listen(self._on_session)
        await self._elect()
        return self.state

    def _set_state(self, state: ElectionState) -> None:
        if state is self.state:
            return
        self.state = ELECTION_TRANSITIONS.check(self.state, state, f"election {self.key}")
        logger.info("election %s: %s", self.key, state.value)
        if self._on_change is not None:
            try:
                self._on_change(state)
            except Exception:
                logger.exception("election state callback failed on %s", state.value)

    def _on_watch(self, event: WatchEvent) -> None:
        if event.key == self.key:
            self._schedule()

    def _on_session(self, event: SessionEvent) -> None:
        if self.state is ElectionState.CLOSED:
            return
        if event is SessionEvent.SESSION_LOST:
            if self.state is ElectionState.LEADING:
                self._set_state(ElectionState.NO_LEADER)
        elif event in (SessionEvent.SESSION_REESTABLISHED, SessionEvent.RECONNECTED):
            self._schedule()

    def _schedule(self) -> None:
        if self.state is ElectionState.CLOSED:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._elect_queued())

    async def _elect_queued(self) -> None:
        for _ in range(ELECTIONS_QUEUED_MAX):
            self._again = False
            await self._elect()
            if not self._again:
                return

    async def _elect(self) -> None:
        try:
            for _ in range(ELECT_ATTEMPTS_MAX):
                if self.state is ElectionState.CLOSED:
                    return
                if await self._attempt():
                    return
            logger.warning("election %s: the key keeps changing; the next change elects again", self.key)
        except MetadataStoreClosed:
            return
        except MetadataError as exc:
            logger.warning("election %s: store unreachable (%s); elected again on reconnection", self.key, exc)

    async def _attempt(self) -> bool:
        """One look at the key: True when settled (leading or following), False to look again."""
        found = await self.store.get_owned(self.key)
        try:
            if found is None:
                record = await self.store.create(self.key, self.value, ephemeral=True)
                self._version, self.leader = record.version, self.value
                self._set_state(ElectionState.LEADING)
                return True
            record, owner = found
            if owner is Ownership.THIS_SESSION and record.value == self.value:
                self._version, self.leader = record.version, self.value
                self._set_state(ElectionState.LEADING)
                return True
            if owner is not Ownership.PERSISTENT and record.value == self.value:
                await self.store.delete(self.key, record.version)  # ours, from an older session
                return False
            self.leader = record.value
            self._set_state(ElectionState.FOLLOWING)
            return True
        except (BadVersion, NotFound):
            return False

    async def read_leader(self) -> bytes | None:
        """The current leader's value from the store, or None."""
        record = await self.store.get(self.key)
        return None if record is None else record.value

    async def close(self) -> None:
        """Leave the election; a leader deletes its key so another takes over at once."""
        if self.state is ElectionState.CLOSED:
            return
        was_leading = self.leading
        self._set_state(ElectionState.CLOSED)
        for stop in (self._unwatch, self._unlisten):
            if stop is not None:
                stop()
        if self._task is not None:
            self._task.cancel()
        if was_leading:
            try:
                await self.store.delete(self.key, self._version)
            except (NotFound, BadVersion):
                pass
            except MetadataError as exc:
                logger.warning("election %s: resigning failed (%s); the session's end removes the key",
                               self.key, exc)
