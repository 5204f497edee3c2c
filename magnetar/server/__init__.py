"""The network edges: ``binary/`` (the Pulsar protocol's listener, connections and command handlers),
``http/`` (the admin API, HTTP lookup, ``/metrics``), ``metrics/`` (Prometheus collectors), ``auth/`` (TLS and
authentication). Only this layer opens sockets; it calls the broker, never the other way round."""
