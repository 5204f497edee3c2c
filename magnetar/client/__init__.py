"""magnetar.client: an asyncio client for Pulsar's binary protocol.

    from magnetar.client import AuthenticationToken, Client
    async with Client("pulsar://localhost:6650") as client:   # authentication=AuthenticationToken(token)
        producer = await client.create_producer("t", batching=True, compression="lz4")
        msg_id = await producer.send(b"x", key="k", properties={"a": "b"})
        consumer = await client.subscribe("t", "sub", subscription_type="shared", initial_position="earliest")
        msg = await consumer.receive(timeout_ms=1000)
        await consumer.acknowledge(msg)
        async for msg in client.read("t", start="earliest", end="latest"): ...
        async with client.transaction(timeout_ms=30_000) as txn:   # commit on exit, abort on exception
            await producer.send(b"y", txn=txn)
            await consumer.acknowledge(msg, txn=txn)

Shares ``magnetar.protocol`` with the broker and imports nothing from broker/ or server/.
``magnetar.client.sync`` is a blocking facade for scripts and Spark executors.
"""

from magnetar.client import errors
from magnetar.client._client import Client
from magnetar.client._config import BatchingConfig, ClientConfig, ConsumerConfig, DeadLetterPolicy, ProducerConfig
from magnetar.client._consumer import Consumer
from magnetar.client._incoming import Decoded, decode_stored_entry
from magnetar.client._messages import EARLIEST, LATEST, Message, MessageId
from magnetar.client._partitioned import MultiTopicConsumer, PartitionedProducer
from magnetar.client._producer import Producer
from magnetar.client._reader import Reader
from magnetar.client._transaction import Transaction, TransactionState
from magnetar.client.auth import Authentication, AuthenticationBasic, AuthenticationToken
from magnetar.client.errors import PulsarClientError

__all__ = [
    "EARLIEST",
    "LATEST",
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationToken",
    "BatchingConfig",
    "Client",
    "ClientConfig",
    "Consumer",
    "ConsumerConfig",
    "DeadLetterPolicy",
    "Decoded",
    "Message",
    "MessageId",
    "MultiTopicConsumer",
    "PartitionedProducer",
    "Producer",
    "ProducerConfig",
    "PulsarClientError",
    "Reader",
    "Transaction",
    "TransactionState",
    "decode_stored_entry",
    "errors",
]
