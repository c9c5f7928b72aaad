"""Push streams: a consumer instance's records, or one partition's, sent as they arrive.

A stream is a loop of the reads the pull API already has — ``ConsumerService.take`` (a poll of
the instance) and ``TopicService.read`` (the stateless read) — so whatever a poll does holds for
every batch a stream sends: the ACL checks of the poll's route and of the core (READ on the
group and on its topics), with the bindings of now rather than of the stream's start; the
consume quotas; rebalance generations; the instance's lease; auto-commit; decoding the schema
formats. What a stream adds:

- **Events beyond records**, in the order the client must learn them: where the stream starts
  (``Opened``: the positions of every partition the instance owns, before anything was sent), a
  change of the instance's partitions (``Rebalance``, with where each now starts), the records
  with the positions after them (``Records``), and why it ended (``End``: the gateway drains,
  the instance was deleted, an error). Those positions are the cursor a reconnect resumes from
  (``cursors``), so a batch lost in flight is read again and none is read twice.
- **Bounds**: at most ``max_open_streams`` at once on a replica (``StreamService.slot``, 503 and
  Retry-After beyond), apart from the long-polls' own bound, which stream polls do not take; and
  what a WebSocket holds of its client's messages not yet answered, per socket and per principal
  (``StreamService.budget``, ``credit.HeldBudgets``).
- **Waits that end early.** A stream's poll waits on the log until records arrive, the stream's
  ``wake`` is set (a command or credit from its client, the client gone) or the gateway drains.
  The fetch is dropped then, and done with before the poll returns, before any position moved,
  so ending early never loses a record, leaves no read behind, and a drain ends every stream
  within milliseconds.
- **Throttling that does not end it.** A poll a quota refuses (``Throttled``) makes the stream
  wait the Retry-After, keeping the instance alive, and go on: what a client of the pull API
  does when it retries.
- **A credential that must hold.** What authenticated the stream's client (``Credential``) is
  asked before every poll, commit, seek and produce, with the ACLs (``Stream.decide``): once it
  no longer holds (a user removed, a token past its ``exp``) the stream ends (``error``, 40101),
  as a request with it would be refused.
- **A lifetime**, if ``lifetime_ms`` is set: past it the stream ends (``error``, 50301 with
  Retry-After 0), for deployments that want long-lived clients to authenticate again; no wait of
  the stream (a pause for credit or for a quota) lasts past it.

What every stream is made with — whose it is and the replica's bounds — is one ``StreamContext``,
which ``StreamService`` builds for each stream it opens.

The modules: ``events`` (what a stream tells its client), ``stream`` (the limits, the context
and what every stream has), ``instance`` and ``partition`` (the two streams), ``service``
(``StreamService``, which opens them and bounds how many are open).

The transports (``service.api.streams``: Server-Sent Events and the WebSocket) render the events
and own heartbeats, send timeouts and, for the WebSocket, the client's ``credit``.
"""

from .events import DELETED, ERROR, SHUTDOWN, End, EndReason, Event, Opened, Rebalance, Records
from .instance import InstanceStream
from .partition import PartitionStream
from .service import StreamService
from .stream import STEP_WAIT_MS, Clock, Decide, Stream, StreamContext, StreamLimits

__all__ = [
    "DELETED",
    "ERROR",
    "SHUTDOWN",
    "STEP_WAIT_MS",
    "Clock",
    "Decide",
    "End",
    "EndReason",
    "Event",
    "InstanceStream",
    "Opened",
    "PartitionStream",
    "Rebalance",
    "Records",
    "Stream",
    "StreamContext",
    "StreamLimits",
    "StreamService",
]
