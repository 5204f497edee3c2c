"""A topic without a replicated subscription gets its PIP-33 controller with the first marker copy it stores,
not at load (one object graph less per topic); a copy arriving then is handled as before."""

from __future__ import annotations

from magnetar import protocol as proto
from magnetar.broker.names import TopicName
from magnetar.broker.replicated_subscriptions import codec
from magnetar.broker.replicated_subscriptions.controller import TopicController
from magnetar.ledger.api import Position
from magnetar.server.standalone import Standalone


async def test_the_controller_comes_with_the_first_marker_copy(standalone: Standalone) -> None:
    topic = await standalone.broker.get_topic(TopicName.parse("persistent://public/default/lazy-pip33"), create=True)
    assert topic.replicated_subscriptions is None and topic.on_marker_stored is not None
    metadata = proto.pb.MessageMetadata(producer_name="r", sequence_id=1, publish_time=1,
                                        marker_type=codec.UPDATE, replicated_from="other")
    entry = proto.make_entry(metadata, codec.update("no-such-sub", {"other": Position(3, 4)}))
    topic.on_marker_stored(Position(0, 0), metadata, entry)
    controller = topic.replicated_subscriptions
    assert isinstance(controller, TopicController) and controller.marker_copies_in == 1
    assert topic.on_marker_stored == controller.marker_stored  # later copies go straight to it
