package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Apache Kafka 4.4 brokers (KRaft, in process) with tiered storage on,
 * this plugin as their RemoteLogMetadataManager loaded from the shaded jar
 * the way an operator deploys it (remote.log.metadata.manager.class.path:
 * child first), in the embedded mode (each broker's plugin runs its own
 * rlmmd, given only rlmm.config.database.url) or, with
 * -Drlmm.e2e.mode=sidecar, with one rlmmd process per broker; one
 * PostgreSQL for both brokers. The
 * assertions read the database and what consumers get.
 *
 * <p>The steps share one cluster and one topic and run in order: each one
 * starts from where the previous one left the partition.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class KafkaTieredStorageIT {
    static final String TOPIC = "tiered";
    static final TopicPartition TP = new TopicPartition(TOPIC, 0);
    static final int RECORD_BYTES = 1000;
    static final int SEGMENT_BYTES = 1 << 20;
    /** Records per produce step: about three 1 MiB segments. */
    static final int BATCH = 3 * SEGMENT_BYTES / (RECORD_BYTES + 70);

    static Fixture.Postgres pg;
    static String dsn;
    static final Map<Integer, Fixture.Rlmmd> rlmmds = new HashMap<>();
    static KitCluster cluster;
    static Admin admin;
    static Path remoteDir;
    static Uuid topicId;
    static int produced;

    @BeforeAll
    static void startCluster() throws Exception {
        TieredBrokers.requireKafkaLine("KafkaTieredStorageIT");
        pg = new Fixture.Postgres();
        dsn = pg.database("kafka");
        remoteDir = Files.createTempDirectory("rlmm-remote");
        Map<Integer, Map<String, String>> perServer = TieredBrokers.pluginPerBroker(dsn, 2, rlmmds);
        Path jar = TieredBrokers.pluginJar();
        Map<String, String> config = TieredBrokers.fastTiering(remoteDir);
        config.put("remote.log.metadata.manager.class.name", RlmmdRemoteLogMetadataManager.class.getName());
        config.put("remote.log.metadata.manager.class.path", jar.toString());
        config.put("rlmm.config." + RlmmdConfig.CALL_TIMEOUT_MS, "2000");
        config.put("rlmm.config." + RlmmdConfig.EMBEDDED_LIVENESS_TIMEOUT_MS, "1000");
        cluster = KitCluster.start(false, 1, 2, perServer, config);
        admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers())); // KafkaClusterTestKit.admin() is 4.3 on
        Map<String, String> topicConfig = TieredBrokers.fastTieredTopic(SEGMENT_BYTES);
        admin.createTopics(List.of(new NewTopic(TOPIC, Map.of(0, List.of(0, 1))).configs(topicConfig))).all().get();
        topicId = TieredBrokers.awaitTopicIds(admin, List.of(TOPIC)).get(TOPIC);
    }

    @AfterAll
    static void stopCluster() throws Exception {
        Fixture.closeAll(admin, cluster);
        Fixture.closeAll(rlmmds.values().toArray(new AutoCloseable[0]));
        Fixture.closeAll(pg);
    }

    // --- helpers ---------------------------------------------------------

    static byte[] value(int i) {
        byte[] v = new byte[RECORD_BYTES];
        Arrays.fill(v, (byte) ('a' + i % 26));
        byte[] n = Integer.toString(i).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(n, 0, v, 0, n.length);
        return v;
    }

    /** Produces records produced..produced+n-1 (the record's key and value name its number). */
    static void produce(int n) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = produced; i < produced + n; i++) {
                prod.send(new ProducerRecord<>(TOPIC, 0, Integer.toString(i).getBytes(StandardCharsets.US_ASCII), value(i)));
            }
            prod.flush();
        }
        produced += n;
    }

    /** Reads the partition from offset `from` to the end and checks every record, in order. */
    static void consumeAll(long from) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(2 * SEGMENT_BYTES));
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(List.of(TP));
            c.seek(TP, from);
            long next = from;
            long deadline = System.nanoTime() + Fixture.TIMEOUT.toNanos();
            while (next < produced) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("consumer stuck at offset " + next + " of " + produced);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    assertEquals(next, r.offset(), "offsets in order, none missing");
                    assertEquals(Long.toString(next), new String(r.key(), StandardCharsets.US_ASCII));
                    assertTrue(Arrays.equals(value((int) next), r.value()), "value of record " + next);
                    next++;
                }
            }
        }
    }

    static long earliestLocal() throws Exception {
        return admin.listOffsets(Map.of(TP, OffsetSpec.earliestLocal())).partitionResult(TP).get().offset();
    }

    static long earliest() throws Exception {
        return admin.listOffsets(Map.of(TP, OffsetSpec.earliest())).partitionResult(TP).get().offset();
    }

    static int leader() throws Exception {
        return admin.describeTopics(List.of(TOPIC)).allTopicNames().get().get(TOPIC).partitions().get(0).leader().id();
    }

    record Row(UUID id, long start, long end, int state, int broker) {
    }

    static List<Row> rows(String where) {
        try (Connection c = DriverManager.getConnection("jdbc:" + dsn.replace("postgres://postgres@", "postgresql://") + "&user=postgres");
             PreparedStatement st = c.prepareStatement("SELECT segment_id, start_offset, end_offset, state, broker_id FROM rlmm_segments "
                 + "WHERE topic_id = ?::uuid AND partition = 0 AND (" + where + ") ORDER BY start_offset, end_offset")) {
            st.setString(1, new UUID(topicId.getMostSignificantBits(), topicId.getLeastSignificantBits()).toString());
            List<Row> out = new ArrayList<>();
            try (ResultSet rs = st.executeQuery()) {
                while (rs.next()) {
                    out.add(new Row((UUID) rs.getObject(1), rs.getLong(2), rs.getLong(3), rs.getInt(4), rs.getInt(5)));
                }
            }
            return out;
        } catch (SQLException e) {
            throw new AssertionError("read the database: " + e.getMessage(), e);
        }
    }

    static List<Row> finished() {
        return rows("state = " + FINISHED);
    }

    static long copiedUpTo() {
        List<Row> f = finished();
        return f.isEmpty() ? -1 : f.get(f.size() - 1).end;
    }

    /**
     * The finished segments tile [first, last] with no gap and no overlap,
     * and the storage manager uploaded no offset range twice.
     */
    static void assertContiguous(long first) {
        assertContiguous(finished(), first);
    }

    /**
     * The same, on rows read once: `f` is one snapshot of the finished
     * segments. After a fault whose writes may have been applied unseen
     * ({@link #ambiguousFault}), a range may hold several finished copies:
     * they must be the same range exactly, and the range counts once.
     */
    static void assertContiguous(List<Row> f, long first) {
        assertTrue(!f.isEmpty(), "finished segments");
        List<Row> ranges = new ArrayList<>();
        for (Row r : f) {
            Row last = ranges.isEmpty() ? null : ranges.get(ranges.size() - 1);
            if (ambiguousFault && last != null && last.start == r.start && last.end == r.end) {
                continue; // an upload whose finish was applied, though the broker saw it fail
            }
            ranges.add(r);
        }
        assertEquals(first, ranges.get(0).start, "the first finished segment's start");
        for (int i = 1; i < ranges.size(); i++) {
            assertEquals(ranges.get(i - 1).end + 1, ranges.get(i).start, "segment " + i + " starts where " + (i - 1) + " ended: " + f);
        }
        LocalDirRemoteStorageManager.COPIES.forEach((range, ids) -> {
            assertEquals(ids.size(), Set.copyOf(ids).size(), "one segment id uploaded twice, " + range + ": " + ids);
            if (!faultInjected) {
                assertEquals(1, ids.size(), "uploads of " + range + " before any fault: " + ids);
            }
            // A step that stops rlmmd or the database may refuse the
            // COPY_SEGMENT_FINISHED of a segment already uploaded; Kafka then
            // copies the range again under a new id. Only the last id of a
            // range may ever have finished, unless the refusal was a
            // deadline on a write the frozen rlmmd had already committed.
            if (!ambiguousFault) {
                for (UUID earlier : ids.subList(0, ids.size() - 1)) {
                    assertTrue(stateOf(earlier) != FINISHED, "an earlier upload of " + range + " finished too: " + ids);
                }
            }
        });
    }

    /**
     * Set by the embedded mode's rlmmdDown, which freezes rlmmd (SIGSTOP)
     * wherever it is: a COPY_SEGMENT_FINISHED it had committed but not yet
     * answered fails at the broker's deadline, the broker copies the range
     * again, and both copies end finished. The write was never acknowledged,
     * so nothing acknowledged is lost; the store holds the range twice.
     */
    static volatile boolean ambiguousFault;

    /** COPY_SEGMENT_FINISHED's code in rlmm_segments.state. */
    static final int FINISHED = 1;

    /** Set, for the rest of the run, by the first step that stops rlmmd, the database or a broker. */
    static volatile boolean faultInjected;

    /** A segment's state, or -1 when no row holds it (Kafka deleted and the purge removed it). */
    static int stateOf(UUID segment) {
        List<Row> r = rows("segment_id = '" + segment + "'::uuid");
        return r.isEmpty() ? -1 : r.get(0).state;
    }

    /** The ranges of leader epoch {@code epoch} in a segment (0 or 1), from rlmm_segment_epochs_v: a segment of one epoch has no row in rlmm_segment_epochs. */
    static int epochsOf(UUID segment, int epoch) {
        try (Connection c = DriverManager.getConnection("jdbc:" + dsn.replace("postgres://postgres@", "postgresql://") + "&user=postgres");
             PreparedStatement st = c.prepareStatement("SELECT count(*) FROM rlmm_segment_epochs_v WHERE segment_id = ? AND epoch = ?")) {
            st.setObject(1, segment);
            st.setInt(2, epoch);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                return rs.getInt(1);
            }
        } catch (SQLException e) {
            throw new AssertionError(e);
        }
    }

    // --- the steps -------------------------------------------------------

    /** Copy and read back: rolled segments reach the database COPY_SEGMENT_FINISHED and local segments go. */
    @Test
    @Order(1)
    void copyAndReadBack() throws Exception {
        produce(BATCH + 200);
        int leader = leader();
        Fixture.await("two segments copied", () -> finished().size() >= 2);
        Fixture.await("local segments deleted after the copy", () -> {
            try {
                return earliestLocal() > 0;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        assertContiguous(0);
        for (Row r : finished()) {
            assertEquals(leader, r.broker, "segments copied by the leader");
            assertEquals(1, epochsOf(r.id, 0), "segment " + r.id + " carries leader epoch 0");
        }
        assertEquals(0, earliest(), "the log still starts at 0, in the remote tier");
        long fetchesBefore = LocalDirRemoteStorageManager.FETCHES.get();
        consumeAll(0);
        assertTrue(LocalDirRemoteStorageManager.FETCHES.get() > fetchesBefore, "offsets below the local log start came from the remote tier");
    }

    /** Two brokers, one PostgreSQL: the new leader resumes copying where the old one stopped. */
    @Test
    @Order(2)
    void leadershipMove() throws Exception {
        int old = leader();
        int next = 1 - old;
        long before = copiedUpTo();
        admin.alterPartitionReassignments(Map.of(TP, Optional.of(new NewPartitionReassignment(List.of(next, old))))).all().get();
        Fixture.await("reassignment done", () -> {
            try {
                return admin.listPartitionReassignments().reassignments().get().isEmpty();
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        admin.electLeaders(ElectionType.PREFERRED, Set.of(TP)).partitions().get();
        Fixture.await("leadership moved", () -> {
            try {
                return leader() == next;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        produce(BATCH);
        Fixture.await("the new leader copies", () -> finished().stream().anyMatch(r -> r.broker == next && r.start > before));
        assertContiguous(0);
        consumeAll(0);
    }

    static long uploads() {
        return LocalDirRemoteStorageManager.COPIES.values().stream().mapToLong(List::size).sum();
    }

    /**
     * An observation window, not a synchronisation: ten task intervals in
     * which a working copy task would have uploaded the rolled segments.
     */
    static void assertNoUploadFor(Duration window, String why) throws InterruptedException {
        long before = uploads();
        Thread.sleep(window.toMillis());
        assertEquals(before, uploads(), why);
    }

    /**
     * rlmmd down: isReady is false, copies pause; back: copying resumes where
     * it stopped, nothing lost. The sidecar's rlmmd is stopped and started;
     * the embedded child is frozen (SIGSTOP), then killed by the plugin's
     * liveness check, which starts another.
     */
    @Test
    @Order(3)
    void rlmmdDown() throws Exception {
        int leader = leader();
        long before = copiedUpTo();
        faultInjected = true;
        if (TieredBrokers.sidecar()) {
            Fixture.Rlmmd r = rlmmds.get(leader);
            r.stop();
            produce(BATCH);
            assertNoUploadFor(Duration.ofSeconds(3), "no upload while the leader's rlmmd is down");
            r.start();
        } else {
            long pid = TieredBrokers.childPid(leader);
            assertTrue(pid > 0, "the leader's embedded rlmmd runs");
            ambiguousFault = true;
            Process stop = new ProcessBuilder("kill", "-STOP", String.valueOf(pid)).inheritIO().start();
            assertEquals(0, stop.waitFor());
            produce(BATCH);
            assertNoUploadFor(Duration.ofSeconds(1), "no upload while the leader's rlmmd is frozen");
            Fixture.await("the frozen child replaced", () -> {
                long now = TieredBrokers.childPid(leader);
                return now > 0 && now != pid;
            });
            assertTrue(ProcessHandle.of(pid).isEmpty() || !ProcessHandle.of(pid).get().isAlive(), "the frozen child was killed");
        }
        Fixture.await("copying resumes", () -> copiedUpTo() > before);
        assertContiguous(0);
        consumeAll(0);
    }

    /**
     * A plugin of the test's own, beside the brokers', to ask an rlmmd
     * whether it caught up: the leader's rlmmd (sidecar), or an embedded
     * child of its own on the same database.
     */
    static RlmmdRemoteLogMetadataManager probe(int broker) {
        RlmmdRemoteLogMetadataManager m = new RlmmdRemoteLogMetadataManager();
        m.configure(Map.of(TieredBrokers.sidecar() ? RlmmdConfig.TARGET : RlmmdConfig.DATABASE_URL,
            TieredBrokers.sidecar() ? rlmmds.get(broker).target() : dsn, RlmmdConfig.CALL_TIMEOUT_MS, "10000", "broker.id", "99"));
        return m;
    }

    /** The database down: rlmmd cannot answer CaughtUp, isReady is false, copies pause; back: copying resumes. */
    @Test
    @Order(4)
    void databaseDown() throws Exception {
        int leader = leader();
        long before = copiedUpTo();
        org.apache.kafka.common.TopicIdPartition tip = new org.apache.kafka.common.TopicIdPartition(topicId, TP);
        try (RlmmdRemoteLogMetadataManager probe = probe(leader)) {
            if (!TieredBrokers.sidecar()) {
                // The probe's own child: it consumes the partition once assigned.
                probe.onPartitionLeadershipChanges(Set.of(), Set.of(tip));
            }
            Fixture.await("the leader's rlmmd caught up", () -> probe.isReady(tip));
            faultInjected = true;
            pg.stop();
            try {
                assertTrue(!probe.isReady(tip), "isReady with the database down");
                produce(BATCH);
                assertNoUploadFor(Duration.ofSeconds(3), "no upload while the database is down");
            } finally {
                pg.start();
            }
            Fixture.await("isReady once the database is back", () -> probe.isReady(tip));
        }
        Fixture.await("copying resumes after the database came back", () -> copiedUpTo() > before);
        assertContiguous(0);
        consumeAll(0);
    }

    /** Broker restart: the restarted broker's plugin is not ready until rlmmd caught up; copying resumes. */
    @Test
    @Order(5)
    void brokerRestart() throws Exception {
        int leader = leader();
        long before = copiedUpTo();
        faultInjected = true;
        cluster.restartBroker(leader);
        cluster.waitForReadyBrokers();
        produce(BATCH);
        Fixture.await("copying resumes after the restart", () -> copiedUpTo() > before);
        assertContiguous(0);
        consumeAll(0);
    }

    /** A DBA's view: rlmmctl lists and plots the Kafka topic's partition. */
    @Test
    @Order(6)
    void rlmmctl() throws Exception {
        Process list = new ProcessBuilder(Fixture.bin("rlmmctl").toString(), "segments", "list", "--topic", TOPIC, "--partition", "0",
            "--database-url", dsn, "-o", "json").redirectErrorStream(true).start();
        String out = new String(list.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(list.waitFor(Fixture.TIMEOUT.toSeconds(), TimeUnit.SECONDS));
        assertEquals(0, list.exitValue(), out);
        for (Row r : finished()) {
            assertTrue(out.contains("\"segment_id\": \"" + r.id + "\"") || out.contains("\"segment_id\":\"" + r.id + "\""),
                "rlmmctl segments list shows segment " + r.id + ":\n" + out);
        }
        System.out.println("rlmmctl segments list --topic " + TOPIC + ":\n" + out);
        Path svg = Files.createTempFile("tiered", ".svg");
        Process plot = new ProcessBuilder(Fixture.bin("rlmmctl").toString(), "segments", "plot", TOPIC, "0",
            "--database-url", dsn, "-o", svg.toString()).redirectErrorStream(true).start();
        String plotOut = new String(plot.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(plot.waitFor(Fixture.TIMEOUT.toSeconds(), TimeUnit.SECONDS));
        assertEquals(0, plot.exitValue(), plotOut);
        assertTrue(Files.readString(svg).contains("<svg"), "an SVG");
    }

    /** Retention deletes remote segments: DELETE_SEGMENT_STARTED, then DELETE_SEGMENT_FINISHED. */
    @Test
    @Order(7)
    void retention() throws Exception {
        int live = finished().size();
        long deletesBefore = LocalDirRemoteStorageManager.DELETES.get();
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, TOPIC),
            List.of(new AlterConfigOp(new ConfigEntry("retention.bytes", String.valueOf(2 * SEGMENT_BYTES)), AlterConfigOp.OpType.SET))))
            .all().get();
        // A retention pass moves the log start first, then deletes the
        // segments below it one at a time: it is over when nothing is being
        // deleted and the first finished segment starts at the log start.
        Fixture.await("retention deletes remote segments", () -> {
            try {
                List<Row> f = finished();
                return !rows("state = 3").isEmpty() && rows("state = 2").isEmpty()
                    && !f.isEmpty() && f.get(0).start == earliest();
            } catch (Exception e) {
                throw new AssertionError("read the log start: " + e.getMessage(), e);
            }
        });
        // DELETE_SEGMENT_FINISHED is reachable only from DELETE_SEGMENT_STARTED
        // (the library refuses any other way): each deleted row went through both.
        List<Row> after = finished();
        assertTrue(after.size() < live, "fewer live segments");
        assertTrue(LocalDirRemoteStorageManager.DELETES.get() > deletesBefore, "the remote data was deleted too");
        long start = earliest();
        assertTrue(start > 0, "the log start moved");
        assertContiguous(after, after.get(0).start);
        consumeAll(start);
    }

    /**
     * Topic deletion: Kafka 4.4 never calls putRemotePartitionDeleteMetadata;
     * the brokers delete each remote segment (DELETE_SEGMENT_STARTED, the
     * data, DELETE_SEGMENT_FINISHED) when they stop the deleted partition.
     */
    @Test
    @Order(8)
    void topicDeletion() throws Exception {
        admin.deleteTopics(List.of(TOPIC)).all().get();
        Fixture.await("nothing live left for the topic", () -> rows("state IN (0, 1, 2)").isEmpty());
        assertTrue(!rows("state = 3").isEmpty());
        try (Connection c = DriverManager.getConnection("jdbc:" + dsn.replace("postgres://postgres@", "postgresql://") + "&user=postgres");
             PreparedStatement st = c.prepareStatement("SELECT count(*) FROM rlmm_partitions WHERE topic = ? AND delete_state IS NOT NULL")) {
            st.setString(1, TOPIC);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                assertEquals(0, rs.getInt(1), "Kafka 4.4 records no partition delete");
            }
        }
    }
}
