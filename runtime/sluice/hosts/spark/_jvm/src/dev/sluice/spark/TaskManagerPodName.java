package dev.sluice.spark;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import org.apache.spark.deploy.k8s.KubernetesExecutorConf;
import org.apache.spark.deploy.k8s.SparkPod;
import org.apache.spark.deploy.k8s.features.KubernetesExecutorCustomFeatureConfigStep;

/**
 * Names a TaskManager's executor pod {@code <job>-taskmanager-<n>} instead of Spark's
 * {@code <job>-taskmanager-exec-<n>}.
 *
 * <p>Spark builds every executor pod name as {@code <spark.kubernetes.executor.podNamePrefix>-exec-<id>}
 * and has no setting for the name itself; custom executor feature steps run after Spark's own, on the
 * pod Spark is about to create, so this step rewrites the name (and the pod's hostname, which Spark sets
 * to the same value) there. Nothing else needs to follow: Spark finds its executor pods by their labels
 * ({@code spark-app-selector}, {@code spark-exec-id}), never by name, and the executor learns its pod name
 * from the downward API ({@code SPARK_EXECUTOR_POD_NAME} is a {@code metadata.name} field reference).
 * Executor ids are never reused within an application, so a replaced TaskManager gets a new name.
 *
 * <p>Enabled by the Sluice runtime on Kubernetes through {@code spark.kubernetes.executor.pod.featureSteps}.
 */
public final class TaskManagerPodName implements KubernetesExecutorCustomFeatureConfigStep {
    private String executorId;

    @Override
    public void init(KubernetesExecutorConf conf) {
        executorId = conf.executorId();
    }

    @Override
    public SparkPod configurePod(SparkPod pod) {
        String sparkName = pod.pod().getMetadata().getName();
        String renamed = rename(sparkName, executorId);
        if (renamed.equals(sparkName)) {
            return pod;
        }
        PodBuilder builder = new PodBuilder(pod.pod()).editMetadata().withName(renamed).endMetadata();
        if (sparkName.equals(pod.pod().getSpec().getHostname())) {
            builder = builder.editSpec().withHostname(renamed).endSpec();
        }
        Pod renamedPod = builder.build();
        return new SparkPod(renamedPod, pod.container());
    }

    /** {@code <prefix>-exec-<id>} becomes {@code <prefix>-<id>}; any other name is left as it is. */
    public static String rename(String sparkName, String executorId) {
        String sparkSuffix = "-exec-" + executorId;
        if (sparkName == null || executorId == null || !sparkName.endsWith(sparkSuffix)
                || sparkName.length() == sparkSuffix.length()) {
            return sparkName;
        }
        return sparkName.substring(0, sparkName.length() - sparkSuffix.length()) + "-" + executorId;
    }
}
