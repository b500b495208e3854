"""An agent attempt as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format, v1.7):
``agent/trajectory.atif.json``, written beside agent.json (agent/stage.py).

The root trajectory is the attempt: a ``system`` step per phase, stamped with the time the phase
began (report/process.py counts an attempt's seconds from its first), whose observation refers
to the phase's own trajectory, embedded in the root's ``subagent_trajectories``; a Claude Code
subagent is in turn embedded in its phase's trajectory and referred to from the observation of
the tool call that started it. Steps: the prompt (``user``), then one ``agent`` step per model
answer (its text, reasoning and tool calls, with the tool results as its observation). Each
agent step's metrics are the metering proxy's record of the call that produced it (records.py:
CallRecord, matched by the response's id: prompt tokens include the cached ones, as ATIF counts
them, and the cost is the metered one); an answer the proxy did not see keeps the transcript's
own usage, without a cost. The root's ``final_metrics`` are every call of the attempt, retries
and calls no transcript shows included.

A program's transcripts become a ``Conversation`` (turns, subagents), the one thing a reader of
another program's session logs has to produce: ``claude_conversation`` reads Claude Code's; the
rest does not know which program spoke. Pure: data in, a JSON-able dict out.
"""

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .blocks import content_blocks, result_text

SCHEMA_VERSION = "ATIF-v1.7"


@dataclass
class Turn:
    """One step of a conversation. results: the tool results of this turn's calls,
    {"call_id", "content", "subagent": the subagent's id it started, or None}."""

    source: str  # "user" | "agent" | "system"
    message: str
    timestamp: str | None = None
    model: str | None = None
    response_id: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] | None = None  # the program's own count (Call tokens' vocabulary)


@dataclass
class Conversation:
    """What one agent (a phase's program, or a subagent of it) did."""

    agent: str  # "claude-code", "codex", ...
    session_id: str | None
    turns: list[Turn]
    subagents: dict[str, "Conversation"] = field(default_factory=dict)


# -- Claude Code transcripts -----------------------------------------------------------------


