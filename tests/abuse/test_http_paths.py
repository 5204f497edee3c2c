"""Percent-encoded slashes in HTTP paths (issue 36 item 7).

The authorization rules matched the decoded path, where ``a%2Fb`` is two segments, while the router keeps
it one segment of the topic's name: ``GET /lookup/v2/topic/persistent/t/ns/a%2Fb`` matched no lookup rule
and was served to any authenticated role. The rules now read the path as the router does.
"""

from __future__ import annotations

import pytest

from tests.abuse.conftest import PRIVATE
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.security.pki import token

LOOKUPS = [
    f"/lookup/v2/topic/persistent/{PRIVATE}/plain",
    f"/lookup/v2/topic/persistent/{PRIVATE}/a%2Fb",
    f"/lookup/v2/topic/persistent/{PRIVATE}/a%2fb%2Fc",
    f"/lookup/v2/topic/non-persistent/{PRIVATE}/a%2Fb",
    f"/lookup/v2/topic/persistent/{PRIVATE}/a%2Fb/bundle",
    f"/admin/v2/persistent/{PRIVATE}/a%2Fb/partitions",
    f"/lookup/v2/topic/persistent/{PRIVATE.replace('/', '%2F')}/x/y",
]


@pytest.mark.parametrize("path", LOOKUPS)
def test_encoded_slashes_do_not_skip_the_lookup_permission(secure: BrokerProcess, secret: bytes, path: str) -> None:
    mallory = {"Authorization": f"Bearer {token(secret, 'mallory')}"}
    status, body = call(secure.web_url, "GET", path, headers=mallory)
    assert status == 403, (path, status, body)
    admin = {"Authorization": f"Bearer {token(secret, 'admin')}"}
    assert call(secure.web_url, "GET", path, headers=admin)[0] != 403  # the super-user still may
