#!/usr/bin/env python3
"""pod_spec.py on the rendered dev overlay, and on copies of it with one field changed: a
field it cannot honour fails the run, by name, and the fields it honours become the flags.

    python3 -m unittest deploy/podman/test_pod_spec.py     # run.sh runs it first
"""

import copy
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pod_spec  # noqa: E402

RENDERED = pod_spec.render("dev")


def changed(edit):
    """The dev overlay's objects with edit(statefulset's pod spec, its container) applied."""
    objects = copy.deepcopy(RENDERED)
    sts = next(o for o in objects if o["kind"] == "StatefulSet")
    spec = sts["spec"]["template"]["spec"]
    edit(spec, spec["containers"][0])
    return objects


class Refused(unittest.TestCase):
    def refused(self, edit, where):
        with self.assertRaises(pod_spec.SpecError) as e:
            pod_spec.translate(changed(edit))
        self.assertIn(where, str(e.exception))

    def test_an_unknown_pod_field(self):
        self.refused(lambda s, c: s.update(hostNetwork=True),
                     "StatefulSet.spec.template.spec.hostNetwork: not known")

    def test_an_unknown_container_field(self):
        self.refused(lambda s, c: c.update(stdin=True), "containers[0].stdin: not known")

    def test_a_second_container(self):
        self.refused(lambda s, c: s["containers"].append(copy.deepcopy(c)), "2 containers")

    def test_a_volume_kind_it_cannot_make(self):
        self.refused(lambda s, c: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
                     "volume 'h': only emptyDir, secret and claims")

    def test_a_sub_path(self):
        self.refused(lambda s, c: c["volumeMounts"][0].update(subPath="x"),
                     "volumeMounts[0].subPath: not known")

    def test_a_service_account_token(self):
        self.refused(lambda s, c: s.update(automountServiceAccountToken=True),
                     "automountServiceAccountToken: must be false")

    def test_a_privileged_container(self):
        self.refused(lambda s, c: c["securityContext"].update(privileged=True),
                     "securityContext.privileged: True")

    def test_an_exec_probe(self):
        self.refused(lambda s, c: c.update(startupProbe={"exec": {"command": ["true"]}}),
                     "startupProbe.exec: not known")

    def test_a_pulled_image(self):
        self.refused(lambda s, c: c.update(imagePullPolicy="Always"),
                     "imagePullPolicy: 'Always'")

    def test_root(self):
        self.refused(lambda s, c: s["securityContext"].update(runAsUser=0),
                     "runAsNonRoot: the user is 0")

    def test_an_unknown_object(self):
        objects = copy.deepcopy(RENDERED) + [{"kind": "ConfigMap", "metadata": {"name": "x"}}]
        with self.assertRaises(pod_spec.SpecError) as e:
            pod_spec.translate(objects)
        self.assertIn("ConfigMap/x: an object not known", str(e.exception))

    def test_every_refusal_is_named_at_once(self):
        def two(s, c):
            s.update(hostPID=True)
            c.update(tty=True)
        with self.assertRaises(pod_spec.SpecError) as e:
            pod_spec.translate(changed(two))
        self.assertIn("hostPID", str(e.exception))
        self.assertIn("tty", str(e.exception))


