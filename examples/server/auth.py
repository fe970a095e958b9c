"""LangGraph custom auth for the example server: every request is one user's, and a user
reaches only their own threads and their own memory.

``langgraph.json`` points ``auth`` here, so ``langgraph dev`` (and a deployment built from this
folder) runs these handlers on every API call:

* :func:`authenticate`: the ``Authorization: Bearer <token>`` header names the user. Tokens
  come from ``LC_AUTH_TOKENS`` (``token=user,token=user``); without it two demo tokens serve
  (``demo-alice`` for ``alice``, ``demo-bob`` for ``bob``) and the log says so. Replace this
  function with your identity provider's check for anything but a local trial.
* :func:`own_threads`: a thread is stamped with its creator at creation; reading, searching,
  updating, deleting it and running on it are filtered to that owner (another user's thread
  answers 404); a run whose ``configurable.user_id`` names another user answers 403.
* :func:`own_crons` scopes scheduled runs the same way; :func:`shared_assistants` lets
  clients read the deployment's assistants but not create, change or delete them.
* :func:`own_store_items`: the ``/store`` API reaches only ``("memory", <user>, ...)``: searches
  and namespace listings are narrowed to it, and any other namespace, another user's memory
  or the archives (``("langchain_compact", "archive", <thread>)``), answers 403. The archive
  stays readable through the recall tool, which runs inside a run on the user's own thread.

Inside a run the graph sees the user as ``configurable.langgraph_auth_user_id``, and the
memory's ``{user_id}`` is that user (``CompactionMemory`` refuses a ``user_id`` naming another).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from langgraph_sdk import Auth

logger = logging.getLogger("langchain_compact.examples.auth")

DEMO_TOKENS = {"demo-alice": "alice", "demo-bob": "bob"}
MEMORY_LABEL = "memory"


def _tokens() -> dict[str, str]:
    raw = os.environ.get("LC_AUTH_TOKENS", "").strip()
    if not raw:
        logger.warning(
            "LC_AUTH_TOKENS is not set: the demo tokens demo-alice and demo-bob are accepted. "
            "Set LC_AUTH_TOKENS=token=user,... or replace authenticate() in auth.py."
        )
        return dict(DEMO_TOKENS)
    pairs = [part.split("=", 1) for part in raw.split(",") if part.strip()]
    if any(len(pair) != 2 or not pair[0].strip() or not pair[1].strip() for pair in pairs):
        raise ValueError("LC_AUTH_TOKENS must read token=user,token=user")
    return {token.strip(): user.strip() for token, user in pairs}


TOKENS = _tokens()
auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The user named by the bearer token; 401 without one."""
    scheme, _, token = (authorization or "").partition(" ")
    user = TOKENS.get(token.strip()) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="send Authorization: Bearer <token> (see LC_AUTH_TOKENS)"
        )
    return {"identity": user}


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Stamp new threads with their owner; every thread action is filtered to the owner; a
    run whose ``configurable.user_id`` names another user is refused at the door."""
    if ctx.action == "create_run" and isinstance(value, dict):
        config = (value.get("kwargs") or {}).get("config") or {}
        claimed = (config.get("configurable") or {}).get("user_id")
        if claimed not in (None, "") and str(claimed) != ctx.user.identity:
            raise Auth.exceptions.HTTPException(
                status_code=403,
                detail=f"configurable.user_id={claimed!r} is not the authenticated user",
            )
    if isinstance(value, dict):
        metadata = value.get("metadata")
        if metadata is None:
            metadata = value["metadata"] = {}
        metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.crons
async def own_crons(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Scheduled runs, like threads: stamped with their owner and filtered to it."""
    if isinstance(value, dict):
        metadata = value.get("metadata")
        if metadata is None:
            metadata = value["metadata"] = {}
        metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def shared_assistants(ctx: Auth.types.AuthContext, value: Any) -> None:
    """The deployment's assistants (the graphs) are read by everyone and changed by no
    client: one user's edit would change every user's runs."""
    if ctx.action not in ("read", "search"):
        raise Auth.exceptions.HTTPException(
            status_code=403, detail="assistants are managed by the deployment, not by clients"
        )


@auth.on.store()
async def own_store_items(ctx: Auth.types.AuthContext, value: Any) -> None:
    """``/store`` reaches only ``("memory", <user>, ...)``."""
    mine = (MEMORY_LABEL, ctx.user.identity)
    namespace = tuple(value.get("namespace") or ())
    if ctx.action in ("search", "list_namespaces") and mine[: len(namespace)] == namespace:
        value["namespace"] = mine  # a prefix above the user's memory: narrowed to it
        return
    if namespace[:2] != mine:
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail=f"the store API reaches only your memory {list(mine)}; archives are read "
            "through the recall tool of your own threads",
        )
