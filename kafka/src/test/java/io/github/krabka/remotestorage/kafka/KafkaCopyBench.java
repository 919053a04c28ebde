package io.github.krabka.remotestorage.kafka;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/**
 * The broker's copy throughput with this store against Kafka's default
 * TopicBasedRemoteLogMetadataManager, same broker configuration, one topic
 * each, in one run: a topic of RLMM_BENCH_SEGMENTS (default 40) full 1 MiB
 * segments is written with tiered storage off, then turned on; the time
 * until the broker has copied every rolled segment gives MiB/s.
 *
 * <p>Not part of `make kafka-e2e` (failsafe runs *IT classes): `make kafka-bench`.
 */
class KafkaCopyBench {
    static final int SEGMENT_BYTES = 1 << 20;

    @Test
    void copyThroughput() throws Exception {
        int segments = Integer.parseInt(System.getenv().getOrDefault("RLMM_BENCH_SEGMENTS", "40"));
        try (Fixture.Postgres pg = new Fixture.Postgres()) {
            String dsn = pg.database("bench");
            try (Fixture.Rlmmd rlmmd = new Fixture.Rlmmd(dsn).start()) {
                for (int round = 0; round < 2; round++) {
                    double rlmmdRate = run("rlmmd", segments, Map.of(
                        "remote.log.metadata.manager.class.name", RlmmdRemoteLogMetadataManager.class.getName(),
                        "rlmm.config." + RlmmdConfig.TARGET, rlmmd.target()));
                    double topicRate = run("topic", segments, Map.of(
                        "remote.log.metadata.manager.class.name",
                        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
                        "remote.log.metadata.manager.listener.name", "EXTERNAL",
                        "rlmm.config.remote.log.metadata.topic.replication.factor", "1",
                        "rlmm.config.remote.log.metadata.topic.num.partitions", "1"));
                    System.out.printf("BENCH copy round=%d segments=%d rlmmd=%.1fMiB/s topic-based=%.1fMiB/s%n",
                        round, segments, rlmmdRate, topicRate);
                }
            }
        }
    }

    /** One single-broker cluster with the given manager; returns MiB/s copied. */
    static double run(String name, int segments, Map<String, String> rlmm) throws Exception {
        Path remote = Files.createTempDirectory("rlmm-bench-" + name);
        Map<String, String> config = new HashMap<>(rlmm);
        config.put("remote.log.storage.system.enable", "true");
        config.put("remote.log.storage.manager.class.name", LocalDirRemoteStorageManager.class.getName());
        config.put("rsm.config.dir", remote.toString());
        config.put("remote.log.manager.task.interval.ms", "300");
        config.put("log.retention.check.interval.ms", "300");
        config.put("log.initial.task.delay.ms", "100");
        try (KitCluster cluster = KitCluster.start(true, 1, 1, Map.of(), config)) {
            try (Admin admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()))) {
                String topic = "bench-" + name;
                TopicPartition tp = new TopicPartition(topic, 0);
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(Map.of(
                    "segment.bytes", String.valueOf(SEGMENT_BYTES), "retention.ms", "-1")))).all().get();
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers());
                p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
                p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
                byte[] value = new byte[1000];
                int records = (segments + 1) * SEGMENT_BYTES / 1070;
                try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
                    for (int i = 0; i < records; i++) {
                        prod.send(new ProducerRecord<>(topic, 0, null, value));
                    }
                    prod.flush();
                }
                long end = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset();
                long t0 = System.nanoTime();
                admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, topic),
                    List.of(new AlterConfigOp(new ConfigEntry("remote.storage.enable", "true"), AlterConfigOp.OpType.SET)))).all().get();
                // Every segment but the active one: its start is the last
                // offset the broker can copy up to.
                long[] tiered = {-1};
                Fixture.await(name + " copies " + segments + " segments", () -> {
                    try {
                        tiered[0] = admin.listOffsets(Map.of(tp, OffsetSpec.latestTiered())).partitionResult(tp).get().offset();
                        long activeStart = admin.listOffsets(Map.of(tp, OffsetSpec.earliestPendingUpload())).partitionResult(tp).get().offset();
                        return tiered[0] >= 0 && (activeStart < 0 || activeStart >= end - records / (segments + 1) - 1);
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                });
                double seconds = (System.nanoTime() - t0) / 1e9;
                long bytes;
                try (var files = Files.walk(remote)) {
                    bytes = files.filter(f -> f.getFileName().toString().equals("log")).mapToLong(f -> f.toFile().length()).sum();
                }
                System.out.printf("BENCH copy %s: %d bytes in %.2fs, up to offset %d of %d%n", name, bytes, seconds, tiered[0], end);
                return bytes / (1024.0 * 1024.0) / seconds;
            }
        }
    }
}
