package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.server.log.remote.metadata.storage.RemoteLogMetadataTopicPartitioner;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The plugin's mirror ({@link RlmmdConfig#MIRROR_ENABLE}) against a real
 * broker (in process): each change goes to the store, then to
 * __remote_log_metadata as Kafka's topic-based manager writes it; the
 * import following that topic recognises the mirrored records; and a
 * change the topic cannot take leaves the store and the topic consistent.
 */
class TopicMirrorIT {
    static final int METADATA_PARTITIONS = 3;

    static Fixture.Postgres pg;
    static KitCluster cluster;
    static Admin admin;

    @BeforeAll
    static void startCluster() throws Exception {
        pg = new Fixture.Postgres();
        cluster = TieredBrokers.oneBroker();
        admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()));
        admin.createTopics(List.of(new NewTopic(MetadataRecords.TOPIC, METADATA_PARTITIONS, (short) 1))).all().get();
    }

    @AfterAll
    static void stopCluster() throws Exception {
        Fixture.closeAll(admin, cluster, pg);
    }

    /** The plugin with the mirror on, configured as a broker configures it (TBRLMM's keys included). */
    static RlmmdRemoteLogMetadataManager mirrored(Fixture.Rlmmd rlmmd, String bootstrap, Map<String, String> extra) throws Exception {
        Map<String, Object> c = new HashMap<>();
        c.put(RlmmdConfig.TARGET, rlmmd.target());
        c.put(RlmmdConfig.CALL_TIMEOUT_MS, "5000");
        c.put(RlmmdConfig.MIRROR_ENABLE, "true");
        c.put("broker.id", "7");
        c.put("log.dir", Files.createTempDirectory("mirror").toString());
        c.put("remote.log.metadata.common.client.bootstrap.servers", bootstrap);
        c.put("remote.log.metadata.topic.num.partitions", String.valueOf(METADATA_PARTITIONS));
        c.putAll(extra);
        RlmmdRemoteLogMetadataManager m = new RlmmdRemoteLogMetadataManager();
        m.configure(c);
        return m;
    }

    static RemoteLogSegmentMetadata segment(TopicIdPartition tp, long start) {
        return new RemoteLogSegmentMetadata(new RemoteLogSegmentId(tp, Uuid.randomUuid()), start, start + 99, 1, 7, 1, 1000,
            Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, start));
    }

    static RemoteLogSegmentMetadataUpdate finish(RemoteLogSegmentMetadata s) {
        return new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 2, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 7);
    }

    static List<RemoteLogSegmentMetadata> list(RlmmdRemoteLogMetadataManager m, TopicIdPartition tp) throws Exception {
        List<RemoteLogSegmentMetadata> out = new ArrayList<>();
        m.listRemoteLogSegments(tp).forEachRemaining(out::add);
        return out;
    }

    /** Every record of the topic, decoded, with its metadata partition, in each partition's order. */
    static Map<Integer, List<RemoteLogMetadata>> topicRecords() throws Exception {
        Map<Integer, List<RemoteLogMetadata>> out = new HashMap<>();
        MetadataRecords decoder = new MetadataRecords(MetadataRecords.TOPIC);
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < METADATA_PARTITIONS; p++) {
            tps.add(new TopicPartition(MetadataRecords.TOPIC, p));
        }
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()),
            new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps);
            long deadline = System.nanoTime() + Fixture.TIMEOUT.toNanos();
            while (tps.stream().anyMatch(tp -> c.position(tp) < ends.get(tp))) {
                assertTrue(System.nanoTime() < deadline, "reading " + MetadataRecords.TOPIC);
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(decoder.decode(r.partition(), r.offset(), r.value()));
                }
            }
        }
        return out;
    }

    @Test
    void eachChangeGoesToTheStoreThenToTheTopic() throws Exception {
        try (Fixture.Rlmmd rlmmd = new Fixture.Rlmmd(pg.database("mirror_each")).start()) {
            // The import follows the topic from before the first change.
            ByteArrayOutputStream log = new ByteArrayOutputStream();
            PrintStream ps = new PrintStream(log, true, StandardCharsets.UTF_8);
            TbrlmmTool follower = new TbrlmmTool(ps, ps);
            CompletableFuture<Integer> following = CompletableFuture.supplyAsync(() -> follower.run("import", "--follow",
                "--bootstrap-server", cluster.bootstrapServers(), "--rlmmd", rlmmd.target(), "--group", "mirror-each",
                "--progress-interval-ms", "200"));
            Fixture.await("the import following", () -> log.toString(StandardCharsets.UTF_8).contains("lag 0=0 1=0 2=0"));

            TopicIdPartition a0 = new TopicIdPartition(Uuid.randomUuid(), 0, "a");
            TopicIdPartition b3 = new TopicIdPartition(Uuid.randomUuid(), 3, "b");
            RemoteLogSegmentMetadata a = segment(a0, 0);
            RemoteLogSegmentMetadata a2 = segment(a0, 100);
            RemoteLogSegmentMetadata b = segment(b3, 0);
            RemotePartitionDeleteMetadata gone = new RemotePartitionDeleteMetadata(new TopicIdPartition(Uuid.randomUuid(), 0, "gone"),
                RemotePartitionDeleteState.DELETE_PARTITION_MARKED, 3, 7);
            List<RemoteLogMetadata> changes = List.of(a, finish(a), b, a2, finish(b), finish(a2), gone);
            try (RlmmdRemoteLogMetadataManager m = mirrored(rlmmd, cluster.bootstrapServers(), Map.of())) {
                m.onPartitionLeadershipChanges(Set.of(a0), Set.of());
                for (RemoteLogMetadata x : changes) {
                    if (x instanceof RemoteLogSegmentMetadata s) {
                        m.addRemoteLogSegmentMetadata(s).get();
                    } else if (x instanceof RemoteLogSegmentMetadataUpdate u) {
                        m.updateRemoteLogSegmentMetadata(u).get();
                    } else {
                        m.putRemotePartitionDeleteMetadata((RemotePartitionDeleteMetadata) x).get();
                    }
                }
                assertEquals(2, list(m, a0).size());
                Fixture.await("isReady with nothing waiting for the topic", () -> m.isReady(a0));
            }
            // Each in the metadata partition Kafka's partitioner picks, in the order of the changes.
            RemoteLogMetadataTopicPartitioner partitioner = new RemoteLogMetadataTopicPartitioner(METADATA_PARTITIONS);
            Map<Integer, List<RemoteLogMetadata>> want = new HashMap<>();
            for (RemoteLogMetadata x : changes) {
                want.computeIfAbsent(partitioner.metadataPartition(x.topicIdPartition()), k -> new ArrayList<>()).add(x);
            }
            assertEquals(want, topicRecords(), "the records in " + MetadataRecords.TOPIC);

            // The import recognises every mirrored record; nothing refused, nothing stops it.
            Fixture.await("the import read the mirrored records", () -> follower.alreadyApplied() + follower.applied() == changes.size());
            follower.stop();
            String out = log.toString(StandardCharsets.UTF_8);
            assertEquals(TbrlmmTool.EXIT_OK, following.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS), out);
            assertEquals(3, follower.alreadyApplied(), "the adds were already in the store: " + out);
            ByteArrayOutputStream vlog = new ByteArrayOutputStream();
            PrintStream vps = new PrintStream(vlog, true, StandardCharsets.UTF_8);
            assertEquals(TbrlmmTool.EXIT_OK, new TbrlmmTool(vps, vps).run("verify", "--bootstrap-server", cluster.bootstrapServers(),
                "--rlmmd", rlmmd.target()), "verify: the topic and the store agree:\n" + vlog);
        }
    }

    static String failure(CompletableFuture<Void> f) throws InterruptedException {
        try {
            f.get();
        } catch (ExecutionException e) {
            assertTrue(e.getCause() instanceof RemoteStorageException, "a RemoteStorageException: " + e.getCause());
            return e.getCause().getMessage();
        }
        throw new AssertionError("the change was taken");
    }

    @Test
    void aWrongPartitionCountIsRefusedBeforeTheStore() throws Exception {
        try (Fixture.Rlmmd rlmmd = new Fixture.Rlmmd(pg.database("mirror_count")).start();
             RlmmdRemoteLogMetadataManager m = mirrored(rlmmd, cluster.bootstrapServers(), Map.of("remote.log.metadata.topic.num.partitions", "5"))) {
            TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), 0, "count");
            String msg = failure(m.addRemoteLogSegmentMetadata(segment(tp, 0)));
            assertTrue(msg.contains("refused, nothing written") && msg.contains(MetadataRecords.TOPIC + " has 3 partitions, but "
                + "remote.log.metadata.topic.num.partitions says 5"), msg);
            assertEquals(List.of(), list(m, tp), "nothing in the store");
        }
    }

    @Test
    void anUnreachableTopicRefusesTheChangeBeforeTheStore() throws Exception {
        try (Fixture.Rlmmd rlmmd = new Fixture.Rlmmd(pg.database("mirror_down")).start();
             RlmmdRemoteLogMetadataManager m = mirrored(rlmmd, "127.0.0.1:" + Fixture.freePort(),
                 Map.of("remote.log.metadata.producer.max.block.ms", "500"))) {
            TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), 0, "down");
            String msg = failure(m.addRemoteLogSegmentMetadata(segment(tp, 0)));
            assertTrue(msg.contains("refused, nothing written") && msg.contains("read the partitions of " + MetadataRecords.TOPIC), msg);
            assertEquals(List.of(), list(m, tp), "nothing in the store");
        }
    }

    /**
     * A change the store took and the topic refused (here: a record over
     * the producer's max.request.size) waits in the backlog: isReady is
     * false, and the next change is refused before the store.
     */
    @Test
    void aChangeTheTopicRefusedHoldsBackTheNext() throws Exception {
        try (Fixture.Rlmmd rlmmd = new Fixture.Rlmmd(pg.database("mirror_backlog")).start();
             RlmmdRemoteLogMetadataManager m = mirrored(rlmmd, cluster.bootstrapServers(),
                 Map.of("remote.log.metadata.producer.max.request.size", "100"))) {
            TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), 0, "backlog");
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            Fixture.await("isReady before any change", () -> m.isReady(tp));
            RemoteLogSegmentMetadata first = segment(tp, 0);
            String msg = failure(m.addRemoteLogSegmentMetadata(first));
            assertTrue(msg.contains("is in the store but not in " + MetadataRecords.TOPIC + " yet"), msg);
            assertEquals(1, list(m, tp).size(), "the first change is in the store");
            assertFalse(m.isReady(tp), "isReady while a change waits for the topic");
            msg = failure(m.addRemoteLogSegmentMetadata(segment(tp, 100)));
            assertTrue(msg.contains("refused, nothing written: 1 earlier changes are not in " + MetadataRecords.TOPIC + " yet"), msg);
            assertEquals(List.of(first.remoteLogSegmentId()), list(m, tp).stream().map(RemoteLogSegmentMetadata::remoteLogSegmentId).toList(),
                "the second change is not in the store");
        }
    }
}
