# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The alertmanager option of nmo_run and nmo_silence (module_utils/specs.py, ALERTMANAGER).


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  alertmanager:
    description:
      - The Alertmanager that gets a silence for each node in maintenance (docs/notifications.md).
        Its API v2 is used (C(/api/v2/silences)). Alertmanager down or refusing is a warning,
        never a failure.
    type: dict
    suboptions:
      url:
        description: Its base URL, for example C(http://alertmanager.monitoring:9093).
        type: str
        required: true
      matchers:
        description:
          - Matcher templates in Alertmanager's syntax (C(name="value"), C(name!="value"),
            C(name=~"regex"), C(name!~"regex")) with C({node}) for the node's name (single
            braces, which Ansible does not template; escaped in a regular expression). At
            least one must name the node.
        type: list
        elements: str
        default: ['node="{node}"', 'instance=~"{node}(:[0-9]+)?"']
      duration:
        description:
          - Seconds ahead of now each creation and extension sets C(endsAt), at least 30. The
            run's heartbeat extends the silence once half of it is gone; a killed run's silence
            lapses at most this long after.
        type: int
        default: 600
      username:
        description: Basic authentication user.
        type: str
      password:
        description: Basic authentication password (no_log).
        type: str
      token:
        description: A bearer token (no_log); preferred over O(alertmanager.username).
        type: str
      ca_path:
        description: CA bundle to verify an https URL with.
        type: path
      validate_certs:
        description: Verify the server's certificate.
        type: bool
        default: true
      timeout:
        description: Seconds for each request (two attempts at most).
        type: float
        default: 5.0
"""
