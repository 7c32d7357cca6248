"""The test control plane itself: API server answers, CRDs install, controllers run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.kube import KubeCommandError, KubeEnv

pytestmark = pytest.mark.kube

_WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.testenv.sluice.dev
spec:
  group: testenv.sluice.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              properties:
                size: {type: integer, minimum: 1}
"""


def test_the_api_server_answers_kubectl(kube_env: KubeEnv) -> None:
    namespaces = {item["metadata"]["name"] for item in kube_env.kubectl_json("get", "namespaces")["items"]}

    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= namespaces
    assert kube_env.server.startswith("https://")
    version = json.loads(kube_env.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.")


def test_crds_from_a_directory_are_established_and_validate(
    kube_env: KubeEnv, kube_namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "widgets.yaml").write_text(_WIDGET_CRD)
    try:
        assert kube_env.apply_crds(tmp_path) == ["widgets.testenv.sluice.dev"]

        widget: dict[str, Any] = {
            "apiVersion": "testenv.sluice.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w1"},
            "spec": {"size": 3},
        }
        kube_env.kubectl("apply", "-f", "-", namespace=kube_namespace, input=json.dumps(widget))
        stored = kube_env.kubectl_json("get", "widget", "w1", namespace=kube_namespace)
        assert stored["spec"] == {"size": 3}

        widget["metadata"]["name"], widget["spec"]["size"] = "w2", 0
        with pytest.raises(KubeCommandError, match=r"spec\.size"):
            kube_env.kubectl("apply", "-f", "-", namespace=kube_namespace, input=json.dumps(widget))
    finally:
        kube_env.kubectl("delete", "crd", "widgets.testenv.sluice.dev", "--ignore-not-found", "--wait=false")


def test_an_empty_crd_directory_installs_nothing(kube_env: KubeEnv, tmp_path: Path) -> None:
    before = kube_env.kubectl_json("get", "crds")["items"]

    assert kube_env.apply_crds(tmp_path) == []
    assert kube_env.apply_crds(tmp_path / "missing") == []
    assert kube_env.kubectl_json("get", "crds")["items"] == before


def test_the_garbage_collector_deletes_owned_objects(kube_env: KubeEnv, kube_namespace: str) -> None:
    kube_env.kubectl("create", "configmap", "owner", namespace=kube_namespace)
    owner = kube_env.kubectl_json("get", "configmap", "owner", namespace=kube_namespace)
    dependent = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "dependent",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                }
            ],
        },
        "stringData": {"k": "v"},
    }
    kube_env.kubectl("apply", "-f", "-", namespace=kube_namespace, input=json.dumps(dependent))
    kube_env.kubectl("get", "secret", "dependent", namespace=kube_namespace)

    kube_env.kubectl("delete", "configmap", "owner", namespace=kube_namespace)

    kube_env.kubectl(
        "wait", "--for=delete", "secret/dependent", "--timeout=60s", namespace=kube_namespace, timeout=70
    )
    assert (
        kube_env.kubectl("get", "secret", "dependent", namespace=kube_namespace, check=False).returncode != 0
    )


def test_each_test_gets_a_namespace_with_a_default_service_account(
    kube_env: KubeEnv, kube_namespace: str
) -> None:
    namespace = kube_env.kubectl_json("get", "namespace", kube_namespace)

    assert namespace["status"]["phase"] == "Active"
    kube_env.kubectl("get", "serviceaccount", "default", namespace=kube_namespace)
    # The root CA the controller-manager publishes is what in-cluster clients verify the server with.
    kube_env.wait_for("configmap kube-root-ca.crt", bool, namespace=kube_namespace, timeout=30)


def test_helm_installs_and_uninstalls_a_chart(kube_env: KubeEnv, kube_namespace: str, tmp_path: Path) -> None:
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: probe\nversion: 0.1.0\nkubeVersion: '>=1.30.0-0'\n"
    )
    (chart / "values.yaml").write_text("message: from-values\n")
    (chart / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\n"
        "data:\n  message: {{ .Values.message | quote }}\n"
    )

    kube_env.helm(
        "install", "probe", str(chart), "--set", "message=hello", "--wait", namespace=kube_namespace
    )

    settings = kube_env.kubectl_json("get", "configmap", "probe-settings", namespace=kube_namespace)
    assert settings["data"] == {"message": "hello"}
    assert "probe" in kube_env.helm("list", "--short", namespace=kube_namespace).stdout.split()

    kube_env.helm("uninstall", "probe", "--wait", namespace=kube_namespace)

    gone = kube_env.kubectl("get", "configmap", "probe-settings", namespace=kube_namespace, check=False)
    assert gone.returncode != 0
