"""Alertmanager's API v2 silences: create (or update), read, expire (docs/design.md §17.2).

``POST /api/v2/silences`` answers ``{"silenceID": ...}``; given the ``id`` of a silence that
is still active with the same matchers and ``startsAt``, Alertmanager (v0.27) updates it in
place and answers the same id; otherwise it makes a new silence, expires the old one, and
answers the new id. The caller keeps whatever id comes back. ``DELETE /api/v2/silence/{id}``
expires a silence (it stays listed, state ``expired``). Credentials go in the
``Authorization`` header and never in a message.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..errors import NmoError
from . import webhook


class AlertmanagerError(NmoError):
    """Alertmanager did not do what was asked; the role turns it into a warning."""


@dataclass(frozen=True)
class Alertmanager:
    url: str
    username: Optional[str] = None
    password: Optional[str] = None
    token: Optional[str] = None
    ca_path: Optional[str] = None
    validate_certs: bool = True
    policy: webhook.Policy = webhook.Policy(timeout=5.0, attempts=2)

    @classmethod
    def from_params(cls, am: Dict[str, Any], policy: Optional[webhook.Policy] = None) -> Alertmanager:
        return cls(url=str(am["url"]).rstrip("/"), username=am.get("username"), password=am.get("password"),
                   token=am.get("token"), ca_path=am.get("ca_path"),
                   validate_certs=am.get("validate_certs") is not False,
                   policy=policy or webhook.Policy(timeout=float(am.get("timeout") or 5.0), attempts=2))

    @property
    def target(self) -> str:
        return webhook.safe_target(self.url)

    def _headers(self) -> Dict[str, str]:
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.username:
            pair = f"{self.username}:{self.password or ''}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
        return {}

    def _call(self, method: str, path: str, body: Any = None) -> webhook.Answer:
        return webhook.request(method, self.url + path, body, self._headers(), self.policy,
                               self.ca_path, self.validate_certs)

    def _fail(self, what: str, answer: webhook.Answer) -> AlertmanagerError:
        said = answer.body if isinstance(answer.body, str) else ""
        return AlertmanagerError(f"Alertmanager at {self.target}: {what} failed: "
                                 f"{answer.error or answer.status}{': ' + said.strip()[:200] if said else ''}")

    def post_silence(self, body: Dict[str, Any]) -> str:
        """Create or update; the id Alertmanager answers (a new one when it replaced the silence)."""
        answer = self._call("POST", "/api/v2/silences", body)
        if not answer.ok or not isinstance(answer.body, dict) or not answer.body.get("silenceID"):
            raise self._fail("creating the silence" if not body.get("id") else f"extending silence {body['id']}",
                             answer)
        return str(answer.body["silenceID"])

    def get_silence(self, silence_id: str) -> Optional[Dict[str, Any]]:
        """The silence, or None when Alertmanager does not know the id."""
        answer = self._call("GET", f"/api/v2/silence/{silence_id}")
        if answer.status == 404:
            return None
        if not answer.ok or not isinstance(answer.body, dict):
            raise self._fail(f"reading silence {silence_id}", answer)
        return answer.body

    def list_silences(self) -> List[Dict[str, Any]]:
        answer = self._call("GET", "/api/v2/silences")
        if not answer.ok or not isinstance(answer.body, list):
            raise self._fail("listing the silences", answer)
        return answer.body

    def expire_silence(self, silence_id: str) -> bool:
        """Expire it; False when it was already expired or unknown (nothing to do)."""
        answer = self._call("DELETE", f"/api/v2/silence/{silence_id}")
        if answer.ok:
            return True
        if answer.status in (404, 500) and self.get_silence(silence_id) is None:
            return False
        current = self.get_silence(silence_id)
        if current is not None and (current.get("status") or {}).get("state") == "expired":
            return False
        raise self._fail(f"expiring silence {silence_id}", answer)
