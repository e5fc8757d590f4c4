# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The events option of nmo_crd and nmo_maintenance (module_utils/specs.py, EVENTS).


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  events:
    description:
      - Events to record, aggregated (a repeat bumps C(count)). By default on the
        C(NodeMaintenance); with C(on=node), on the Node.
    type: list
    elements: dict
    default: []
    suboptions:
      reason:
        description: Reason, for example C(SucceedMaintenance) or C(FailedMaintenance).
        type: str
        required: true
      text:
        description: The event's message; defaults to the message of docs/design.md §7.1 for a known reason.
        type: str
      type:
        description: Event type; defaults to the type of docs/design.md §7.1 for a known reason.
        type: str
        choices: [Normal, Warning]
      "on":
        description: What the event is about, V(maintenance) (the C(NodeMaintenance)) or V(node).
        type: str
        choices: [maintenance, node]
        default: maintenance
"""