def _claude_usage(usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    if not usage:
        return None
    return {
        "input": int(usage.get("input_tokens") or 0),
        "output": int(usage.get("output_tokens") or 0),
        "cache_read": int(usage.get("cache_read_input_tokens") or 0),
        "cache_write": int(usage.get("cache_creation_input_tokens") or 0),
        "reasoning": 0,
    }


def _claude_turns(entries: Iterable[Mapping[str, Any]]) -> list[Turn]:
    turns: list[Turn] = []
    by_message: dict[str, Turn] = {}
    by_call: dict[str, Turn] = {}
    for entry in entries:
        kind, message = entry.get("type"), entry.get("message") or {}
        if kind == "assistant":
            key = message.get("id") or entry.get("uuid") or str(len(turns))
            turn = by_message.get(key)
            if turn is None:
                turn = Turn(
                    "agent",
                    "",
                    entry.get("timestamp"),
                    message.get("model"),
                    message.get("id"),
                    usage=_claude_usage(message.get("usage")),
                )
                by_message[key] = turn
                turns.append(turn)
            for block in content_blocks(message.get("content")):
                if block.get("type") == "text" and block.get("text"):
                    turn.message = "\n".join(t for t in (turn.message, block["text"]) if t)
                elif block.get("type") == "thinking" and block.get("thinking"):
                    turn.reasoning = "\n".join(
                        t for t in (turn.reasoning or "", block["thinking"]) if t
                    )
                elif block.get("type") == "tool_use":
                    call: dict[str, Any] = {
                        "id": str(block.get("id")),
                        "name": str(block.get("name")),
                        "arguments": block.get("input")
                        if isinstance(block.get("input"), dict)
                        else {"input": block.get("input")},
                    }
                    turn.tool_calls.append(call)
                    by_call[call["id"]] = turn
        elif kind == "user":
            texts = []
            outcome = entry.get("toolUseResult")
            for block in content_blocks(message.get("content")):
                if block.get("type") == "tool_result":
                    call_id = str(block.get("tool_use_id"))
                    owner = by_call.get(call_id)
                    result = {
                        "call_id": call_id if owner else None,
                        "content": result_text(block),
                        "subagent": outcome.get("agentId") if isinstance(outcome, dict) else None,
                    }
                    if owner:
                        owner.results.append(result)
                    else:  # a result whose call is not in these lines: the environment's
                        turns.append(Turn("system", "", entry.get("timestamp"), results=[result]))
                elif block.get("type") == "text" and block.get("text"):
                    texts.append(block["text"])
            if texts:
                turns.append(Turn("user", "\n".join(texts), entry.get("timestamp")))
    return turns


def claude_conversation(entries: Sequence[Mapping[str, Any]]) -> Conversation:
    """A phase's Claude Code transcript lines (its subagents' too, marked by ``agentId``)."""
    main = [e for e in entries if not e.get("agentId")]
    subagents: dict[str, list[Mapping[str, Any]]] = {}
    for e in entries:
        if e.get("agentId"):
            subagents.setdefault(str(e["agentId"]), []).append(e)
    session = next((e.get("sessionId") for e in main if e.get("sessionId")), None)
    return Conversation(
        "claude-code",
        session,
        _claude_turns(main),
        {
            agent_id: Conversation("claude-code", session, _claude_turns(lines))
            for agent_id, lines in subagents.items()
        },
    )


# -- ATIF ------------------------------------------------------------------------------------


def _metrics(tokens: Mapping[str, int], cost: float | None, call: int | None) -> dict[str, Any]:
    prompt = tokens["input"] + tokens["cache_read"] + tokens["cache_write"]
    extra: dict[str, Any] = {
        "cache_write_tokens": tokens["cache_write"],
        "reasoning_tokens": tokens.get("reasoning", 0),
    }
    if call is not None:
        extra["call"] = call
    metrics = {
        "prompt_tokens": prompt,
        "completion_tokens": tokens["output"],
        "cached_tokens": tokens["cache_read"],
        "extra": extra,
    }
    if cost is not None:
        metrics["cost_usd"] = cost
    return metrics


def _final(steps: list[dict[str, Any]], sub_cost: float) -> dict[str, Any]:
    measured = [s["metrics"] for s in steps if s.get("metrics")]
    costs = [m["cost_usd"] for m in measured if "cost_usd" in m]
    return {
        "total_prompt_tokens": sum(m["prompt_tokens"] for m in measured),
        "total_completion_tokens": sum(m["completion_tokens"] for m in measured),
        "total_cached_tokens": sum(m["cached_tokens"] for m in measured),
        "total_cost_usd": round(sum(costs) + sub_cost, 10),
        "total_steps": len(steps),
    }


def trajectory(
    conversation: Conversation,
    trajectory_id: str,
    calls: Mapping[str, Mapping[str, Any]],
    version: str,
    prompt: str | None = None,
) -> dict[str, Any]:
    """The ATIF trajectory of a conversation; calls: the proxy's records by response id."""
    subs = {
        agent_id: trajectory(sub, f"{trajectory_id}/subagent-{agent_id}", calls, version)
        for agent_id, sub in conversation.subagents.items()
    }
    turns = list(conversation.turns)
    if not any(t.source == "user" for t in turns[:1]) and prompt is not None:
        turns.insert(0, Turn("user", prompt))
    if not turns:
        turns = [Turn("system", "(no transcript)")]
    steps, models = [], []
    for i, turn in enumerate(turns, 1):
        step: dict[str, Any] = {"step_id": i, "source": turn.source, "message": turn.message}
        if turn.timestamp:
            step["timestamp"] = turn.timestamp
        if turn.source == "agent":
            if turn.model:
                step["model_name"] = turn.model
                models.append(turn.model)
            if turn.reasoning:
                step["reasoning_content"] = turn.reasoning
            if turn.tool_calls:
                step["tool_calls"] = [
                    {
                        "tool_call_id": c["id"],
                        "function_name": c["name"],
                        "arguments": c["arguments"],
                    }
                    for c in turn.tool_calls
                ]
            call = calls.get(turn.response_id or "")
            if call and call.get("tokens"):
                step["metrics"] = _metrics(call["tokens"], call.get("cost_usd"), call.get("call"))
                step["llm_call_count"] = 1
            elif turn.usage:
                step["metrics"] = _metrics(turn.usage, None, None)
        if turn.results:
            results = []
            for r in turn.results:
                result: dict[str, Any] = {"content": r["content"]}
                if r.get("call_id"):
                    result["source_call_id"] = r["call_id"]
                if r.get("subagent") in subs:
                    ref = {"trajectory_id": subs[r["subagent"]]["trajectory_id"]}
                    result["subagent_trajectory_ref"] = [ref]
                results.append(result)
            step["observation"] = {"results": results}
        steps.append(step)
    sub_cost = sum(s["final_metrics"]["total_cost_usd"] for s in subs.values())
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "trajectory_id": trajectory_id,
        "agent": {"name": conversation.agent, "version": version},
        "steps": steps,
        "final_metrics": _final(steps, sub_cost),
    }
    if conversation.session_id:
        out["session_id"] = conversation.session_id
    if models:
        out["agent"]["model_name"] = max(set(models), key=models.count)
    if subs:
        out["subagent_trajectories"] = list(subs.values())
    return out