class Honoured(unittest.TestCase):
    def flags(self, edit=lambda s, c: None):
        pod = pod_spec.translate(changed(edit))
        return pod, pod_spec.run_flags(pod, Path("/v"))

    def test_the_dev_overlay(self):
        pod, flags = self.flags()
        sts = next(o for o in RENDERED if o["kind"] == "StatefulSet")
        c = sts["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(flags[-1], c["image"])  # no args: the image's entrypoint
        for flag in ["--user=10001:10001", "--group-add=10001", "--cap-drop=ALL",
                     "--read-only", "--read-only-tmpfs=false", "--pull=never",
                     "--security-opt=no-new-privileges", "--publish=127.0.0.1::9000/tcp",
                     "--mount=type=bind,src=/v/token,dst=/etc/uexec/token,ro=true",
                     "--mount=type=bind,src=/v/workspace,dst=/workspace",
                     f"--name={sts['metadata']['name']}-0"]:
            self.assertIn(flag, flags)
        self.assertEqual([(p.kind, p.port, p.path) for p in pod.probes],
                         [("liveness", 9000, "/readyz"), ("readiness", 9000, "/readyz")])

    def test_a_container_overrides_the_pod(self):
        _, flags = self.flags(lambda s, c: c["securityContext"].update(runAsUser=4242))
        self.assertIn("--user=4242:10001", flags)

    def test_command_and_args(self):
        _, flags = self.flags(lambda s, c: c.update(command=["/bin/sh"], args=["-c", "x"]))
        self.assertIn('--entrypoint=["/bin/sh"]', flags)
        self.assertEqual(flags[-2:], ["-c", "x"])

    def test_a_memory_volume(self):
        def memory(s, c):
            s["volumes"][1]["emptyDir"] = {"medium": "Memory", "sizeLimit": "64Mi"}
        pod, flags = self.flags(memory)
        self.assertIn("--mount=type=tmpfs,dst=/tmp,tmpfs-mode=2777,size=67108864", flags)

    def test_the_run_follows_the_manifests(self):
        """Each field the manifests set, changed: the flag it makes changes with it."""
        cases = [
            ("runAsGroup", lambda s, c: s["securityContext"].update(runAsGroup=4343),
             "--user=10001:4343", "--user=10001:10001"),
            ("fsGroup", lambda s, c: s["securityContext"].update(fsGroup=4444),
             "--group-add=4444", "--group-add=10001"),
            ("env", lambda s, c: c["env"][0].update(value="debug"),
             "--env=UEXEC_LOG=debug", "--env=UEXEC_LOG=info"),
            ("memory", lambda s, c: c["resources"]["limits"].update(memory="3Gi"),
             f"--memory={3 * 2**30}b", f"--memory={2 * 2**30}b"),
            ("cpu", lambda s, c: c["resources"]["limits"].update(cpu="1500m"),
             "--cpus=1.5", "--cpus=1"),
            ("port", lambda s, c: c["ports"][0].update(containerPort=9443),
             "--publish=127.0.0.1::9443/tcp", "--publish=127.0.0.1::9000/tcp"),
            ("grace", lambda s, c: s.update(terminationGracePeriodSeconds=45),
             "--stop-timeout=45", "--stop-timeout=30"),
            ("capabilities", lambda s, c: c["securityContext"]["capabilities"].update(
                add=["NET_BIND_SERVICE"]), "--cap-add=NET_BIND_SERVICE", None),
            ("seccomp", lambda s, c: c["securityContext"].update(
                seccompProfile={"type": "Unconfined"}), "--security-opt=seccomp=unconfined",
             None),
            ("escalation", lambda s, c: c["securityContext"].update(
                allowPrivilegeEscalation=True), None, "--security-opt=no-new-privileges"),
            ("read-only root", lambda s, c: c["securityContext"].update(
                readOnlyRootFilesystem=False), None, "--read-only"),
            ("mount", lambda s, c: c["volumeMounts"][1].update(mountPath="/scratch"),
             "--mount=type=bind,src=/v/tmp,dst=/scratch",
             "--mount=type=bind,src=/v/tmp,dst=/tmp"),
            ("read-only mount", lambda s, c: c["volumeMounts"][0].update(readOnly=True),
             "--mount=type=bind,src=/v/workspace,dst=/workspace,ro=true",
             "--mount=type=bind,src=/v/workspace,dst=/workspace"),
            ("image", lambda s, c: c.update(image="uexec:other"), "uexec:other", None),
            ("workingDir", lambda s, c: c.update(workingDir="/workspace/src"),
             "--workdir=/workspace/src", None),
        ]
        _, before = self.flags()
        for what, edit, added, gone in cases:
            with self.subTest(what):
                _, after = self.flags(edit)
                if added is not None:
                    self.assertNotIn(added, before)
                    self.assertIn(added, after)
                if gone is not None:
                    self.assertIn(gone, before)
                    self.assertNotIn(gone, after)

    def test_every_field_is_honoured_or_named(self):
        """The dev overlay's fields that make no flag are each named as the cluster's."""
        pod, _ = self.flags()
        for field in ["spec.replicas", "spec.serviceName", "readinessProbe.periodSeconds",
                      "resources.requests", "limits.ephemeral-storage",
                      "volumes[0].emptyDir.sizeLimit", "serviceAccountName"]:
            self.assertTrue(any(field in line for line in pod.cluster), field)

    def test_quantities(self):
        self.assertEqual(pod_spec.quantity("2Gi", "x"), 2 * 2**30)
        self.assertEqual(pod_spec.quantity("500m", "x"), 0.5)
        self.assertEqual(pod_spec.quantity("1", "x"), 1)
        with self.assertRaises(pod_spec.SpecError):
            pod_spec.quantity("two", "x")


if __name__ == "__main__":
    unittest.main()
