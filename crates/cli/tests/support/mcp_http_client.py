"""Calls browser_task on `airlock serve` with the official MCP Python SDK's streamable HTTP client.

Usage: mcp_http_client.py URL HEADERS_JSON TASK [MODE]

TASK is the task's text, or browser_task's whole arguments as a JSON object.

MODE `task` (default) runs browser_task; `accept` and `decline` run it answering each
elicitation (a call for a person's help) that way, and print the messages asked; `cancel` starts it, cancels the call at its first
progress notification, and leaves; `direct ARGS_JSON…` calls agent_browser once per ARGS_JSON
in one session (TASK is ignored), then ends the session; `hold ARGS_JSON…` does the same but
prints its outputs at once and keeps the session open until a line arrives on stdin.
Prints one JSON object: the tools listed, the result (text, images, embedded resources,
structured content, error flag) and the progress notifications seen; or {"failed": "...", "statuses": [...]} (the HTTP
statuses answered) when the server refuses.
"""

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


STATUSES = []


async def record_status(response):
    STATUSES.append(response.status_code)


async def main(url, headers, task, mode, extra):
    progress = []
    first_progress = asyncio.Event()

    elicitations = []

    async def on_elicitation(context, params):
        elicitations.append(params.message)
        return types.ElicitResult(action=mode, content={} if mode == "accept" else None)

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total, "message": message})
        first_progress.set()

    client = create_mcp_http_client(headers=headers)
    # The SDK's errors do not always carry the HTTP status; the test wants to see it.
    client.event_hooks = {"request": [], "response": [record_status]}
    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write, *_):
            callbacks = (
                {"elicitation_callback": on_elicitation}
                if mode in ("accept", "decline")
                else {}
            )
            async with ClientSession(read, write, **callbacks) as session:
                await session.initialize()
                tools = await session.list_tools()
                if mode in ("direct", "hold"):
                    outputs = []
                    for args in extra:
                        result = await session.call_tool(
                            "agent_browser", {"args": json.loads(args)}
                        )
                        outputs.append(
                            {
                                "texts": [c.text for c in result.content if c.type == "text"],
                                "is_error": result.is_error,
                            }
                        )
                    answer = {"tools": [t.name for t in tools.tools], "outputs": outputs}
                    if mode == "hold":
                        print(json.dumps(answer), flush=True)
                        await asyncio.get_running_loop().run_in_executor(
                            None, sys.stdin.readline
                        )
                    return answer
                # TASK is the task's text, or its whole arguments as a JSON object.
                arguments = json.loads(task) if task.startswith("{") else {"task": task}
                call = asyncio.create_task(
                    session.call_tool(
                        "browser_task", arguments, progress_callback=on_progress
                    )
                )
                if mode == "cancel":
                    await first_progress.wait()
                    call.cancel()
                    try:
                        await call
                    except asyncio.CancelledError:
                        pass
                    return {"cancelled_after": progress}
                result = await call
    texts = [c.text for c in result.content if c.type == "text"]
    images = [c.mime_type for c in result.content if c.type == "image"]
    resources = [
        {
            "uri": str(c.resource.uri),
            "mime_type": c.resource.mime_type,
            "blob": getattr(c.resource, "blob", None),
        }
        for c in result.content
        if c.type == "resource"
    ]
    return {
        "tools": [t.name for t in tools.tools],
        "texts": texts,
        "images": images,
        "resources": resources,
        "structured": result.structured_content,
        "is_error": result.is_error,
        "progress": progress,
        "elicitations": elicitations,
    }


if __name__ == "__main__":
    url, headers, task = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "task"
    try:
        print(json.dumps(asyncio.run(main(url, headers, task, mode, sys.argv[5:]))))
    except BaseException as error:  # noqa: BLE001 - the test reads what failed
        # ExceptionGroups from anyio hide the HTTP status; print every leaf.
        leaves = []

        def walk(e):
            if isinstance(e, BaseExceptionGroup):
                for inner in e.exceptions:
                    walk(inner)
            else:
                leaves.append(f"{type(e).__name__}: {e}")

        walk(error)
        print(json.dumps({"failed": "; ".join(leaves), "statuses": STATUSES}))
