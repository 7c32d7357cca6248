"""The operator's security objects against a real kube-apiserver, whose PodSecurity admission checks pods.

No pod runs here (no kubelet): a pod that exists was admitted, which is what the `restricted` standard
decides. Jobs that run under it are in tests/e2e/test_pod_security.py.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
import yaml

from testkit.kube import KubeEnv, streamjob_manifest

pytestmark = pytest.mark.kube


def _reconciles(operator: Any) -> float:
    line = 'sluice_operator_reconciles_total{outcome="ok",resource="streamjob"} '
    found = [row for row in operator.metrics().splitlines() if row.startswith(line)]
    return float(found[0].removeprefix(line)) if found else 0.0


def _restricted(kube_env: KubeEnv, namespace: str) -> None:
    kube_env.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")


def test_a_job_in_a_restricted_namespace_gets_its_secret_policy_and_admitted_pods(
    kube_env: KubeEnv, kube_namespace: str, operator: Any
) -> None:
    _restricted(kube_env, kube_namespace)
    kube_env.kubectl("apply", "-f", "-", input=streamjob_manifest("counts"), namespace=kube_namespace)
    pod = kube_env.wait_for("pod counts-coordinator", bool, namespace=kube_namespace, timeout=60)
    uid = kube_env.kubectl_json("get", "streamjob", "counts", namespace=kube_namespace)["metadata"]["uid"]

    secret = kube_env.kubectl_json("get", "secret", "counts-auth", namespace=kube_namespace)
    assert [ref["uid"] for ref in secret["metadata"]["ownerReferences"]] == [uid]
    values = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert set(values) == {"rest-token", "spark-secret"} and len(set(values.values())) == 2
    assert all(len(value) >= 43 for value in values.values())
    policy = kube_env.kubectl_json("get", "networkpolicy", "counts-network", namespace=kube_namespace)
    assert policy["spec"]["podSelector"] == {"matchLabels": {"sluice.dev/job": "counts"}}

    # The TaskManager pod Spark would build from the template is admitted too (Spark adds a name, the
    # executor's args, env, ports, resources and an emptyDir for its local dirs).
    config = kube_env.kubectl_json("get", "configmap", "counts-config", namespace=kube_namespace)
    template = yaml.safe_load(config["data"]["taskmanager-pod.yaml"])
    template["metadata"]["name"] = "counts-taskmanager-1"
    template["spec"]["volumes"].append({"name": "spark-local-dir-1", "emptyDir": {}})
    kube_env.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(template), namespace=kube_namespace
    )

    # The values reach pods as files only, and never the operator's log.
    text = json.dumps(pod["spec"]) + json.dumps(template)
    assert not [value for value in values.values() if value in text]
    assert not [value for value in values.values() if value in operator.logs()]

    # Later reconciles leave the Secret as it is.
    before = _reconciles(operator)
    deadline = time.monotonic() + 30
    while _reconciles(operator) < before + 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _reconciles(operator) >= before + 3
    again = kube_env.kubectl_json("get", "secret", "counts-auth", namespace=kube_namespace)
    assert again["data"] == secret["data"]


def test_an_escalating_pod_template_is_degraded_naming_the_field(
    kube_env: KubeEnv, kube_namespace: str, operator: Any
) -> None:
    extra = (
        "  coordinator:\n    podTemplate:\n      spec:\n"
        "        volumes: [{name: node, hostPath: {path: /}}]\n"
    )
    kube_env.kubectl(
        "apply", "-f", "-", input=streamjob_manifest("escalates", extra=extra), namespace=kube_namespace
    )
    job = kube_env.wait_for(
        "streamjob escalates",
        lambda o: any(c["type"] == "Degraded" for c in o.get("status", {}).get("conditions", [])),
        namespace=kube_namespace,
        timeout=60,
    )
    message = job["status"]["error"]
    assert "spec.coordinator.podTemplate.spec.volumes[0].hostPath: mounts a directory of the node" in message
    assert "SLUICE_OPERATOR_ALLOW_PRIVILEGED_PODS=true" in message
    assert kube_env.kubectl_json("get", "pods", namespace=kube_namespace)["items"] == []
