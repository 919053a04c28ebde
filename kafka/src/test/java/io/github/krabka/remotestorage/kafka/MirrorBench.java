package io.github.krabka.remotestorage.kafka;

import java.nio.file.Files;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.junit.jupiter.api.Test;

/**
 * What the mirror costs a broker on the plugin, in one run against one
 * in-process broker, one rlmmd and PostgreSQL: a segment's add and finish
 * (the two changes of a copy) through the plugin with the mirror off and
 * on, against the raw produce the mirror adds (two records of Kafka's serde,
 * acks=all, linger.ms=0 as the mirror sends them, each waited for). RLMM_BENCH_MIRROR_SEGMENTS (default 2000)
 * segments each, after 200 of warm-up. `make kafka-bench` runs it.
 */
class MirrorBench {
    @Test
    void mirrorCost() throws Exception {
        int n = Integer.parseInt(System.getenv().getOrDefault("RLMM_BENCH_MIRROR_SEGMENTS", "2000"));
        try (Fixture.Postgres pg = new Fixture.Postgres();
             Fixture.Rlmmd rlmmd = new Fixture.Rlmmd(pg.database("mirror")).start();
             KitCluster cluster = KitCluster.start(true, 1, 1, Map.of(), Map.of("offsets.topic.replication.factor", "1"));
             Admin admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()))) {
            admin.createTopics(List.of(new NewTopic(MetadataRecords.TOPIC, 50, (short) 1), new NewTopic("raw", 50, (short) 1))).all().get();
            Map<String, Object> c = new HashMap<>();
            c.put(RlmmdConfig.TARGET, rlmmd.target());
            c.put("broker.id", "1");
            c.put("log.dir", Files.createTempDirectory("mirror-bench").toString());
            c.put("remote.log.metadata.common.client.bootstrap.servers", cluster.bootstrapServers());
            try (RlmmdRemoteLogMetadataManager off = new RlmmdRemoteLogMetadataManager();
                 RlmmdRemoteLogMetadataManager on = new RlmmdRemoteLogMetadataManager()) {
                off.configure(c);
                Map<String, Object> mirrored = new HashMap<>(c);
                mirrored.put(RlmmdConfig.MIRROR_ENABLE, "true");
                on.configure(mirrored);
                RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
                try (KafkaProducer<byte[], byte[]> raw = new KafkaProducer<>(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                    cluster.bootstrapServers(), ProducerConfig.ACKS_CONFIG, "all", ProducerConfig.LINGER_MS_CONFIG, "0"), new ByteArraySerializer(), new ByteArraySerializer())) {
                    Consumer<RemoteLogSegmentMetadata> produce = s -> {
                        try {
                            raw.send(new ProducerRecord<>("raw", 0, null, serde.serialize(s))).get();
                            raw.send(new ProducerRecord<>("raw", 0, null, serde.serialize(finish(s)))).get();
                        } catch (Exception e) {
                            throw new AssertionError(e);
                        }
                    };
                    Consumer<RemoteLogSegmentMetadata> plainWrite = s -> write(off, s);
                    Consumer<RemoteLogSegmentMetadata> mirroredWrite = s -> write(on, s);
                    // Alternating rounds, so that a busy moment of the machine falls on all three.
                    Map<String, Long> nanos = new HashMap<>();
                    for (int round = 0; round < 3; round++) {
                        nanos.merge("produce", time(produce, n / 3, 200), Long::sum);
                        nanos.merge("off", time(plainWrite, n / 3, 200), Long::sum);
                        nanos.merge("on", time(mirroredWrite, n / 3, 200), Long::sum);
                    }
                    int done = 3 * (n / 3);
                    double produceUs = nanos.get("produce") / 1e3 / done;
                    double offUs = nanos.get("off") / 1e3 / done;
                    double onUs = nanos.get("on") / 1e3 / done;
                    System.out.printf("MirrorBench: %d segments (add + finish) each; load average %s%n", done,
                        Files.readString(java.nio.file.Path.of("/proc/loadavg")).trim());
                    System.out.printf("MirrorBench: raw produce of the two records, acks=all, each waited for: %.0f us a segment%n", produceUs);
                    System.out.printf("MirrorBench: plugin, mirror off: %.0f us a segment%n", offUs);
                    System.out.printf("MirrorBench: plugin, mirror on:  %.0f us a segment (%.2fx off; off + raw produce = %.0f us)%n",
                        onUs, onUs / offUs, offUs + produceUs);
                }
            }
        }
    }

    static final TopicIdPartition TP = new TopicIdPartition(Uuid.randomUuid(), 0, "bench");

    static RemoteLogSegmentMetadata segment() {
        return new RemoteLogSegmentMetadata(new RemoteLogSegmentId(TP, Uuid.randomUuid()), 0, 99, 1, 1, 1, 1 << 20,
            Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, 0L));
    }

    static RemoteLogSegmentMetadataUpdate finish(RemoteLogSegmentMetadata s) {
        return new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 2, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1);
    }

    static void write(RlmmdRemoteLogMetadataManager m, RemoteLogSegmentMetadata s) {
        try {
            m.addRemoteLogSegmentMetadata(s).get();
            m.updateRemoteLogSegmentMetadata(finish(s)).get();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** Nanoseconds for n segments, after `warm` untimed ones. */
    static long time(Consumer<RemoteLogSegmentMetadata> op, int n, int warm) {
        for (int i = 0; i < warm; i++) {
            op.accept(segment());
        }
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            op.accept(segment());
        }
        return System.nanoTime() - t0;
    }
}
