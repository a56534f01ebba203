"""The admission policy in deploy/kubernetes/airlock.yaml, evaluated without a cluster.

Pod Security's levels cannot admit one hostPath without all, so Airlock's two namespaces carry the
privileged label and a ValidatingAdmissionPolicy holds their pods to the restricted level plus
exactly their node paths. This evaluates that policy's CEL (with cel-python) the way the API
server would: the manifests' own pods must pass every rule, and each pod below, which breaks one
rule, must be refused. Run by `cargo xtask cluster` (check_manifests); exits non-zero on a miss.
"""

import copy
import sys

import celpy
import yaml

POLICY = "airlock-restricted-with-node-paths"


def load(path):
    with open(path, encoding="utf-8") as file:
        return [doc for doc in yaml.safe_load_all(file) if doc]


def compile_policy(docs):
    [policy] = [
        d for d in docs
        if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == POLICY
    ]
    [binding] = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["policyName"] == POLICY, "the binding names another policy"
    assert "Deny" in binding["spec"]["validationActions"], "the binding must deny"
    [selector] = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    env = celpy.Environment()
    program = lambda text: env.program(env.compile(text))
    variables = [(v["name"], program(v["expression"])) for v in policy["spec"]["variables"]]
    rules = [(program(v["expression"]), v["message"]) for v in policy["spec"]["validations"]]
    return variables, rules, set(selector["values"])


def refusals(compiled, namespace, pod):
    """The messages of the rules `pod` breaks in `namespace` (an error counts as a refusal, as
    failurePolicy: Fail makes it)."""
    variables, rules, bound = compiled
    if namespace not in bound:
        return ["the policy is not bound to namespace " + namespace]
    activation = {
        "object": celpy.json_to_cel(pod),
        "namespaceObject": celpy.json_to_cel({"metadata": {"name": namespace}}),
    }
    values = {}
    for name, program in variables:
        activation["variables"] = celpy.json_to_cel(values)
        values[name] = program.evaluate(activation)
    activation["variables"] = celpy.celtypes.MapType(
        {celpy.celtypes.StringType(k): v for k, v in values.items()}
    )
    broken = []
    for program, message in rules:
        try:
            result = program.evaluate(activation)
        except Exception as error:  # noqa: BLE001 (any evaluation error is a refusal)
            result = error
        if isinstance(result, Exception):
            broken.append(f"{message.strip()} (evaluation failed: {result})")
        elif not bool(result):
            broken.append(message.strip())
    return broken


def pod_of(docs, kind):
    [workload] = [d for d in docs if d["kind"] == kind]
    template = workload["spec"]["template"]
    return workload["metadata"]["namespace"], {"metadata": template["metadata"], "spec": template["spec"]}


def broken_pods(server):
    """Pods in the server's namespace that each break one rule: (what, pod)."""
    def change(what, edit):
        pod = copy.deepcopy(server)
        edit(pod["spec"], pod["spec"]["containers"][0])
        return what, pod

    def host_path(path, kind):
        def edit(spec, _):
            volume = {"name": "node", "hostPath": {"path": path}}
            if kind:
                volume["hostPath"]["type"] = kind
            spec["volumes"].append(volume)
        return edit

    def context(key, value):
        return lambda _, c: c["securityContext"].__setitem__(key, value)

    def pod_context(key, value):
        return lambda spec, _: spec["securityContext"].__setitem__(key, value)

    return [
        change("a hostPath of /", host_path("/", "Directory")),
        change("the Docker socket (the gate's alone)", host_path("/var/run/docker.sock", "Socket")),
        change("the state directory as DirectoryOrCreate", host_path("/var/lib/airlock", "DirectoryOrCreate")),
        change("the state directory with no type", host_path("/var/lib/airlock", None)),
        change("the state directory spelt with a slash", host_path("/var/lib/airlock/", "Directory")),
        change("a path out of the state directory", host_path("/var/lib/airlock/../../etc", "Directory")),
        change("a privileged container", context("privileged", True)),
        change("privilege escalation", context("allowPrivilegeEscalation", True)),
        change("escalation left unset", lambda _, c: c["securityContext"].pop("allowPrivilegeEscalation")),
        change("CAP_SYS_ADMIN added", lambda _, c: c["securityContext"]["capabilities"].__setitem__("add", ["SYS_ADMIN"])),
        change("capabilities kept", lambda _, c: c["securityContext"].pop("capabilities")),
        change("a container as uid 0", context("runAsUser", 0)),
        change("a container allowed root", context("runAsNonRoot", False)),
        change("the pod as uid 0", pod_context("runAsUser", 0)),
        change("the pod allowed root", pod_context("runAsNonRoot", False)),
        change("no seccomp profile", lambda spec, _: spec["securityContext"].pop("seccompProfile")),
        change("seccomp unconfined", context("seccompProfile", {"type": "Unconfined"})),
        change("the node's network", lambda spec, _: spec.__setitem__("hostNetwork", True)),
        change("the node's processes", lambda spec, _: spec.__setitem__("hostPID", True)),
        change("the node's IPC", lambda spec, _: spec.__setitem__("hostIPC", True)),
        change("a port of the node's", lambda _, c: c["ports"].append({"containerPort": 22, "hostPort": 22})),
        change("an init container", lambda spec, c: spec.__setitem__("initContainers", [copy.deepcopy(c)])),
        change("a debug container", lambda spec, c: spec.__setitem__("ephemeralContainers", [{"name": "debug", "image": "busybox"}])),
        change("a sysctl", pod_context("sysctls", [{"name": "kernel.shm_rmid_forced", "value": "1"}])),
        change("AppArmor unconfined", context("appArmorProfile", {"type": "Unconfined"})),
        change("/proc unmasked", context("procMount", "Unmasked")),
        change("an SELinux user", context("seLinuxOptions", {"user": "system_u"})),
    ]


def main(path):
    docs = load(path)
    compiled = compile_policy(docs)
    failures = []
    pods = {kind: pod_of(docs, kind) for kind in ("Deployment", "DaemonSet")}
    for kind, (namespace, pod) in pods.items():
        broken = refusals(compiled, namespace, pod)
        print(f"{kind} in {namespace}: {'admitted' if not broken else 'REFUSED'}")
        failures += [f"the {kind}'s own pod is refused: {why}" for why in broken]
    server_namespace, server = pods["Deployment"]
    gate_namespace, gate = pods["DaemonSet"]
    cases = [(server_namespace, what, pod) for what, pod in broken_pods(server)]
    gate_root = copy.deepcopy(gate)
    gate_root["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/", "type": "Directory"}})
    cases.append((gate_namespace, "a hostPath of / in the gate's namespace", gate_root))
    gate_socket_dir = copy.deepcopy(gate)
    for volume in gate_socket_dir["spec"]["volumes"]:
        if volume.get("hostPath", {}).get("path") == "/var/run/docker.sock":
            volume["hostPath"]["type"] = "DirectoryOrCreate"
    cases.append((gate_namespace, "the gate's Docker socket as another type", gate_socket_dir))
    for namespace, what, pod in cases:
        broken = refusals(compiled, namespace, pod)
        print(f"{namespace}: {what}: {'refused: ' + broken[0][:90] if broken else 'ADMITTED'}")
        if not broken:
            failures.append(f"{what} is admitted in {namespace}")
    if failures:
        print("\n".join(["", "The admission policy is wrong:"] + failures), file=sys.stderr)
        return 1
    print(f"the admission policy admits both workloads and refuses all {len(cases)} breaches")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
