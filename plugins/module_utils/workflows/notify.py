"""Sending one notification to every target, from the controller (docs/design.md §17.1).

The targets are asked at once, each in a thread of its own, so a slow one costs its own
timeout and nobody else's; each gets at most ``policy.attempts`` tries of ``policy.timeout``
seconds (webhook.request). Nothing here fails: a target that does not take the message is a
warning naming its kind, its index and its host (the rest of the URL is a secret).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from datetime import datetime
from typing import Any, Dict, List, Optional

from ..api import webhook
from ..errors import InputError
from ..model import notify
from ..model.times import parse_time, utcnow


def call(params: Dict[str, Any], dry_run: bool = False, now: Optional[datetime] = None) -> Dict[str, Any]:
    """nmo_notify: the module's parameters in, the result out."""
    attempts = int(params.get("attempts") or 3)
    timeout = float(params.get("timeout") or 5.0)
    if not 1 <= attempts <= 5:
        raise InputError(f"attempts must be between 1 and 5, got {attempts}")
    if not 0 < timeout <= 60:
        raise InputError(f"timeout must be more than 0 and at most 60 seconds, got {timeout}")
    moment = now or utcnow()
    details = dict(params.get("details") or {})
    since = parse_time(details.pop("since", None) or None)
    if since is not None and details.get("took_seconds") is None:
        details["took_seconds"] = round((moment - since).total_seconds())
    if params.get("node") and params["event"].startswith("node_") and not dry_run:
        note(params["run_id"], params["event"], params["node"], details.get("outcome"))
    return send(list(params.get("targets") or []), params["event"], params["run_id"], params.get("node"), details,
                webhook.Policy(timeout=timeout, attempts=attempts), moment, dry_run)


def journal_path(run_id: str) -> str:
    """Where the run's node events are noted on the controller, for the run_finished counts the
    heartbeat sends when the run ends (a failed node stops the playbook before any last play)."""
    return os.path.join(tempfile.gettempdir(), f"nmo-maintenance-{os.getuid()}", f"{run_id}.jsonl")


def note(run_id: str, event: str, node: str, outcome: Optional[str] = None) -> None:
    """One node event in the journal; a failed node's outcome with it (skipped and quarantined
    nodes are counted apart from failed ones)."""
    path = journal_path(run_id)
    entry = {"event": event, "node": node, **({"outcome": str(outcome)} if outcome else {})}
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a", encoding="utf-8") as journal:
            journal.write(json.dumps(entry) + "\n")
    except OSError:
        pass  # the counts of run_finished will miss it; the maintenance goes on