def attempt_trajectory(
    session_id: str,
    agent: Mapping[str, Any],
    phases: Sequence[Mapping[str, Any]],
    calls: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The root trajectory of an attempt. agent: {"name", "version", "model_name"}; phases:
    {"name", "status", "prompt", "result", "conversation": Conversation or None, "version",
    "started_at": when it began (ISO 8601), the timestamp of its step}; calls: every record of
    the attempt's proxy."""
    by_response = {str(c["response_id"]): c for c in calls if c.get("response_id")}
    embedded, steps = [], []
    for i, phase in enumerate(phases, 1):
        conversation = phase.get("conversation") or Conversation(str(agent.get("name")), None, [])
        sub = trajectory(
            conversation,
            f"{session_id}/phase-{i}-{phase['name']}",
            by_response,
            str(phase.get("version") or agent.get("version") or "unknown"),
            phase.get("prompt"),
        )
        embedded.append(sub)
        ref = {"trajectory_id": sub["trajectory_id"]}
        if sub.get("session_id"):
            ref["session_id"] = sub["session_id"]
        outcome = {"content": phase.get("result") or "", "subagent_trajectory_ref": [ref]}
        step: dict[str, Any] = {
            "step_id": i,
            "source": "system",
            "message": f"phase {i}, {phase['name']}: {phase.get('status') or 'not run'}",
        }
        if phase.get("started_at"):
            step["timestamp"] = phase["started_at"]
        steps.append(dict(step, observation={"results": [outcome]}))
    if not steps:
        steps = [{"step_id": 1, "source": "system", "message": "no phase ran"}]
    billed = [c for c in calls if c.get("tokens")]
    totals = {
        k: sum(int(c["tokens"].get(k) or 0) for c in billed)
        for k in ("input", "output", "cache_read", "cache_write")
    }
    costs = [c["cost_usd"] for c in billed if c.get("cost_usd") is not None]
    root = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": session_id,
        "agent": {k: v for k, v in agent.items() if v is not None},
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": totals["input"] + totals["cache_read"] + totals["cache_write"],
            "total_completion_tokens": totals["output"],
            "total_cached_tokens": totals["cache_read"],
            "total_cost_usd": round(sum(costs), 10),
            "total_steps": len(steps),
            "extra": {
                "calls": len(calls),
                "billed_calls": len(billed),
                "unpriced_calls": len(billed) - len(costs),
            },
        },
        "notes": (
            "One system step per phase; each phase's trajectory is embedded in "
            "subagent_trajectories. final_metrics count every model call the metering proxy "
            "recorded in the attempt, retries included."
        ),
        "subagent_trajectories": embedded,
    }
    return root


def dumps(trajectory: Mapping[str, Any]) -> str:
    return json.dumps(trajectory, indent=1, ensure_ascii=False) + "\n"
