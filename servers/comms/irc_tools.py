"""IRC tools: send to a channel or nick, read what a channel says for a while, list channels."""

from __future__ import annotations

import time
from typing import Annotated

from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.comms._settings import require, settings, tls_context
from servers.comms.irc import IrcSession
from servers.comms.server import mcp

Channel = Annotated[str, Field(pattern=r"^[#&+!][^\s,\x07]{1,49}$", description="channel, e.g. #ops")]
Target = Annotated[str, Field(pattern=r"^([#&+!][^\s,\x07]{1,49}|[A-Za-z\[\]\\`_^{|}][\w\[\]\\`^{|}-]{0,29})$")]
READ = ToolAnnotations(read_only_hint=True, open_world_hint=True)
CHUNK = 400
"""Bytes of text per PRIVMSG (a line is at most 512 with the prefix)."""


def _session() -> IrcSession:
    config = settings()
    host = require(config.irc_host, "COMMS_IRC_HOST", "IRC")
    session = IrcSession(
        host, config.irc_port, tls=tls_context(config) if config.irc_tls else None, timeout=config.timeout_seconds
    )
    try:
        password = config.irc_password.get_secret_value() if config.irc_password else None
        session.register(config.irc_nick, password)
    except BaseException:
        session.__exit__(None, None, None)
        raise
    return session


def _chunks(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines() or [""]:
        data = line.encode("utf-8")
        while len(data) > CHUNK:
            cut = CHUNK
            while cut > 0 and (data[cut] & 0xC0) == 0x80:  # do not split a UTF-8 sequence
                cut -= 1
            out.append(data[:cut].decode("utf-8"))
            data = data[cut:]
        out.append(data.decode("utf-8"))
    return [c for c in out if c]


@mcp.tool(
    description="Send messages to an IRC channel (joining it first) or to a nick, on the configured server "
    "(COMMS_IRC_*). Multi-line or long text is split into several messages; notice=true sends NOTICEs (no "
    "auto-replies). Returns the nick used and how many lines were sent.",
    annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
    ),
)
def irc_send(
    target: Annotated[Target, Field(description="channel (#ops) or nick")],
    messages: Annotated[list[str], Field(min_length=1, max_length=50, description="messages, sent in order")],
    notice: Annotated[bool, Field(description="send as NOTICE instead of PRIVMSG")] = False,
) -> CallToolResult:
    lines = [chunk for m in messages for chunk in _chunks(m)]
    if not lines:
        raise ToolError("nothing to send: every message is empty")
    verb = "NOTICE" if notice else "PRIVMSG"
    with _session() as session:
        if target[0] in "#&+!":
            session.join(target)
        for line in lines:
            session.send(f"{verb} {target} :{line}")
        session.send("PING :flush")  # the server answers after it has handled every line before it
        for reply in session.lines(time.monotonic() + session.timeout):
            if reply.command in {"401", "403", "404"}:
                raise ToolError(f"cannot send to {target}: {reply.params[-1]}")
            if reply.command == "PONG":
                break
        nick = session.nick
    return json_result({"target": target, "nick": nick, "sent": len(lines)})


@mcp.tool(
    description="Join an IRC channel and collect what is said there for up to `seconds` or until max_messages "
    "arrive (IRC keeps no history: only messages sent while listening are seen). Returns the topic and a table of "
    "time, nick, kind and text.",
    annotations=READ,
)
def irc_read_channel(
    channel: Channel,
    seconds: Annotated[float, Field(gt=0, le=120, description="listen this long")] = 10.0,
    max_messages: Annotated[int, Field(ge=1, le=1000, description="stop after this many")] = 50,
) -> CallToolResult:
    rows: list[list[object]] = []
    with _session() as session:
        topic = session.join(channel)
        for line in session.lines(time.monotonic() + seconds):
            if line.command in {"PRIVMSG", "NOTICE"} and line.params and line.params[0].lower() == channel.lower():
                stamp = time.strftime("%H:%M:%S", time.gmtime())
                rows.append([stamp, line.nick, line.command.lower(), line.params[-1]])
            elif line.command in {"JOIN", "PART", "QUIT"} and line.nick != session.nick:
                rows.append([time.strftime("%H:%M:%S", time.gmtime()), line.nick, line.command.lower(), ""])
            if sum(r[2] in {"privmsg", "notice"} for r in rows) >= max_messages:
                break
    return table_result(["time", "nick", "kind", "text"], rows, channel=channel, topic=topic)


@mcp.tool(
    description="List the public channels of the configured IRC server with user counts and topics, optionally "
    "only names containing a substring. Returns a table sorted by users.",
    annotations=READ,
)
def irc_list_channels(
    contains: Annotated[str | None, Field(max_length=50, description="only channel names containing this")] = None,
    limit: Annotated[int, Field(ge=1, le=5000, description="most channels to return")] = 200,
) -> CallToolResult:
    rows: list[list[object]] = []
    with _session() as session:
        session.send("LIST")
        for line in session.lines(time.monotonic() + session.timeout):
            if line.command == "322" and len(line.params) >= 3:
                rows.append([line.params[1], int(line.params[2]) if line.params[2].isdigit() else 0, line.params[-1]])
            elif line.command == "323":
                break
        else:
            raise ToolError(f"the channel list did not finish within {session.timeout}s")
    if contains:
        rows = [r for r in rows if contains.lower() in str(r[0]).lower()]
    rows.sort(key=lambda r: (-int(str(r[1])), str(r[0])))
    return table_result(["channel", "users", "topic"], rows[:limit], total=len(rows))
