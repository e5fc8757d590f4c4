# Shared connection options of every nmo.maintenance module.


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path of a kubeconfig file.
      - When no connection option is given, C(KUBECONFIG) or C(~/.kube/config) is used, and
        inside a pod its service account.
      - Can also be set with E(K8S_AUTH_KUBECONFIG).
    type: raw
  context:
    description:
      - The kubeconfig context to use. Can also be set with E(K8S_AUTH_CONTEXT).
    type: str
  host:
    description:
      - URL of the API server. Can also be set with E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token for the API server. Can also be set with E(K8S_AUTH_API_KEY).
      - As with C(kubernetes.core), it is added to what the kubeconfig gives. When that includes
        a client certificate (or O(client_cert) is given), both are sent and the API server
        authenticates the certificate, not the token; the module then warns. To act as the
        token's user, give O(host) and O(api_key) without a kubeconfig.
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's certificate. Can also be set with E(K8S_AUTH_VERIFY_SSL).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path of the CA certificate that signed the API server's certificate.
        Can also be set with E(K8S_AUTH_SSL_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path of a client certificate. Can also be set with E(K8S_AUTH_CERT_FILE).
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path of the client certificate's key. Can also be set with E(K8S_AUTH_KEY_FILE).
    type: path
    aliases: [key_file]
  proxy:
    description:
      - URL of an HTTP proxy to reach the API server through. Can also be set with E(K8S_AUTH_PROXY).
    type: str
requirements:
  - python >= 3.9
  - kubernetes >= 24.2.0
notes:
  - Every option is checked before the first write, and a bad value fails the task with the
    option and the value named and nothing written. Node names are RFC 1123 subdomains (at most
    253 lower-case letters, digits, C(-) and C(.), starting and ending with a letter or digit);
    label keys are qualified names; times in seconds are finite numbers (no C(nan), no C(inf))
    of at most 604800 (a week).
  - Certificates and keys given inline in a kubeconfig (C(*-data)) are kept in memory; nothing
    is written to disk, not even for kubeconfigs read through the C(kubernetes) package.
  - The modules run on the controller; delegate them to C(localhost) when the play's hosts are nodes.
  - Set the connection once for all modules with
    C(module_defaults) and the action group C(group/nmo.maintenance.nmo).
"""
