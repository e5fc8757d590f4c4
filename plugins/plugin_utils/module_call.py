# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Call a module's own ``main()`` in this process, as if Ansible had started it.

``AnsibleModule`` reads its arguments from the bytes Ansible would hand a shipped module
(``ansible.module_utils.basic._ANSIBLE_ARGS``, the JSON of ``{"ANSIBLE_MODULE_ARGS": ...}``,
with the serialization profile beside it since ansible-core 2.19), validates them, masks
``no_log`` values, collects warnings and deprecations, prints its result as JSON and leaves
through ``sys.exit``. Here, for the time of one call:

- the arguments are those bytes, so ``AnsibleModule`` takes them the way it always does
  (no ``_load_params`` override, no patched class), and never looks at ``sys.argv`` or
  stdin, where a module run by hand finds them;
- ``sys.stdout`` and ``sys.stderr`` are buffers: the result JSON, and anything a library
  prints, never reach the worker's own streams;
- the module-side warning and deprecation lists start empty, so one task's warnings are
  never another's (on the controller, ansible-core 2.19 hands them to Display instead, and
  the task executor puts those of the task in its result);
- ``SystemExit`` is caught and any other exception becomes a traceback on stderr with exit
  code 1, as the Python of a shipped module would end.

Everything is put back afterwards, so a worker that runs several calls (or one that runs
other code after it) sees no trace of the module. The output is then parsed exactly as a
shipped module's output is (``ActionBase._parse_returned_data``).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator

from ansible.module_utils import basic
from ansible.module_utils.common import warnings as module_warnings

try:  # ansible-core 2.19 and later: arguments go with a serialization profile
    from ansible.module_utils.common.json import Direction, get_module_encoder
except ImportError:  # pragma: no cover - ansible-core 2.16 to 2.18
    Direction = get_module_encoder = None

PROFILE = "legacy"  # what Ansible gives a Python module that declares no metadata (ours)
GLOBAL_ARGS = ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE", "_PARSED_MODULE_ARGS")  # those basic.py has
WARNING_STORES = ("_global_warnings", "_global_deprecations")


@dataclass
class Output:
    """What a shipped module's Python would have written, and how it would have ended."""

    stdout: str
    stderr: str
    rc: int
    missing_import: str = ""  # the module (or package) an ImportError out of main() named

    def as_result(self) -> Dict[str, Any]:
        """The form ``ActionBase._parse_returned_data`` reads (that of a finished command)."""
        return {"rc": self.rc, "stdout": self.stdout, "stderr": self.stderr}


def encode_args(args: Dict[str, Any], profile: str = PROFILE) -> bytes:
    """The bytes Ansible sends a shipped module: ``{"ANSIBLE_MODULE_ARGS": args}`` as JSON."""
    wrapped = {"ANSIBLE_MODULE_ARGS": args}
    if get_module_encoder is None:  # pragma: no cover - ansible-core before 2.19
        from ansible.module_utils.common.json import AnsibleJSONEncoder

        return json.dumps(wrapped, cls=AnsibleJSONEncoder).encode()
    return json.dumps(wrapped, cls=get_module_encoder(profile, Direction.CONTROLLER_TO_MODULE)).encode()


@contextlib.contextmanager
def module_args(args: Dict[str, Any], profile: str = PROFILE) -> Iterator[None]:
    """``AnsibleModule`` instances made inside read ``args``; the previous state is put back."""
    saved = {name: getattr(basic, name) for name in GLOBAL_ARGS if hasattr(basic, name)}
    try:
        basic._ANSIBLE_ARGS = encode_args(args, profile)  # pylint: disable=protected-access
        if "_ANSIBLE_PROFILE" in saved:
            basic._ANSIBLE_PROFILE = profile  # pylint: disable=protected-access
        yield
    finally:
        for name, value in saved.items():
            setattr(basic, name, value)


@contextlib.contextmanager
def own_warnings() -> Iterator[None]:
    """Module-side warnings and deprecations start empty and are put back as they were."""
    stores = [getattr(module_warnings, name) for name in WARNING_STORES if hasattr(module_warnings, name)]
    saved = [copy.copy(store) for store in stores]
    for store in stores:
        store.clear()
    try:
        yield
    finally:
        for store, before in zip(stores, saved):
            store.clear()
            if isinstance(store, dict):
                store.update(before)
            else:  # a list before ansible-core 2.19
                store.extend(before)


def exit_code(code: Any) -> int:
    """The exit status ``sys.exit(code)`` gives a process."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1  # sys.exit("message") prints the message and exits 1


def call_main(main: Callable[[], Any], args: Dict[str, Any], profile: str = PROFILE) -> Output:
    """Run ``main`` with ``args`` as its module arguments; its output and exit status."""
    out, err = io.StringIO(), io.StringIO()
    rc, missing = 0, ""
    with module_args(args, profile), own_warnings(), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            main()
        except SystemExit as exc:
            rc = exit_code(exc.code)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=err)
        except Exception as exc:  # pylint: disable=broad-exception-caught  # a shipped module's Python would print it
            traceback.print_exc(file=err)
            rc = 1
            if isinstance(exc, ImportError):  # imported late (urllib3 when connecting): this Python lacks it
                missing = exc.name or str(exc)
    return Output(out.getvalue(), err.getvalue(), rc, missing)
