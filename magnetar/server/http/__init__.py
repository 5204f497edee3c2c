"""The HTTP edge (aiohttp, in the broker's event loop): the app (``app``: ``/metrics``, ``/status.html``,
authentication middleware), the admin API's routes (``admin/``, on ``routes``' helpers), the HTTP lookup
(``lookup``) and connection limits (``limits``)."""
