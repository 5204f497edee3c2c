"""``magnetar standalone``: one process with embedded storage and metadata, the binary protocol server
and the HTTP server, stopped cleanly by SIGTERM or SIGINT.

This module assembles the process: the stores, the broker's parts (``app/broker.py``), the coordinators and
PIP-186's deletion service, then the network edges; it holds no broker logic of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import math
import random
import signal
import socket
import sqlite3
import ssl
from typing import cast

from aiohttp import web

from magnetar.app import cluster as cluster_app
from magnetar.app.broker import build_broker, start_broker, stop_broker
from magnetar.app.data_dir import DataDirInUse, DataDirLock
from magnetar.app.settings import StandaloneSettings
from magnetar.broker.cluster.listeners import parse_listeners
from magnetar.broker.cluster.parts import ClusterParts
from magnetar.broker.cluster.records import ListenerAddress
from magnetar.broker.compaction.state import referenced_ledgers
from magnetar.broker.deletion.service import LedgerDeletionService, OffloadStoreDeleter
from magnetar.broker.parts import Broker
from magnetar.broker.replication.api import RemoteProducerFactory
from magnetar.broker.transactions.api import TxnParticipants
from magnetar.broker.transactions.batching import LogFamily
from magnetar.broker.transactions.coordinator import EndPolicy
from magnetar.broker.transactions.coordinators import (
    CoordinatorSettings,
    TransactionCoordinatorService,
)
from magnetar.core import crashpoints
from magnetar.core.clock import SystemClock
from magnetar.core.descriptors import capped_open_files, raise_descriptor_limit, report_if_out_of_descriptors
from magnetar.core.watchdog import LoopWatchdog
from magnetar.ledger.factory import LedgerFactory
from magnetar.ledger.id_counter import MetadataLedgerIdAllocator
from magnetar.metadata.api import MetadataError, MetadataStore
from magnetar.metadata.coordination import CoordinationStore, SessionEvent
from magnetar.metadata.settings import SessionExpiredPolicy, StoreKind, sqlite_path
from magnetar.metadata.settings import open_store as open_metadata_store
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.resources import MetadataResources
from magnetar.server.auth import SecurityContext
from magnetar.server.auth.tls import CertReloader
from magnetar.server.binary.listener import BinaryListener
from magnetar.server.binary.revalidate import PermissionWatcher
from magnetar.server.http.app import web_app
from magnetar.server.http.handoff import HttpHandoff
from magnetar.server.http.limits import HttpConnectionReaper, limit_bad_request_logging
from magnetar.server.http.lookup import BROKER_PORT, TLS_PORTS
from magnetar.storage.api import LedgerIdAllocator, LedgerStore, StorageError
from magnetar.storage.embedded import EmbeddedLedgerStore
from magnetar.storage.faulty import FailingFsync, FaultPlan, FaultyLedgerStore
from magnetar.storage.objectstore.opening import open_s3_ledger_store
from magnetar.storage.offload import BlockOffloadStore, OffloadError, OffloadSettings, open_offload_store

log = logging.getLogger("magnetar.standalone")


class StartupError(Exception):
    """The process cannot start; the message names the cause and the setting to change (one line)."""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}" + (f": {exc.filename}" if exc.filename else "")
    return str(exc)


def _cannot_listen(what: str, address: str, port: int, setting: str, exc: OSError) -> StartupError:
    if exc.errno == errno.EADDRINUSE:
        return StartupError(f"{what} port {port} on {address} is already in use; set {setting} to a free port")
    return StartupError(f"cannot listen for {what} on {address}:{port} ({setting}): {_reason(exc)}")


class Standalone:
    """The running process's parts; ``start`` then ``stop``."""

    def __init__(
        self,
        settings: StandaloneSettings,
        *,
        metadata: MetadataStore | None = None,
        store: LedgerStore | None = None,
        txn_participants: TxnParticipants | None = None,
        remote_producers: RemoteProducerFactory | None = None,
    ) -> None:
        """``metadata`` and ``store`` replace the embedded SQLite and file stores (component tests);
        ``txn_participants`` replaces the topics' side of transactions (coordinator tests);
        ``remote_producers`` enables geo-replication (the composition root supplies a client-based one)."""
        self.settings = settings = _with_cursor_rate_limit(settings)
        self._given_metadata = metadata
        self._given_store = store
        self._data_dir_lock = DataDirLock(settings.data_dir)  # taken when the ledgers are not in the directory
        self._fsync_plan = FaultPlan(random.Random(), ops=frozenset({"fsync"}))  # armed by a test-only key
        self._given_participants = txn_participants
        self._remote_producers = remote_producers
        self.coordinators: TransactionCoordinatorService | None = None
        self.clock = SystemClock()
        self.broker_port = settings.broker_port
        self.web_port = settings.web_port
        self.stop_requested = asyncio.Event()  # set by the process's signals, or a fatal condition
        self._closing_metadata: asyncio.Task[None] | None = None
        self.broker_port_tls = settings.security.broker_port_tls
        self.web_port_tls = settings.security.web_port_tls
        self.binary: BinaryListener | None = None
        self._reloader: CertReloader | None = None
        self._permissions: PermissionWatcher | None = None
        self._reclaim: asyncio.Task[None] | None = None
        self.http_reaper: HttpConnectionReaper | None = None
        self._broker_built = False
        self.cluster: ClusterParts | None = None
        self._handoff: HttpHandoff | None = None

    async def start(self) -> None:
        """Open the stores, recover, listen. A failure to start is a ``StartupError`` naming its setting."""
        s = self.settings
        if not s.broker.cluster_name.strip():
            raise StartupError("clusterName is empty; set clusterName (e.g. --set clusterName=standalone)")
        await self._open_stores()
        self.resources = MetadataResources(self.metadata)  # the records of the store, for every service
        try:
            self.security = SecurityContext.build(s.security, self.resources)
        except (ValueError, OSError, ssl.SSLError) as exc:
            await self.store.close()
            await self.metadata.close()
            raise StartupError(f"bad security setting: {exc}") from exc
        self.offload_store = await open_checked_offload_store(s.broker.offload)
        self.ledgers = LedgerFactory(self.store, self.metadata, config=s.broker.managed_ledger, clock=self.clock,
                                     offload_store=self.offload_store)
        if s.cluster_mode:
            self.cluster = self._cluster_parts()
        self.broker: Broker = build_broker(s.broker, self.metadata, self.ledgers, self.clock, store=self.store,
                                           cluster=self.cluster, resources=self.resources)
        self._broker_built = True  # from here on, stop() stops it (whatever of it started)
        if self.cluster is not None:
            self._handoff = HttpHandoff()
            cluster_app.wire(self.cluster, self.broker, self._handoff)
        self.broker.replication.factory = self._remote_producers
        await start_broker(self.broker)
        await self._start_ledger_deletion()
        if s.broker.transaction_coordinator_enabled:
            await self._start_coordinators()
        # topics load lazily, on first use: nothing here walks them (a restart with many topics stays fast)
        log.info("recovery done: %d ledgers in storage", len(await self.store.list_ledgers()))
        self._arm_testing_faults()
        self.binary = BinaryListener(self.broker, self.clock, self.security)
        if s.broker_port is not None:
            self.broker_port = await self._listen(s.broker_port, None, "brokerServicePort (--broker-port)")
            self.security.broker_port = self.broker_port
        if self.security.tls is not None and self.broker_port_tls is not None:
            self.broker_port_tls = await self._listen(self.broker_port_tls, self.security.tls, "brokerServicePortTls")
            self.security.broker_port_tls = self.broker_port_tls
        await self._start_web()
        if self.security.tls is not None:
            self._reloader = CertReloader(self.security.tls, s.security)
            self._reloader.start()
        if self.security.authz is not None:
            binary = self.binary
            self._permissions = PermissionWatcher(self.security.authz, lambda: binary.connections)
            self._permissions.start(self.resources)
        if self.cluster is not None:
            await self._join_cluster()
        self._log_ready()

    def _cluster_parts(self) -> ClusterParts:
        """A broker of a cluster shares its stores with the others: refused on stores only it can use."""
        s = self.settings
        if not all(hasattr(self.metadata, m) for m in ("create", "get_owned", "listen")) or (
                self._given_metadata is None and s.metadata.kind is not StoreKind.ZOOKEEPER):
            raise StartupError("a cluster broker needs a shared metadata store: set metadataStoreUrl=zk:HOST:PORT")
        coordination = cast(CoordinationStore, self.metadata)
        for enabled, key in ((s.broker.transaction_coordinator_enabled, "transactionCoordinatorEnabled"),
                             (s.broker.ledger_deletion.enabled, "topicTwoPhaseDeletionEnabled")):
            if enabled:
                raise StartupError(f"{key}=true is not supported on a cluster yet (issue 32): set it to false")
        return cluster_app.build_cluster(coordination, self.clock,
                                         default_bundles=s.broker.default_number_of_namespace_bundles)

    async def _join_cluster(self) -> None:
        assert self.cluster is not None
        s = self.settings
        host = s.broker.advertised_address or (s.bind_address if s.bind_address not in ("0.0.0.0", "::")
                                               else socket.getfqdn())
        tls = {"broker": self.broker_port_tls, "web": self.web_port_tls} if self.security.tls is not None else {}
        urls = cluster_app.advertised(host, self.broker_port, self.web_port,
                                      {k: v for k, v in tls.items() if v is not None})
        listeners = {name: ListenerAddress(u.pulsar, u.pulsar_ssl)
                     for name, u in parse_listeners(s.broker.advertised_listeners).items()}
        try:
            await cluster_app.join(self.cluster, urls, listeners, self.clock)
        except MetadataError as exc:
            raise StartupError(f"cannot join the cluster through the metadata store: {exc}") from exc

    async def _listen(self, port: int, tls: ssl.SSLContext | None, setting: str) -> int:
        assert self.binary is not None
        address = self.settings.bind_address
        try:
            return await self.binary.listen(address, port, tls)
        except OSError as exc:
            raise _cannot_listen("broker", address, port, setting, exc) from exc

    async def _start_web(self) -> None:
        s = self.settings
        timeout_s = s.broker.http_request_timeout_seconds
        app = web_app(self.broker, self.security)
        if self.broker_port is not None:
            app[BROKER_PORT] = self.broker_port  # HTTP lookups answer with the bound binary port
        tls_ports: dict[str, int] = {}
        app[TLS_PORTS] = tls_ports  # filled below, once bound
        if self.security.tls is not None and self.broker_port_tls is not None:
            tls_ports["broker"] = self.broker_port_tls
        self.runner = web.AppRunner(app, access_log=None, keepalive_timeout=timeout_s)
        await self.runner.setup()
        assert self.runner.server is not None
        self.http_reaper = HttpConnectionReaper(self.runner.server, request_timeout_s=timeout_s,
                                                connections_max=s.broker.max_http_server_connections)
        self.http_reaper.start()
        limit_bad_request_logging()
        if s.web_port is not None:
            self.web_port = await self._site(s.web_port, None, "webServicePort (--web-port)")
        if self.security.tls is not None and self.web_port_tls is not None:
            self.web_port_tls = await self._site(self.web_port_tls, self.security.tls, "webServicePortTls")
            tls_ports["web"] = self.web_port_tls

    async def _site(self, port: int, tls: ssl.SSLContext | None, setting: str) -> int:
        site = web.TCPSite(self.runner, self.settings.bind_address, port, ssl_context=tls)
        try:
            await site.start()
        except OSError as exc:
            raise _cannot_listen("web", self.settings.bind_address, port, setting, exc) from exc
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            return int(server.sockets[0].getsockname()[1])
        return port

    def _log_ready(self) -> None:
        s = self.settings
        host = s.bind_address
        broker = f"pulsar://{host}:{self.broker_port}" if self.settings.broker_port is not None else "off"
        web_ = f"http://{host}:{self.web_port}" if self.settings.web_port is not None else "off"
        plain = f"broker {broker} web {web_}"
        if self.security.tls is not None:
            plain += f" tls pulsar+ssl://{host}:{self.broker_port_tls} https://{host}:{self.web_port_tls}"
        if self.cluster is not None and self.cluster.members.started:
            plain += f" cluster {s.broker.cluster_name} as {self.cluster.members.broker_id}"
        log.info("magnetar %s ready: %s", "broker" if self.cluster is not None else "standalone", plain)

    async def _open_object_store(self, allocator: LedgerIdAllocator | None) -> LedgerStore:
        """Ledgers in an S3-compatible bucket (ledgerStoreUrl=s3://...): probed for conditional writes first."""
        config = self.settings.ledger_store
        if not config.url.shared:
            raise StartupError("a cluster broker keeps its ledgers in an object store all brokers reach: set "
                               "ledgerStoreUrl=s3://BUCKET[/PREFIX] (and ledgerStoreServiceEndpoint)")
        where = f"ledgerStoreUrl=s3://{config.url.bucket}/{config.url.prefix}"
        endpoint = config.service_endpoint or "AWS"
        log.info("opening ledger store %s at %s (flush window %d ms, %d bytes)", where, endpoint,
                 config.flush_max_delay_ms, config.flush_max_bytes)
        try:
            return await open_s3_ledger_store(config, clock=self.clock, allocator=allocator)
        except StorageError as exc:
            raise StartupError(f"cannot use {where} ({endpoint}): {exc}") from exc

    async def _open_embedded_store(self) -> LedgerStore:
        """Ledgers in the data directory (the default): its lock keeps a second process off the directory."""
        s = self.settings
        where = f"data directory {s.data_dir} (--data-dir)"
        log.info("recovering ledger store %s (journalSyncData=%s)", s.data_dir / "ledgers", s.journal_sync_data)
        try:
            return await EmbeddedLedgerStore.open(
                s.data_dir / "ledgers", journal_sync_data=s.journal_sync_data,
                open_files_max=capped_open_files(s.open_file_limit), fsync=FailingFsync(self._fsync_plan),
            )
        except StorageError as exc:
            if isinstance(exc.__cause__, BlockingIOError):
                raise StartupError(f"{where} is in use by another magnetar process") from exc
            raise StartupError(f"cannot open {where}: {_reason(exc.__cause__ or exc)}") from exc

    async def _open_stores(self) -> None:
        """The ledger store (given, in a bucket, or embedded), then the metadata store; a cluster broker the
        other way round: its ledger ids come from a counter in the metadata store (ascending across brokers, as
        a managed ledger moving between them needs). A data directory whose ledgers live in a bucket is locked
        here (``data_dir.py``); the embedded store locks its own."""
        s = self.settings
        where = f"data directory {s.data_dir} (--data-dir)"
        try:
            s.data_dir.mkdir(parents=True, exist_ok=True)
            if s.cluster_mode or s.ledger_store.url.shared:
                self._data_dir_lock.acquire()
        except DataDirInUse as exc:
            raise StartupError(f"{where} is in use by another magnetar process") from exc
        except OSError as exc:
            raise StartupError(f"cannot use {where}: {_reason(exc)}") from exc
        if s.cluster_mode:
            await self._open_metadata_checked(where)
            try:
                self.store = self._given_store or await self._open_object_store(
                    MetadataLedgerIdAllocator(self.metadata))
            except BaseException:
                await self.metadata.close()
                raise
            return
        try:
            if self._given_store is not None:
                self.store = self._given_store
            elif s.ledger_store.url.shared:
                self.store = await self._open_object_store(None)
            else:
                self.store = await self._open_embedded_store()
        except OSError as exc:
            raise StartupError(f"cannot use {where}: {_reason(exc)}") from exc
        if s.storage_delete_failure_probability > 0:
            log.warning("TESTING: storage deletes fail with probability %s", s.storage_delete_failure_probability)
            plan = FaultPlan(random.Random(), ops=frozenset({"delete"}))
            plan.arm(fail_probability=s.storage_delete_failure_probability)
            self.store = FaultyLedgerStore(self.store, plan)
        try:
            await self._open_metadata_checked(where)
        except BaseException:
            await self.store.close()
            raise

    async def _open_metadata_checked(self, where: str) -> None:
        try:
            self.metadata = self._given_metadata or await self._open_metadata()
        except (OSError, sqlite3.Error, MetadataError) as exc:
            raise StartupError(f"cannot open the metadata store ({self.settings.metadata.store_url or where}): "
                               f"{exc}") from exc

    async def _open_metadata(self) -> MetadataStore:
        s = self.settings
        if s.metadata.kind is StoreKind.SQLITE:
            path = sqlite_path(s.metadata.store_url, s.data_dir)
            log.info("opening metadata store %s", path)
            sqlite = SqliteMetadataStore(path)
            await sqlite.purge_other_sessions()  # ephemeral keys a killed predecessor left
            return sqlite
        log.info("connecting to the metadata store %s", s.metadata.store_url)
        store = await open_metadata_store(s.metadata, s.data_dir)
        if s.metadata.session_expired_policy is SessionExpiredPolicy.SHUTDOWN:
            store.listen(self._shutdown_on_session_loss)
        return store

    def _shutdown_on_session_loss(self, event: SessionEvent) -> None:
        if event is not SessionEvent.SESSION_LOST or self.stop_requested.is_set():
            return
        log.error("metadata store session lost and zookeeperSessionExpiredPolicy=shutdown: stopping")
        # Closed first, so the stop below does not wait out a timeout on every write to an unreachable store
        # (cursor positions not yet written are redelivered after the restart, as after a crash).
        self._closing_metadata = asyncio.get_running_loop().create_task(self.metadata.close())
        self._closing_metadata.add_done_callback(lambda _: self.stop_requested.set())

    def _arm_testing_faults(self) -> None:
        """Test-only faults, armed once recovery is done (recovery itself never fails on purpose)."""
        s = self.settings
        if s.fsync_failure_probability > 0:
            log.warning("TESTING: ledger fsyncs fail with probability %s", s.fsync_failure_probability)
            self._fsync_plan.arm(fail_probability=s.fsync_failure_probability)
        if s.crash_points:
            crashpoints.arm(crashpoints.parse(s.crash_points))

    async def _start_coordinators(self) -> None:
        config = self.settings.broker
        broker = self.broker
        settings = CoordinatorSettings(
            count=config.transaction_coordinator_count,
            default_timeout_ms=config.transaction_timeout_millis,
            max_timeout_ms=config.transaction_timeout_max_millis,
            max_active=config.max_active_transactions_per_coordinator,
            end_policy=EndPolicy(call_timeout_ms=config.transaction_buffer_client_operation_timeout_ms),
        )
        participants = self._given_participants or broker.txn_participants
        self.coordinators = TransactionCoordinatorService(
            settings, self.ledgers, participants, self.clock, ledger_config=config.managed_ledger,
            new_writer=lambda ledger: broker.txn_log_batching.new_writer(LogFamily.TRANSACTION_LOG, ledger),
        )
        await self.coordinators.start(broker.catalog, log_batching=broker.txn_log_batching)
        broker.txn_coordinators = self.coordinators
        broker.txn_registry = self.coordinators
        log.info("transaction coordinators ready: %d", config.transaction_coordinator_count)

    async def _start_ledger_deletion(self) -> None:
        """PIP-186: route every managed ledger's drops through the deletion topics, then sweep for ledgers
        a crash left behind (in the background: serving does not wait for it)."""
        config = self.settings.broker.ledger_deletion
        if not config.enabled:
            return
        offloaded = OffloadStoreDeleter(self.offload_store) if self.offload_store is not None else None
        service = LedgerDeletionService(self.ledgers, self.store, self.clock, config, offloaded,
                                        references=(referenced_ledgers,))
        await service.start()
        self.broker.ledger_deletion = service
        if self.broker.compaction is not None:
            self.broker.compaction.use_two_phase_deletion(service.queue, self.ledgers, self.metadata)
        self._reclaim = asyncio.get_running_loop().create_task(service.reclaim_orphans(self.metadata))

    async def stop(self) -> None:
        if self.cluster is not None:  # while clients are still connected: they are told where each bundle went
            await cluster_app.leave(self.cluster)
        if self.binary is not None:
            await self.binary.stop()
        if self._reloader is not None:
            await self._reloader.stop()
        if self._permissions is not None:
            await self._permissions.stop()
        if self._reclaim is not None:
            self._reclaim.cancel()
        if getattr(self, "broker", None) is not None and self.broker.ledger_deletion is not None:
            await self.broker.ledger_deletion.close()
        if self.http_reaper is not None:
            await self.http_reaper.stop()
        if self.coordinators is not None:
            await self.coordinators.close()
        if self._broker_built:
            await stop_broker(self.broker)
        if self.cluster is not None:
            await cluster_app.close(self.cluster)
        if self._handoff is not None:
            await self._handoff.close()
        for name in ("runner", "ledgers", "store", "offload_store", "resources", "metadata"):
            part = getattr(self, name, None)
            if part is not None:
                await (part.cleanup() if name == "runner" else part.close())
        self._data_dir_lock.release()
        log.info("stopped cleanly")