def read_journal(run_id: str, remove: bool = False) -> List[Dict[str, Any]]:
    path = journal_path(run_id)
    entries: List[Dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as journal:
            for line in journal:
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    continue
        if remove:
            os.unlink(path)
    except OSError:
        pass
    return entries


def finished(targets: List[Dict[str, Any]], run_id: str, why: str, report: Optional[str] = None,
             policy: Optional[webhook.Policy] = None) -> Dict[str, Any]:
    """run_finished, with the counts of the run's node events and the report's path when known."""
    counts = notify.tally(read_journal(run_id, remove=True))
    return send(targets, "run_finished", run_id, None, {"counts": counts, "report": report, "ended": why}, policy)


def send(targets: List[Dict[str, Any]], event: str, run_id: str, node: Optional[str] = None,
         details: Optional[Dict[str, Any]] = None, policy: Optional[webhook.Policy] = None,
         now: Optional[datetime] = None, dry_run: bool = False) -> Dict[str, Any]:
    notify.validate_targets(targets)
    policy = policy or webhook.Policy()
    details = {k: v for k, v in (details or {}).items() if v not in (None, "")}
    text = notify.message(event, run_id, node, details)  # refuses an unknown event before sending
    moment = now or utcnow()
    outcomes: List[Dict[str, Any]] = [{} for _target in targets]

    def one(index: int, target: Dict[str, Any]) -> None:
        raw, headers = notify.request_for(target, event, run_id, node, details, moment)
        answer = webhook.request("POST", str(target["url"]), headers=headers, policy=policy, raw=raw,
                                 ca_path=target.get("ca_path"), validate_certs=target.get("validate_certs") is not False)
        outcomes[index] = {"index": index, "kind": target.get("kind") or "webhook",
                           "target": webhook.safe_target(str(target["url"])), "ok": answer.ok,
                           "status": answer.status, "attempts": answer.attempts, "seconds": answer.seconds,
                           "error": answer.error}

    if not dry_run:
        threads = [threading.Thread(target=one, args=(i, t), daemon=True) for i, t in enumerate(targets)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    about = f" of node {node}" if node else ""
    warnings = [f"notification {event}{about} not delivered to {o['kind']} target #{o['index']} ({o['target']}) "
                f"after {o['attempts']} attempt(s): {o['error']}; the maintenance goes on"
                for o in outcomes if o and not o["ok"]]
    return {"event": event, "message": text, "delivered": sum(1 for o in outcomes if o.get("ok")),
            "undelivered": sum(1 for o in outcomes if o and not o["ok"]), "targets": [o for o in outcomes if o],
            "warnings": warnings}


def blocked_by(nm: Dict[str, Any]) -> str:
    """What holds a NodeMaintenance back, as its status says; empty when nothing does."""
    status = nm.get("status") or {}
    if status.get("phase") not in ("Pending", "Running", None, ""):
        return ""
    said = []
    pending = list(status.get("pendingPods") or [])
    if pending:
        said.append(f"{len(pending)} pod(s) not evicted yet ({', '.join(pending[:5])}"
                    f"{', ...' if len(pending) > 5 else ''})")
    if status.get("lastError"):
        said.append(f"last error: {status['lastError']}")
    return "; ".join(said)


class BlockWatch:
    """The heartbeat's part: a node of this run whose NodeMaintenance says it is held back
    (pending pods, a last error: a PodDisruptionBudget, a slot or lease another holds) with
    no progress (the same phase and drainProgress) for longer than ``after`` seconds gets one
    node_blocked notification for that stretch, sent from a thread of its own so the beat
    goes on."""

    def __init__(self, targets: List[Dict[str, Any]], after: float, policy: Optional[webhook.Policy] = None,
                 clock: Any = None) -> None:
        notify.validate_targets(targets)
        self.targets = targets
        self.after = after
        self.policy = policy or webhook.Policy()
        self.clock = clock or utcnow
        self.since: Dict[str, Any] = {}  # node -> (key, first seen blocked, told)
        self.threads: List[threading.Thread] = []

    def beat(self, run_id: str, items: List[Dict[str, Any]], run_of: Any) -> List[str]:
        now = self.clock()
        told: List[str] = []
        for nm in items:
            node = (nm.get("spec") or {}).get("nodeName") or ""
            what = blocked_by(nm) if run_of(nm) == run_id else ""
            if not what:
                self.since.pop(node, None)
                continue
            status = nm.get("status") or {}
            key = (status.get("phase"), status.get("drainProgress"))
            seen = self.since.get(node)
            if seen is None or seen[0] != key:
                self.since[node] = (key, now, False)
                continue
            if seen[2] or (now - seen[1]).total_seconds() < self.after:
                continue
            self.since[node] = (key, seen[1], True)
            details = {"what": what, "blocked_seconds": round((now - seen[1]).total_seconds()),
                       "maintenance": nm["metadata"]["name"], "phase": status.get("phase"),
                       "pending_pods": list(status.get("pendingPods") or []), "last_error": status.get("lastError")}
            thread = threading.Thread(target=send, args=(self.targets, "node_blocked", run_id, node, details,
                                                         self.policy), daemon=True)
            thread.start()
            self.threads.append(thread)
            told.append(node)
        return told
