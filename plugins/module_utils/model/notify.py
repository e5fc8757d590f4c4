"""What a notification says, and the body each kind of target gets (docs/design.md §17.1). Pure.

Kinds: ``slack`` (an incoming webhook's JSON: ``text`` and ``blocks``; Mattermost and
Rocket.Chat take the same), ``teams`` (a Teams workflow webhook: a message with one Adaptive
Card attachment), ``webhook`` (the documented JSON below, optionally signed). A webhook body::

    {"version": 1, "event": "node_done", "run": "<run id>", "node": "<node or null>",
     "message": "<the sentence the chat kinds show>", "time": "<RFC 3339, UTC>",
     "details": {...event-specific...}}

With a ``secret``, the request carries ``X-NMO-Timestamp`` (Unix seconds) and
``X-NMO-Signature: sha256=<hex>``, the HMAC-SHA256 under the secret of
``<timestamp>.<body>`` (the timestamp, a dot, then the request body's bytes exactly as sent):
the receiver recomputes it and refuses a stale timestamp.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple

from ..errors import InputError
from . import blocked
from .times import format_seconds

KINDS = ("slack", "teams", "webhook")
EVENTS = ("run_started", "node_begun", "node_blocked", "node_failed", "node_done", "run_finished")
SIGNATURE_HEADER = "X-NMO-Signature"
TIMESTAMP_HEADER = "X-NMO-Timestamp"
TITLES = {"run_started": "Maintenance run started", "node_begun": "Node maintenance begun",
          "node_blocked": "Node maintenance blocked", "node_failed": "Node maintenance failed",
          "node_done": "Node back in service", "run_finished": "Maintenance run finished"}
EMOJI = {"run_started": ":arrow_forward:", "node_begun": ":wrench:", "node_blocked": ":hourglass:",
         "node_failed": ":x:", "node_done": ":white_check_mark:", "run_finished": ":checkered_flag:"}


def validate_targets(targets: List[Dict[str, Any]]) -> None:
    """Refused before anything is sent; the message never repeats a URL (it is a secret)."""
    for index, target in enumerate(targets or []):
        url = str(target.get("url") or "")
        kind = target.get("kind") or "webhook"
        if not url.startswith(("http://", "https://")):
            raise InputError(f"node_maintenance_notify[{index}].url must be an http:// or https:// URL")
        if kind not in KINDS:
            raise InputError(f"node_maintenance_notify[{index}].kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if target.get("secret") and kind != "webhook":
            raise InputError(f"node_maintenance_notify[{index}].secret signs kind webhook only (this one is {kind})")


def duration_text(seconds: Optional[float]) -> str:
    """``3 min 12 s``, ``1 h 05 min``, ``12 s``."""
    if seconds is None:
        return "an unknown time"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


def message(event: str, run_id: str, node: Optional[str], details: Dict[str, Any]) -> str:
    """The one sentence every kind shows."""
    d = details or {}
    if event == "run_started":
        nodes = list(d.get("nodes") or [])
        shown = ", ".join(nodes[:10]) + (f" and {len(nodes) - 10} more" if len(nodes) > 10 else "")
        window = f", window until {d['window_end']}" if d.get("window_end") else ""
        return f"Maintenance run {run_id} started: {len(nodes)} node(s) ({shown}){window}"
    if event == "node_begun":
        return f"Node {node}: maintenance begun ({d.get('maintenance') or 'NodeMaintenance'}, run {run_id})"
    if event == "node_blocked":
        return (f"Node {node}: blocked for {duration_text(d.get('blocked_seconds'))} "
                f"(run {run_id}): {d.get('what') or 'no progress'}")
    if event == "node_failed":
        outcome = d.get("outcome") or ("rolled back" if d.get("rolled_back") else "kept out of service")
        return f"Node {node}: maintenance failed ({outcome}, run {run_id}): {d.get('error') or 'no error recorded'}"
    if event == "node_done":
        return f"Node {node}: back in service after {duration_text(d.get('took_seconds'))} (run {run_id})"
    if event == "run_finished":
        counts = d.get("counts") or {}
        said = ", ".join(f"{v} {k}" for k, v in counts.items()) or "no nodes"
        report = f". Report: {d['report']}" if d.get("report") else ""
        return f"Maintenance run {run_id} finished: {said}{report}"
    raise InputError(f"event must be one of {', '.join(EVENTS)}, got {event!r}")


def facts(event: str, run_id: str, node: Optional[str], details: Dict[str, Any]) -> List[Tuple[str, str]]:
    """Title/value pairs the chat kinds show under the sentence."""
    pairs = [("Run", run_id)]
    if node:
        pairs.append(("Node", node))
    for key in ("maintenance", "window_end", "error", "outcome", "what", "report"):
        if (details or {}).get(key):
            pairs.append((key.replace("_", " ").capitalize(), str(details[key])))
    if (details or {}).get("took_seconds") is not None:
        pairs.append(("Took", duration_text(details["took_seconds"])))
    if (details or {}).get("counts"):
        pairs.append(("Nodes", ", ".join(f"{v} {k}" for k, v in details["counts"].items())))
    return pairs


def webhook_body(event: str, run_id: str, node: Optional[str], details: Dict[str, Any], now: datetime) -> Dict[str, Any]:
    return {"version": 1, "event": event, "run": run_id, "node": node,
            "message": message(event, run_id, node, details), "time": format_seconds(now), "details": details or {}}


def slack_body(event: str, run_id: str, node: Optional[str], details: Dict[str, Any]) -> Dict[str, Any]:
    text = f"{EMOJI[event]} {message(event, run_id, node, details)}"
    fields = [{"type": "mrkdwn", "text": f"*{k}*\n{v}"} for k, v in facts(event, run_id, node, details)][:10]
    return {"text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}},
                       {"type": "section", "fields": fields}]}


def teams_body(event: str, run_id: str, node: Optional[str], details: Dict[str, Any]) -> Dict[str, Any]:
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {"type": "TextBlock", "text": TITLES[event], "weight": "Bolder", "size": "Medium", "wrap": True,
             "color": "Attention" if event in ("node_failed", "node_blocked") else "Default"},
            {"type": "TextBlock", "text": message(event, run_id, node, details), "wrap": True},
            {"type": "FactSet", "facts": [{"title": k, "value": v} for k, v in facts(event, run_id, node, details)]},
        ],
    }
    return {"type": "message",
            "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None,
                             "content": card}]}


def encode(body: Dict[str, Any]) -> bytes:
    """The bytes sent (and signed): compact JSON, keys in order."""
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def signature(secret: str, timestamp: int, raw: bytes) -> str:
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + raw, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, timestamp: str, raw: bytes, signed: str) -> bool:
    """What a receiver does (and the tests): recompute and compare in constant time."""
    return hmac.compare_digest(signature(secret, int(timestamp), raw), signed)


def request_for(target: Dict[str, Any], event: str, run_id: str, node: Optional[str], details: Dict[str, Any],
                now: datetime) -> Tuple[bytes, Dict[str, str]]:
    """The bytes and headers one target gets."""
    kind = target.get("kind") or "webhook"
    if kind == "slack":
        return encode(slack_body(event, run_id, node, details)), {}
    if kind == "teams":
        return encode(teams_body(event, run_id, node, details)), {}
    raw = encode(webhook_body(event, run_id, node, details, now))
    headers: Dict[str, str] = {}
    if target.get("secret"):
        stamp = int(now.timestamp())
        headers = {TIMESTAMP_HEADER: str(stamp), SIGNATURE_HEADER: signature(str(target["secret"]), stamp, raw)}
    return raw, headers


def tally(events: List[Dict[str, Any]]) -> Dict[str, int]:
    """The run's counts from its node events, the last event of each node deciding:
    ``done`` (back in service), ``failed``, ``skipped`` and ``quarantined`` (a node_failed whose
    outcome says node_maintenance_on_blocked left it so, docs/design.md §18.4), ``in maintenance``
    (begun, not ended)."""
    last: Dict[str, Dict[str, Any]] = {}
    for entry in events:
        if entry.get("node") and entry.get("event") in ("node_begun", "node_done", "node_failed"):
            last[str(entry["node"])] = entry
    counts = {"done": 0, "failed": 0, "skipped": 0, "quarantined": 0, "in maintenance": 0}
    for entry in last.values():
        if entry["event"] == "node_failed":
            counts[blocked.left_as(entry.get("outcome")) or "failed"] += 1
        else:
            counts["done" if entry["event"] == "node_done" else "in maintenance"] += 1
    return {k: v for k, v in counts.items() if v or k == "done"}
