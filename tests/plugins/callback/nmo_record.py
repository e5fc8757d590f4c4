# Test helper: writes every task result as one JSON line to $NMO_RECORD_FILE.

DOCUMENTATION = r"""
name: nmo_record
type: aggregate
short_description: record task results as JSON lines (tests only)
description:
  - Appends one JSON object per task result to the file named by E(NMO_RECORD_FILE).
"""

import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nmo_record"
    CALLBACK_NEEDS_ENABLED = True

    def _write(self, result, status):
        path = os.environ.get("NMO_RECORD_FILE")
        if not path:
            return
        outcome = dict(result._result)
        outcome["failed"] = status == "failed"
        record = {"task": result._task.get_name(), "host": result._host.get_name(), "status": status,
                  "action": result._task.action, "result": outcome}
        with open(path, "a") as handle:
            handle.write(json.dumps(record, default=str) + "\n")

    def v2_runner_on_ok(self, result):
        self._write(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._write(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._write(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._write(result, "unreachable")
