"""Push streams over HTTP: Server-Sent Events (``sse``) and the WebSocket protocol (``socket``).

Both render the events of ``service.core.streams``; the pull routes answer Server-Sent Events
when asked for them (``sse.wants_events``), and ``socket.router`` is the WebSocket route.
"""
