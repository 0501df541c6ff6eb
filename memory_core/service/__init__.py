"""The memory service over HTTP: both seeds' wire APIs over one store directory.

    memory-core keys create --store ./mem --principal alice     # prints the key (shown once)
    memory-core serve --store ./mem --port 8080                  # 127.0.0.1 unless --host

Modules: :mod:`.app` (the FastAPI app factory), :mod:`.routes_v1` (the Retrieve API and the
write side under ``/v1``), :mod:`.routes_agent` (the agent-memory API under
``/api/v1/{context_id}``), :mod:`.models` (pydantic models for the OpenAPI schema, checked
against the engine's request and response types), :mod:`.wire` (camelCase translation),
:mod:`.keys` (bearer keys, stored hashed), :mod:`.access` (request ids, body limit, access log),
:mod:`.server` (``memory-core serve``), :mod:`.cli` (its sub-commands), :mod:`.client`
(the CLI's ``--url`` side), :mod:`.compat` (engine calls a seed route needs under another
name).

Nothing here is imported by the engine: FastAPI and uvicorn load only when a service module is
imported.
"""
