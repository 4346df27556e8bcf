// What Kafka 4.1's Java AdminClient reports about one topic, as one line of JSON on stdout:
// its reassignments in progress (listPartitionReassignments), its partitions (describeTopics:
// DescribeTopicPartitions), per broker and log dir its replicas (describeLogDirs) and, for every
// broker and partition, the dir of its replica if any (describeReplicaLogDirs); the replication
// throttles set on the topic and the brokers (describeConfigs).
// tests/e2e/test_admin_parity.py compares it with kafka-python's view, on Flotilla and on Kafka.
// Run: java -cp '<kafka-tools 4.1 libs>/*' AdminParity.java <bootstrap> <topic> <broker id>...
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.TopicPartitionInfo;

public class AdminParity {
    static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out;
    }

    public static void main(String[] args) throws Exception {
        String topic = args[1];
        List<Integer> brokers = new ArrayList<>();
        for (int i = 2; i < args.length; i++) brokers.add(Integer.parseInt(args[i]));
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        Map<String, Object> out = new TreeMap<>();
        try (Admin admin = Admin.create(props)) {
            Map<String, Object> moving = new TreeMap<>();
            for (Map.Entry<TopicPartition, PartitionReassignment> e : admin.listPartitionReassignments().reassignments().get().entrySet()) {
                if (!e.getKey().topic().equals(topic)) continue;
                Map<String, Object> r = new TreeMap<>();
                r.put("replicas", e.getValue().replicas());
                r.put("adding", e.getValue().addingReplicas());
                r.put("removing", e.getValue().removingReplicas());
                moving.put(Integer.toString(e.getKey().partition()), r);
            }
            out.put("reassignments", moving);

            Map<String, Object> partitions = new TreeMap<>();
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            for (TopicPartitionInfo p : d.partitions()) {
                Map<String, Object> r = new TreeMap<>();
                r.put("leader", p.leader() == null ? -1 : p.leader().id());
                r.put("replicas", ids(p.replicas()));
                r.put("isr", ids(p.isr()));
                r.put("elr", ids(p.elr()));
                r.put("lastKnownElr", ids(p.lastKnownElr()));
                partitions.put(Integer.toString(p.partition()), r);
            }
            out.put("partitions", partitions);

            Map<String, Object> logDirs = new TreeMap<>();
            for (Map.Entry<Integer, Map<String, LogDirDescription>> b : admin.describeLogDirs(brokers).allDescriptions().get().entrySet()) {
                List<Object> dirs = new ArrayList<>();
                for (Map.Entry<String, LogDirDescription> dir : b.getValue().entrySet()) {
                    Map<String, Object> r = new TreeMap<>();
                    LogDirDescription desc = dir.getValue();
                    r.put("path", dir.getKey());
                    r.put("error", desc.error() == null ? null : desc.error().getClass().getSimpleName());
                    r.put("totalBytes", desc.totalBytes().isPresent() ? desc.totalBytes().getAsLong() : null);
                    r.put("usableBytes", desc.usableBytes().isPresent() ? desc.usableBytes().getAsLong() : null);
                    Map<String, Object> replicas = new TreeMap<>();
                    for (Map.Entry<TopicPartition, ReplicaInfo> ri : desc.replicaInfos().entrySet()) {
                        if (!ri.getKey().topic().equals(topic)) continue;
                        Map<String, Object> info = new TreeMap<>();
                        info.put("size", ri.getValue().size());
                        info.put("offsetLag", ri.getValue().offsetLag());
                        info.put("isFuture", ri.getValue().isFuture());
                        replicas.put(Integer.toString(ri.getKey().partition()), info);
                    }
                    r.put("replicas", replicas);
                    dirs.add(r);
                }
                logDirs.put(Integer.toString(b.getKey()), dirs);
            }
            out.put("logDirs", logDirs);

            // Every (broker, partition) pair, hosted or not: where its replica lives.
            List<TopicPartitionReplica> pairs = new ArrayList<>();
            for (int b : brokers)
                for (TopicPartitionInfo p : d.partitions()) pairs.add(new TopicPartitionReplica(topic, p.partition(), b));
            Map<String, Object> replicaDirs = new TreeMap<>();
            for (Map.Entry<TopicPartitionReplica, ReplicaLogDirInfo> e : admin.describeReplicaLogDirs(pairs).all().get().entrySet()) {
                ReplicaLogDirInfo info = e.getValue();
                Map<String, Object> r = new TreeMap<>();
                r.put("current", info.getCurrentReplicaLogDir());
                r.put("currentLag", info.getCurrentReplicaOffsetLag());
                r.put("future", info.getFutureReplicaLogDir());
                r.put("futureLag", info.getFutureReplicaOffsetLag());
                replicaDirs.put(e.getKey().brokerId() + ":" + e.getKey().partition(), r);
            }
            out.put("replicaDirs", replicaDirs);

            // The replication throttles set on the topic and the brokers (describeConfigs).
            List<ConfigResource> resources = new ArrayList<>();
            resources.add(new ConfigResource(ConfigResource.Type.TOPIC, topic));
            for (int b : brokers) resources.add(new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(b)));
            Map<String, Object> throttles = new TreeMap<>();
            for (Map.Entry<ConfigResource, Config> e : admin.describeConfigs(resources).all().get().entrySet()) {
                for (ConfigEntry c : e.getValue().entries()) {
                    if (!c.name().contains("replication.throttled") || c.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG) continue;
                    String owner = e.getKey().type() == ConfigResource.Type.TOPIC ? "topic" : e.getKey().name();
                    throttles.put(owner + " " + c.name(), c.value() + " " + c.source());
                }
            }
            out.put("throttles", throttles);
        }
        System.out.println(new ObjectMapper().writeValueAsString(out));
    }
}
