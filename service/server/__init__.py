"""The server and its wiring: the composition root (``container``) turns the settings into every
part and connects them, ``app`` builds the FastAPI application over them, ``protocol`` serves it
under uvicorn, ``backends`` picks an adapter per port."""