async def open_checked_offload_store(settings: OffloadSettings) -> BlockOffloadStore | None:
    """The configured offload store; a store that fails its check is logged loudly and kept (offloads then
    fail with the same reason in their status, and start working once the operator fixes the cause)."""
    try:
        store = open_offload_store(settings)
    except OffloadError as exc:
        raise StartupError(f"tiered storage: {exc}") from exc
    if store is None:
        return None
    try:
        await store.blobs.check()
    except OffloadError as exc:
        log.error("tiered storage: the offload store is not usable: %s", exc)
    else:
        log.info("tiered storage: offloading with driver %s to %s", store.driver, store.blobs.bucket)
    return store


def _with_cursor_rate_limit(settings: StandaloneSettings) -> StandaloneSettings:
    """On ZooKeeper, cursor writes are held to managedLedgerDefaultMarkDeleteRateLimit per cursor (Pulsar's
    1/s): a crash then redelivers at most that long a window of acknowledged messages."""
    config = settings.broker.managed_ledger
    if settings.metadata.kind is not StoreKind.ZOOKEEPER:
        return settings
    interval_ms = max(config.cursor_persist_interval_ms, math.ceil(1000 / config.mark_delete_rate_limit))
    if interval_ms == config.cursor_persist_interval_ms:
        return settings
    log.info("cursor positions persisted at most every %d ms (managedLedgerDefaultMarkDeleteRateLimit=%s)",
             interval_ms, config.mark_delete_rate_limit)
    ledger = dataclasses.replace(config, cursor_persist_interval_ms=interval_ms)
    return dataclasses.replace(settings, broker=dataclasses.replace(settings.broker, managed_ledger=ledger))


async def run_standalone(settings: StandaloneSettings, remote_producers: RemoteProducerFactory | None = None) -> None:
    raise_descriptor_limit()
    standalone = Standalone(settings, remote_producers=remote_producers)
    stop = standalone.stop_requested
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_loop_exception)
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    watchdog = LoopWatchdog()  # a loop stalled 10 s (recovery included) writes every thread's stack to stderr
    watchdog.start()
    try:
        try:
            await standalone.start()
        except BaseException:
            await standalone.stop()  # whatever opened before the failure is closed (the lock released)
            raise
        try:
            await stop.wait()
        finally:
            await standalone.stop()
    finally:
        await watchdog.stop()


def _loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """asyncio's own errors (a failed accept, ...): EMFILE gets one loud line, not a traceback per try."""
    exc = context.get("exception")
    if report_if_out_of_descriptors(exc if isinstance(exc, BaseException) else None):
        return
    loop.default_exception_handler(context)
