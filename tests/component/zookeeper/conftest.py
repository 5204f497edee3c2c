"""Tests against a real ZooKeeper server process (``tests/zk_server.py``): one server for the whole session,
each test in a chroot of its own; tests that stop or restart the server take ``own_zk_server``."""

from __future__ import annotations

from tests.zk_server import own_zk_server, zk_proxy, zk_server

__all__ = ["own_zk_server", "zk_proxy", "zk_server"]
