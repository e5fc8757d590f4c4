#!/usr/bin/env python
"""Write the documentation several files share from its one source.

- The return values ``api_requests`` and ``api_requests_by`` (plugins/doc_fragments/api_requests.py,
  RETURN) into the RETURN of every module that calls module_utils/adapter.py's ``run``, which adds
  them to each result. ansible-core merges no RETURN fragment, and a module's RETURN must stay
  one literal string, so each module holds a copy between markers.
- The notification targets (plugins/doc_fragments/notify.py, the ``targets`` of DOCUMENTATION)
  into the sub-options of nmo_run's ``notify.targets`` (the fragment's RUN) and the options of
  the role's ``node_maintenance_notify`` (roles/node_maintenance/meta/argument_specs.yml, with
  ``no_log`` where module_utils/specs.py's NOTIFY_TARGETS has it).

tests/unit/test_doc_fragments.py fails, naming the file, when one is not what this writes.

  hack/shared_docs.py          rewrite what is out of date
  hack/shared_docs.py --check  exit 1 when something is out of date, naming it
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from role_docs import _between, _dump, importable, regenerate  # noqa: E402  (hack/role_docs.py: the same YAML, the same markers' rule)

ROOT = Path(__file__).resolve().parents[1]
MODULES = ROOT / "plugins" / "modules"
RETURNS = ROOT / "plugins" / "doc_fragments" / "api_requests.py"
NOTIFY = ROOT / "plugins" / "doc_fragments" / "notify.py"
ROLE_SPECS = ROOT / "roles" / "node_maintenance" / "meta" / "argument_specs.yml"
COMMAND = "hack/shared_docs.py"
RETURN_BEGIN = ("# written by hack/shared_docs.py from plugins/doc_fragments/api_requests.py "
                "(what the adapter adds): run it after a change there")
NOTIFY_BEGIN = "# written by hack/shared_docs.py from the targets of plugins/doc_fragments/notify.py: run it after a change there"
END = "# end of what hack/shared_docs.py writes"
ADAPTER_RUN = "from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run"


def _literal(text: str, name: str) -> Tuple[int, int]:
    """Where the body of the raw string ``name = r\"\"\"...\"\"\"`` is in a file's text."""
    found = re.search(rf'^(?:    )?{name} = r"""\n', text, re.M)
    if found is None:
        raise ValueError(f"no {name} literal")
    return found.end(), text.index('"""', found.end())


def shared_return() -> str:
    text = RETURNS.read_text()
    start, stop = _literal(text, "RETURN")
    return text[start:stop]


def adapter_modules() -> List[Path]:
    """The modules whose result the adapter makes, so carries its two return values."""
    return sorted(p for p in MODULES.glob("nmo_*.py") if ADAPTER_RUN in p.read_text())


def module_return(text: str) -> str:
    """The module's text with its RETURN ending in the shared return values, between markers.
    A RETURN without the markers yet loses its own ``api_requests``/``api_requests_by`` first."""
    start, stop = _literal(text, "RETURN")
    body = text[start:stop]
    if RETURN_BEGIN not in body:
        body = re.sub(r"^api_requests(?:_by)?:\n(?:[ #].*\n|\n)*", "", body, flags=re.M)
        body += f"{RETURN_BEGIN}\n{END}\n"
    body = _between(body, RETURN_BEGIN, END, shared_return())
    return text[:start] + body + text[stop:]


def notify_targets() -> Dict[str, Any]:
    text = NOTIFY.read_text()
    start, stop = _literal(text, "DOCUMENTATION")
    return yaml.safe_load(text[start:stop])["options"]["targets"]["suboptions"]


def notify_fragment(text: str) -> str:
    """nmo_run's ``notify.targets`` (the fragment's RUN): the same sub-options."""
    return _between(text, NOTIFY_BEGIN, END, _dump(notify_targets(), 10))


def role_notify(text: str) -> str:
    """The role's ``node_maintenance_notify``: the same, ``no_log`` as the spec has it."""
    importable()
    from ansible_collections.nmo.maintenance.plugins.module_utils import specs

    options = {}
    for name, option in notify_targets().items():
        options[name] = dict(option)
        if specs.NOTIFY_TARGETS["options"][name].get("no_log"):
            options[name]["no_log"] = True
    return _between(text, NOTIFY_BEGIN, END, _dump(options, 10))


def targets() -> List[Tuple[Path, Callable[[str], str]]]:
    return [*((path, module_return) for path in adapter_modules()),
            (NOTIFY, notify_fragment), (ROLE_SPECS, role_notify)]


def main(argv: List[str]) -> int:
    return regenerate(targets(), argv, COMMAND)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
