"""The process kubelet against the real API server: pods run, report status, restart and die."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from testkit.kube import KubeEnv
from testkit.kubelet import ENTRYPOINT_SCRIPT, SHELL_IMAGE, ProcessKubelet
from testkit.probe import running

pytestmark = pytest.mark.kube

Pod = dict[str, Any]


@pytest.fixture
def kubelet(process_kubelet: ProcessKubelet | None) -> ProcessKubelet:
    if process_kubelet is None:
        pytest.skip("these tests exercise the process kubelet, which does not run on an external cluster")
    return process_kubelet


def _pod(name: str, script: str, restart_policy: str = "Never", **spec: Any) -> Pod:
    container = {"name": "main", "image": "busybox", "command": ["sh", "-c", script]}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": restart_policy, "containers": [container], **spec},
    }


def _create(kube_env: KubeEnv, namespace: str, *objects: Pod) -> None:
    for obj in objects:
        kube_env.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(obj))


def _wait_pod(
    kube_env: KubeEnv, namespace: str, name: str, condition: Callable[[Pod], bool], timeout: float = 60
) -> Pod:
    pod: Pod = kube_env.wait_for(f"pod {name}", condition, namespace=namespace, timeout=timeout)
    return pod


def _phase(*phases: str) -> Callable[[Pod], bool]:
    return lambda pod: pod.get("status", {}).get("phase") in phases


def _main_status(pod: Pod) -> dict[str, Any]:
    status: dict[str, Any] = pod["status"]["containerStatuses"][0]
    return status


def test_the_node_is_registered_and_ready(kube_env: KubeEnv, kubelet: ProcessKubelet) -> None:
    node = kube_env.kubectl_json("get", "node", kubelet.node_name)

    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == kubelet.node_name


def test_a_pod_runs_to_success_and_reports_its_exit_code(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    _create(kube_env, kube_namespace, _pod("hello", "echo hello from $(hostname)"))

    pod = _wait_pod(kube_env, kube_namespace, "hello", _phase("Succeeded", "Failed"))

    assert pod["status"]["phase"] == "Succeeded"
    assert pod["spec"]["nodeName"] == kubelet.node_name
    terminated = _main_status(pod)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    assert kubelet.container_log(kube_namespace, "hello", "main") == "hello from hello\n"
    ip = pod["status"]["podIP"]
    assert ip.startswith("127.") and ip != "127.0.0.1"
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")


def test_a_failing_pod_is_failed_with_its_exit_code(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    _create(kube_env, kube_namespace, _pod("fails", "echo going down >&2; exit 3"))

    pod = _wait_pod(kube_env, kube_namespace, "fails", _phase("Succeeded", "Failed"))

    assert pod["status"]["phase"] == "Failed"
    status = _main_status(pod)
    assert (status["state"]["terminated"]["exitCode"], status["state"]["terminated"]["reason"]) == (
        3,
        "Error",
    )
    assert status["restartCount"] == 0
    assert kubelet.container_log(kube_namespace, "fails", "main") == "going down\n"


def test_restart_policy_always_restarts_and_counts(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    _create(kube_env, kube_namespace, _pod("crashes", "echo run; exit 1", restart_policy="Always"))

    pod = _wait_pod(
        kube_env,
        kube_namespace,
        "crashes",
        lambda p: bool(p.get("status", {}).get("containerStatuses")) and _main_status(p)["restartCount"] >= 2,
        timeout=60,
    )

    assert pod["status"]["phase"] == "Running"
    status = _main_status(pod)
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert kubelet.container_log(kube_namespace, "crashes", "main", restart=1) == "run\n"


def test_restart_policy_on_failure_stops_after_success(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    # The emptyDir outlives the first run, as it does across container restarts in a real pod.
    scratch = f"/scratch-{uuid.uuid4().hex[:8]}"
    script = f"if [ -e {scratch}/tried ]; then echo second; else touch {scratch}/tried; exit 7; fi"
    pod = _pod(
        "retries",
        script,
        restart_policy="OnFailure",
        volumes=[{"name": "scratch", "emptyDir": {}}],
        container={"volumeMounts": [{"name": "scratch", "mountPath": scratch}]},
    )
    _create(kube_env, kube_namespace, pod)

    done = _wait_pod(kube_env, kube_namespace, "retries", _phase("Succeeded", "Failed"))

    assert done["status"]["phase"] == "Succeeded"
    status = _main_status(done)
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"]["exitCode"] == 7
    assert not os.path.exists(f"{scratch}/tried"), "the mount must stay private to the pod"
    kube_env.kubectl("delete", "pod", "retries", namespace=kube_namespace)
    assert not os.path.exists(scratch), "the mount point the kubelet created must go with the pod"


def test_configmap_volume_downward_api_and_secret_env(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    config_dir = f"/etc/kubelet-test-{uuid.uuid4().hex[:8]}"
    kube_env.kubectl(
        "create", "configmap", "settings", "--from-literal=greeting.txt=hi there", namespace=kube_namespace
    )
    kube_env.kubectl(
        "create", "secret", "generic", "creds", "--from-literal=password=s3cr3t", namespace=kube_namespace
    )
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        {"name": "GREETING_FILE", "value": f"{config_dir}/greeting.txt"},
    ]
    script = (
        'cat $GREETING_FILE; echo; echo "$POD_NAME $POD_NAMESPACE $POD_IP $NODE $PASSWORD"; '
        "getent hosts $(hostname) | cut -f1 -d' '; test ! -w $GREETING_FILE && echo read-only"
    )
    pod = _pod(
        "reads-config",
        script,
        volumes=[{"name": "cfg", "configMap": {"name": "settings"}}],
        container={"env": env, "volumeMounts": [{"name": "cfg", "mountPath": config_dir}]},
    )
    _create(kube_env, kube_namespace, pod)

    done = _wait_pod(kube_env, kube_namespace, "reads-config", _phase("Succeeded", "Failed"))

    ip = done["status"]["podIP"]
    assert kubelet.container_log(kube_namespace, "reads-config", "main").splitlines() == [
        "hi there",
        f"reads-config {kube_namespace} {ip} {kubelet.node_name} s3cr3t",
        ip,
        "read-only",
    ]
    assert done["status"]["phase"] == "Succeeded"
    assert not os.path.exists(f"{config_dir}/greeting.txt"), "only the pod's mount namespace has the file"
    kube_env.kubectl("delete", "pod", "reads-config", namespace=kube_namespace)
    assert not os.path.exists(config_dir), "the mount point the kubelet created must go with the pod"


def test_an_empty_dir_over_the_kubelets_own_directory_hides_no_other_volume(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    # Pods with a read-only root file system mount an emptyDir at /tmp; the kubelet's state directory
    # (where the sources of every volume are) may be under /tmp itself.
    config_dir = f"/etc/kubelet-test-{uuid.uuid4().hex[:8]}"
    kube_env.kubectl("create", "configmap", "settings", "--from-literal=a.txt=kept", namespace=kube_namespace)
    shadowed = f"{kubelet.state_dir}/pods"
    top = f"/{kubelet.state_dir.parts[1]}"  # /tmp under pytest's default temporary directory
    pod = _pod(
        "tmp-over-state",
        f"cat {config_dir}/a.txt; echo; touch {top}/mine && echo writable; "
        f"test -e {shadowed} || echo private",
        volumes=[{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "settings"}}],
        container={
            "volumeMounts": [
                {"name": "cfg", "mountPath": config_dir},
                {"name": "tmp", "mountPath": top},
            ]
        },
    )
    _create(kube_env, kube_namespace, pod)

    done = _wait_pod(kube_env, kube_namespace, "tmp-over-state", _phase("Succeeded", "Failed"))

    log = kubelet.container_log(kube_namespace, "tmp-over-state", "main")
    assert done["status"]["phase"] == "Succeeded", log
    assert log.splitlines() == ["kept", "writable", "private"]


def test_image_entrypoint_gets_args_with_variable_expansion(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    # The shell image's entrypoint is `/bin/sh -c`; args replace its (empty) CMD, as in Docker.
    # Kubernetes expands $(WHO) itself; $$ escapes the second reference, which reaches the shell quoted.
    container = {
        "name": "main",
        "image": SHELL_IMAGE,
        "args": ["echo $(WHO) says '$$(WHO)'"],
        "env": [{"name": "WHO", "value": "kubelet"}],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "args"},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    _create(kube_env, kube_namespace, pod)

    done = _wait_pod(kube_env, kube_namespace, "args", _phase("Succeeded", "Failed"))

    assert done["status"]["phase"] == "Succeeded"
    assert kubelet.container_log(kube_namespace, "args", "main") == "kubelet says $(WHO)\n"


def test_pods_get_distinct_ips_so_their_servers_share_a_port(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    server = (
        "import os, socket; s = socket.socket(); s.bind((os.environ['POD_IP'], 18080)); s.listen(); "
        "c, _ = s.accept(); c.sendall(os.environ['HOSTNAME'].encode()); c.close()"
    )
    env = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    pods = [_pod(name, f'exec python3 -c "{server}"', container={"env": env}) for name in ("left", "right")]
    _create(kube_env, kube_namespace, *pods)

    replies = {}
    for name in ("left", "right"):
        pod = _wait_pod(kube_env, kube_namespace, name, _phase("Running", "Failed", "Succeeded"))
        replies[name] = _read_when_listening(pod["status"]["podIP"], 18080)

    assert replies == {"left": "left", "right": "right"}


def _read_when_listening(host: str, port: int, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=5) as conn:
                return conn.recv(100).decode()
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _pid(pod: Pod) -> int:
    return int(_main_status(pod)["containerID"].removeprefix("process://"))


def test_deleting_a_running_pod_terminates_its_process(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    script = "trap 'echo terminating; exit 0' TERM; while true; do sleep 0.1; done"
    _create(kube_env, kube_namespace, _pod("sleeper", script))
    pod = _wait_pod(kube_env, kube_namespace, "sleeper", _phase("Running"))
    pid = _pid(pod)
    assert running(pid)

    kube_env.kubectl("delete", "pod", "sleeper", "--timeout=60s", namespace=kube_namespace)

    assert kube_env.kubectl("get", "pod", "sleeper", namespace=kube_namespace, check=False).returncode != 0
    assert not running(pid)
    assert "terminating" in kubelet.container_log(kube_namespace, "sleeper", "main")


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    _create(
        kube_env,
        kube_namespace,
        _pod("stubborn", "trap '' TERM; while true; do sleep 0.1; done", terminationGracePeriodSeconds=2),
    )
    pid = _pid(_wait_pod(kube_env, kube_namespace, "stubborn", _phase("Running")))

    started = time.monotonic()
    kube_env.kubectl("delete", "pod", "stubborn", "--timeout=60s", namespace=kube_namespace)
    took = time.monotonic() - started

    assert not running(pid)
    assert 2 <= took < 20


def test_in_cluster_clients_authenticate_with_the_mounted_service_account_token(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    # What a Spark driver in a pod does: in-cluster config from the environment and the token volume.
    client = (
        "import json, os, ssl, urllib.request; d = '/var/run/secrets/kubernetes.io/serviceaccount/'; "
        "ctx = ssl.create_default_context(cafile=d + 'ca.crt'); "
        "url = 'https://%s:%s/apis/authentication.k8s.io/v1/selfsubjectreviews' % "
        "(os.environ['KUBERNETES_SERVICE_HOST'], os.environ['KUBERNETES_SERVICE_PORT']); "
        "req = urllib.request.Request(url, method='POST', data=json.dumps({'apiVersion': "
        "'authentication.k8s.io/v1', 'kind': 'SelfSubjectReview'}).encode(), headers={'Authorization': "
        "'Bearer ' + open(d + 'token').read(), 'Content-Type': 'application/json'}); "
        "print(json.load(urllib.request.urlopen(req, context=ctx))['status']['userInfo']['username']); "
        "print(open(d + 'namespace').read())"
    )
    _create(kube_env, kube_namespace, _pod("in-cluster", f'exec python3 -c "{client}"'))

    done = _wait_pod(kube_env, kube_namespace, "in-cluster", _phase("Succeeded", "Failed"))

    log = kubelet.container_log(kube_namespace, "in-cluster", "main")
    assert done["status"]["phase"] == "Succeeded", log
    assert log.splitlines() == [f"system:serviceaccount:{kube_namespace}:default", kube_namespace]


def test_a_missing_configmap_keeps_the_pod_pending_until_it_exists(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    env = [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "mode"}}}]
    _create(kube_env, kube_namespace, _pod("waits", "echo $MODE", container={"env": env}))
    waiting = _wait_pod(
        kube_env,
        kube_namespace,
        "waits",
        lambda p: (
            "waiting" in (p.get("status", {}).get("containerStatuses") or [{}])[0].get("state", {})
            and _main_status(p)["state"]["waiting"]["reason"] == "CreateContainerConfigError"
        ),
    )
    assert 'configmap "late" not found' in _main_status(waiting)["state"]["waiting"]["message"]
    assert waiting["status"]["phase"] == "Pending"

    kube_env.kubectl("create", "configmap", "late", "--from-literal=mode=ready", namespace=kube_namespace)

    _wait_pod(kube_env, kube_namespace, "waits", _phase("Succeeded"))
    assert kubelet.container_log(kube_namespace, "waits", "main") == "ready\n"


def test_any_other_image_runs_the_project_entrypoint_with_args(
    kube_env: KubeEnv, kube_namespace: str, kubelet: ProcessKubelet
) -> None:
    # No command: the image's ENTRYPOINT, docker/entrypoint.sh, gets the args; it runs unknown modes as is.
    container = {
        "name": "main",
        "image": "sluice:any-tag",
        "args": ["sh", "-c", "echo mode=$0 home=$SLUICE_HOME"],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "entrypoint"},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    _create(kube_env, kube_namespace, pod)

    done = _wait_pod(kube_env, kube_namespace, "entrypoint", _phase("Succeeded", "Failed"))

    log = kubelet.container_log(kube_namespace, "entrypoint", "main")
    assert done["status"]["phase"] == "Succeeded", log
    assert log == f"mode=sh home={ENTRYPOINT_SCRIPT.parents[1]}\n"
