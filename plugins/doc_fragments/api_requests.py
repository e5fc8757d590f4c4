# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The return values every module run by module_utils/adapter.py has (``api_requests`` and
``api_requests_by``, which the adapter adds to each result), documented once.

ansible-core merges a fragment's DOCUMENTATION into a module's, never its RETURN, and
ansible-doc and ansible-test read a module's RETURN as the one literal string it is. So this
RETURN is the source, and hack/shared_docs.py copies it into the RETURN of each module that
calls the adapter's ``run``, between its markers; tests/unit/test_doc_fragments.py fails,
naming the module, when a copy is not this text. No module names this fragment in
``extends_documentation_fragment`` (it has no DOCUMENTATION).
"""

from __future__ import annotations


class ModuleDocFragment:
    RETURN = r"""
api_requests:
  description:
    - Requests this task made to the API server; a watch counts as one.
  returned: success
  type: int
  sample: 14
api_requests_by:
  description:
    - The same requests by kind, as the API server's audit log names them (C(verb resource)), for
      example V(list pods), V(create pods/eviction), V(patch nodemaintenances/status), V(update leases).
  returned: success
  type: dict
  sample: {"get nodes": 1, "list pods": 2, "create pods/eviction": 11}
"""
