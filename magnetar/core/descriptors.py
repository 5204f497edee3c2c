"""File descriptors: the process limit raised at startup, running out of them reported loudly.

The soft ``RLIMIT_NOFILE`` is raised to the hard limit at startup, and the ledger files kept open
(``openFileLimit``) are capped below it, leaving a quarter of the limit (at least
``OPEN_FILES_HEADROOM_MIN``) for sockets and the stores' other files: under a 256-descriptor limit the
default 1,024 let ledger files take every descriptor, and new producers timed out. Running out anyway (EMFILE/ENFILE)
otherwise shows up only as unrelated failures (a refused connection, a ledger that cannot be read), so it
is logged as one clear line, at most once per interval, wherever it is met.
"""

from __future__ import annotations

import errno
import logging
import resource

from magnetar.core.logs import RateLimitedLog

log = logging.getLogger("magnetar.descriptors")

EMFILE_LOG_INTERVAL_S = 10.0
OPEN_FILES_HEADROOM_MIN = 64  # descriptors left for sockets, the metadata store, logs
OPEN_FILES_MIN = 16
_emfile_log = RateLimitedLog(log, EMFILE_LOG_INTERVAL_S)


def report_if_out_of_descriptors(exc: BaseException | None) -> bool:
    """Log loudly if ``exc`` is EMFILE/ENFILE (out of file descriptors); True if it was."""
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        _emfile_log.warning(
            "OUT OF FILE DESCRIPTORS (%s): the process may hold %d (hard limit %d); new connections and "
            "ledger files fail until some close. Raise the limit (ulimit -n) or lower brokerMaxConnections",
            errno.errorcode.get(exc.errno, exc.errno), soft, hard)
        return True
    return False


def raise_descriptor_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (capped for 'unlimited'); returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the file-descriptor limit from %d to %d: %s", soft, target, exc)
            return soft
        log.info("raised the file-descriptor limit from %d to %d", soft, target)
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def capped_open_files(configured: int, soft_limit: int | None = None) -> int:
    """``openFileLimit`` capped at the descriptor limit minus headroom (logged when it is lowered)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0] if soft_limit is None else soft_limit
    if soft == resource.RLIM_INFINITY:
        return configured
    cap = max(OPEN_FILES_MIN, soft - max(OPEN_FILES_HEADROOM_MIN, soft // 4))
    if configured <= cap:
        return configured
    log.warning("openFileLimit=%d lowered to %d: the process may hold %d file descriptors and keeps %d for "
                "sockets and other files", configured, cap, soft, soft - cap)
    return cap
