package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * A live cluster moved from Kafka's topic-based manager (TBRLMM) onto the
 * store, and back, as docs/KAFKA.md's "The rolling switch" says: three
 * brokers (in process) on TBRLMM tier two topics, with a leadership move
 * and retention; the import follows the metadata topic and verify finds no
 * difference; each broker is restarted onto the plugin (mirror on) while a
 * producer and a consumer run; then each is restarted back onto TBRLMM.
 * After each roll: every record is read from offset 0, the tiered ones from
 * the remote tier; every object in remote storage is known to the store and
 * every finished segment has its object; retention deletes segments
 * uploaded before the roll. A store that imported nothing fails these
 * checks (the last step shows it).
 *
 * <p>The remote storage is LocalDirRemoteStorageManager (a directory per
 * segment id, which the test lists). Each broker has its own rlmmd, all on
 * one PostgreSQL.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class RollingSwitchIT {
    static final String TBRLMM = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager";
    static final String PLUGIN = RlmmdRemoteLogMetadataManager.class.getName();
    static final int BROKERS = 3;
    /** Never retained: read from offset 0 after each roll. */
    static final String KEPT = "kept";
    /** Retention deletes remote segments of it before the switch, after it, and after the way back. */
    static final String RETAINED = "retained";
    static final int RECORD_BYTES = 1000;
    static final int SEGMENT_BYTES = 1 << 20;
    static final int PER_SEGMENT = SEGMENT_BYTES / (RECORD_BYTES + 70);

    static Fixture.Postgres pg;
    static String dsn;
    static final Map<Integer, Fixture.Rlmmd> rlmmds = new HashMap<>();
    static KitCluster cluster;
    static Admin admin;
    static Path remoteDir;
    static Path jar;
    static final Map<String, Uuid> topicIds = new HashMap<>();
    /** Per topic partition, the next record's number, which is also its offset. */
    static final Map<TopicPartition, AtomicLong> produced = new ConcurrentHashMap<>();
    /** Retained's segment objects before the switch, and those uploaded while on the plugin. */
    static Set<String> beforeSwitch;
    static Set<String> duringPlugin;
    /** The import in follow mode, while it runs. */
    static TbrlmmTool follower;
    static CompletableFuture<Integer> following;
    static ByteArrayOutputStream followLog;

    @BeforeAll
    static void startCluster() throws Exception {
        TieredBrokers.requireKafkaLine("RollingSwitchIT");
        pg = new Fixture.Postgres();
        dsn = pg.database("roll");
        remoteDir = Files.createTempDirectory("rlmm-roll");
        jar = TieredBrokers.pluginJar();
        // The brokers' plugin in the suites' mode (embedded by default); the
        // import and verify call an rlmmd of their own (rlmmds' first).
        Map<Integer, Map<String, String>> perServer = TieredBrokers.pluginPerBroker(dsn, BROKERS, rlmmds);
        if (!TieredBrokers.sidecar()) {
            rlmmds.put(0, new Fixture.Rlmmd(dsn).start());
        }
        Map<String, String> config = TieredBrokers.fastTiering(remoteDir);
        config.put("remote.log.metadata.manager.class.name", TBRLMM);
        // TBRLMM's settings; the plugin's mirror reads the same ones.
        config.put("remote.log.metadata.manager.listener.name", "EXTERNAL");
        config.put("rlmm.config.remote.log.metadata.topic.replication.factor", "3");
        config.put("rlmm.config.remote.log.metadata.topic.num.partitions", "5");
        config.put("rlmm.config." + RlmmdConfig.MIRROR_ENABLE, "true");
        config.put("offsets.topic.num.partitions", "1");
        cluster = KitCluster.start(false, 1, BROKERS, perServer, config);
        admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()));
        Map<String, String> topicConfig = TieredBrokers.fastTieredTopic(SEGMENT_BYTES);
        admin.createTopics(List.of(
            new NewTopic(KEPT, Map.of(0, List.of(0, 1), 1, List.of(1, 2))).configs(topicConfig),
            new NewTopic(RETAINED, Map.of(0, List.of(2, 0))).configs(topicConfig))).all().get();
        topicIds.putAll(TieredBrokers.awaitTopicIds(admin, List.of(KEPT, RETAINED)));
        awaitFullIsr();
        for (TopicPartition tp : partitions()) {
            produced.put(tp, new AtomicLong());
        }
    }

    @AfterAll
    static void stopCluster() throws Exception {
        stopFollowing();
        Fixture.closeAll(admin, cluster);
        Fixture.closeAll(rlmmds.values().toArray(new AutoCloseable[0]));
        Fixture.closeAll(pg);
    }

    static List<TopicPartition> partitions() {
        return List.of(new TopicPartition(KEPT, 0), new TopicPartition(KEPT, 1), new TopicPartition(RETAINED, 0));
    }

    static final TopicPartition RETAINED_0 = new TopicPartition(RETAINED, 0);

    // --- producing and consuming ------------------------------------------

    static byte[] value(TopicPartition tp, long n) {
        byte[] v = new byte[RECORD_BYTES];
        Arrays.fill(v, (byte) ('a' + (n + tp.partition()) % 26));
        byte[] id = (tp + ":" + n).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(id, 0, v, 0, id.length);
        return v;
    }

    static KafkaProducer<byte[], byte[]> producer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(Fixture.TIMEOUT.toMillis()));
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /**
     * Sends the partition's next record. One producer, idempotent, per
     * partition in order: record n lands at offset n, or the send fails and
     * so does the test.
     */
    static void send(KafkaProducer<byte[], byte[]> prod, TopicPartition tp, AtomicReference<Throwable> failure) {
        long n = produced.get(tp).getAndIncrement();
        prod.send(new ProducerRecord<>(tp.topic(), tp.partition(), Long.toString(n).getBytes(StandardCharsets.US_ASCII), value(tp, n)),
            (md, e) -> {
                if (e != null) {
                    failure.compareAndSet(null, e);
                } else if (md.offset() != n) {
                    failure.compareAndSet(null, new AssertionError(tp + ": record " + n + " landed at offset " + md.offset()));
                }
            });
    }

    /** About `segments` full segments into each of the partitions. */
    static void produce(List<TopicPartition> tps, double segments) throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> prod = producer()) {
            for (int i = 0; i < segments * PER_SEGMENT; i++) {
                for (TopicPartition tp : tps) {
                    send(prod, tp, failure);
                }
            }
            prod.flush();
        }
        if (failure.get() != null) {
            throw new AssertionError("produce: " + failure.get(), failure.get());
        }
    }

    /**
     * A producer and a consumer of KEPT, running while brokers restart. The
     * producer sends about 200 records a second, paced; the consumer reads
     * from offset 0 and checks each record's offset and value.
     */
    static final class Traffic implements AutoCloseable {
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final Map<TopicPartition, Long> consumedTo = new ConcurrentHashMap<>();
        private volatile boolean stopProducing;
        private volatile boolean stopConsuming;
        private final Thread producerThread;
        private final Thread consumerThread;

        Traffic() {
            List<TopicPartition> kept = List.of(new TopicPartition(KEPT, 0), new TopicPartition(KEPT, 1));
            producerThread = new Thread(() -> {
                try (KafkaProducer<byte[], byte[]> prod = producer()) {
                    while (!stopProducing && failure.get() == null) {
                        for (TopicPartition tp : kept) {
                            send(prod, tp, failure);
                        }
                        Thread.sleep(10); // pacing, about 200 records a second
                    }
                    prod.flush();
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }, "roll-producer");
            consumerThread = new Thread(() -> {
                Properties p = new Properties();
                p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers());
                p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(2 * SEGMENT_BYTES));
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                    c.assign(kept);
                    kept.forEach(tp -> {
                        c.seek(tp, 0);
                        consumedTo.put(tp, 0L);
                    });
                    while (!stopConsuming && failure.get() == null) {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                            TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                            check(tp, consumedTo.get(tp), r);
                            consumedTo.put(tp, r.offset() + 1);
                        }
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }, "roll-consumer");
            producerThread.start();
            consumerThread.start();
        }

        /** Stops the producer, waits for the consumer to read everything produced, stops it. */
        @Override
        public void close() throws Exception {
            stopProducing = true;
            producerThread.join(Fixture.TIMEOUT.toMillis());
            try {
                Fixture.await("the consumer read every record produced", () -> failure.get() != null
                    || consumedTo.entrySet().stream().allMatch(e -> e.getValue() == produced.get(e.getKey()).get()));
            } finally {
                stopConsuming = true;
                consumerThread.join(Fixture.TIMEOUT.toMillis());
            }
            if (failure.get() != null) {
                throw new AssertionError("producer or consumer: " + failure.get(), failure.get());
            }
        }
    }

    static void check(TopicPartition tp, long expected, ConsumerRecord<byte[], byte[]> r) {
        assertEquals(expected, r.offset(), tp + ": offsets in order, none missing");
        assertEquals(Long.toString(expected), new String(r.key(), StandardCharsets.US_ASCII), tp + ": the record's number");
        assertTrue(Arrays.equals(value(tp, expected), r.value()), tp + ": the value of record " + expected);
    }

    /** Reads the partitions from `from` to what was produced, checking every record. */
    static void consumeAll(Map<TopicPartition, Long> from) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(2 * SEGMENT_BYTES));
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(from.keySet());
            Map<TopicPartition, Long> next = new HashMap<>(from);
            next.forEach(c::seek);
            long deadline = System.nanoTime() + Fixture.TIMEOUT.toNanos();
            while (next.entrySet().stream().anyMatch(e -> e.getValue() < produced.get(e.getKey()).get())) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("consumer stuck at " + next + " of " + produced);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    check(tp, next.get(tp), r);
                    next.put(tp, r.offset() + 1);
                }
            }
        }
    }

    /** Every record of KEPT from offset 0, the offsets below the local log start from the remote tier. */
    static void consumeKeptFromZero() throws Exception {
        Map<TopicPartition, Long> from = new HashMap<>();
        for (TopicPartition tp : List.of(new TopicPartition(KEPT, 0), new TopicPartition(KEPT, 1))) {
            long local = admin.listOffsets(Map.of(tp, OffsetSpec.earliestLocal())).partitionResult(tp).get().offset();
            assertTrue(local > 0, tp + ": part of the log is in the remote tier only (local log start " + local + ")");
            from.put(tp, 0L);
        }
        long fetches = LocalDirRemoteStorageManager.FETCHES.get();
        consumeAll(from);
        assertTrue(LocalDirRemoteStorageManager.FETCHES.get() > fetches, "offsets below the local log start came from the remote tier");
    }

    // --- the cluster -------------------------------------------------------

    /** Restarts each broker in turn onto `managerClass`, waiting for full ISRs and electing preferred leaders in between. */
    static void roll(String managerClass) throws Exception {
        Map<String, Object> overrides = Map.of(
            "remote.log.metadata.manager.class.name", managerClass,
            "remote.log.metadata.manager.class.path", managerClass.equals(PLUGIN) ? jar.toString() : "");
        for (int b = 0; b < BROKERS; b++) {
            System.out.println("RollingSwitchIT: broker " + b + " onto " + managerClass);
            cluster.restartBroker(b, overrides);
            cluster.waitForReadyBrokers();
            awaitFullIsr();
            elect();
            // A few records through the cluster as it is now, half on each manager.
            long before = produced.get(new TopicPartition(KEPT, 0)).get();
            Fixture.await("records produced after broker " + b + "'s restart",
                () -> produced.get(new TopicPartition(KEPT, 0)).get() > before + 200);
        }
    }

    static void awaitFullIsr() throws InterruptedException {
        Fixture.await("every partition's replicas in sync", () -> {
            try {
                Set<String> names = new HashSet<>(List.of(KEPT, RETAINED, MetadataRecords.TOPIC));
                for (TopicDescription d : admin.describeTopics(names).allTopicNames().get().values()) {
                    for (TopicPartitionInfo p : d.partitions()) {
                        if (p.leader() == null || p.isr().size() != p.replicas().size()) {
                            return false;
                        }
                    }
                }
                return true;
            } catch (Exception e) {
                return false; // a broker restarting: asked again
            }
        });
    }

    /** Preferred leaders back in place, so that restarted brokers lead again. */
    static void elect() throws Exception {
        Set<TopicPartition> tps = new HashSet<>(partitions());
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : admin.electLeaders(ElectionType.PREFERRED, tps).partitions().get().entrySet()) {
            if (e.getValue().isPresent() && !(e.getValue().get() instanceof ElectionNotNeededException)) {
                throw new AssertionError("preferred leader election of " + e.getKey() + ": " + e.getValue().get(), e.getValue().get());
            }
        }
    }

    static void retain(int segments) throws Exception {
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, RETAINED),
            List.of(new AlterConfigOp(new ConfigEntry("retention.bytes", String.valueOf((long) segments * SEGMENT_BYTES)),
                AlterConfigOp.OpType.SET)))).all().get();
    }

    // --- the import --------------------------------------------------------

    static String[] toolArgs(String mode, String target, String... extra) {
        List<String> a = new ArrayList<>(List.of(mode, "--bootstrap-server", cluster.bootstrapServers(), "--rlmmd", target));
        if (mode.equals("import")) {
            a.addAll(List.of("--group", "roll-import", "--progress-interval-ms", "1000"));
        }
        a.addAll(Arrays.asList(extra));
        return a.toArray(new String[0]);
    }

    static void startFollowing() {
        followLog = new ByteArrayOutputStream();
        PrintStream log = new PrintStream(followLog, true, StandardCharsets.UTF_8);
        follower = new TbrlmmTool(log, log);
        String[] args = toolArgs("import", rlmmds.get(0).target(), "--follow");
        following = CompletableFuture.supplyAsync(() -> follower.run(args));
    }

    static void stopFollowing() throws Exception {
        if (follower == null) {
            return;
        }
        follower.stop();
        int code = following.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        String log = followLog.toString(StandardCharsets.UTF_8);
        System.out.println("RollingSwitchIT: import --follow:\n" + log);
        follower = null;
        assertEquals(TbrlmmTool.EXIT_OK, code, "import --follow:\n" + log);
    }

    /** verify against the store behind `target`: its exit code. */
    static int verify(String target) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        int code = new TbrlmmTool(ps, ps).run(toolArgs("verify", target));
        if (code != TbrlmmTool.EXIT_OK) {
            lastVerify = out.toString(StandardCharsets.UTF_8);
        }
        return code;
    }

    static volatile String lastVerify = "";

    static void awaitVerified() throws InterruptedException {
        try {
            Fixture.await("verify finds no difference", () -> verify(rlmmds.get(0).target()) == TbrlmmTool.EXIT_OK);
        } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + "; the last verify:\n" + lastVerify, e);
        }
    }

    // --- the remote storage against the store -------------------------------

    /** Segment objects in remote storage, "topicId-partition/segmentId". */
    static Set<String> objects() throws IOException {
        try (Stream<Path> dirs = Files.list(remoteDir)) {
            Set<String> out = new HashSet<>();
            for (Path d : dirs.toList()) {
                try (Stream<Path> segs = Files.list(d)) {
                    segs.forEach(s -> out.add(d.getFileName() + "/" + s.getFileName()));
                }
            }
            return out;
        }
    }

    static Set<String> objectsOf(TopicPartition tp) throws IOException {
        String prefix = topicIds.get(tp.topic()) + "-" + tp.partition() + "/";
        return objects().stream().filter(o -> o.startsWith(prefix)).collect(Collectors.toSet());
    }

    /** Every segment of the store: "topicId-partition/segmentId" to its state code. */
    static Map<String, Integer> storeSegments(String dsn) {
        try (Connection c = DriverManager.getConnection("jdbc:" + dsn.replace("postgres://postgres@", "postgresql://") + "&user=postgres");
             Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT topic_id, partition, segment_id, state FROM rlmm_segments")) {
            Map<String, Integer> out = new TreeMap<>();
            while (rs.next()) {
                UUID t = (UUID) rs.getObject(1);
                UUID s = (UUID) rs.getObject(3);
                out.put(kafkaUuid(t) + "-" + rs.getInt(2) + "/" + kafkaUuid(s), rs.getInt(4));
            }
            return out;
        } catch (SQLException e) {
            throw new AssertionError("read the store: " + e.getMessage(), e);
        }
    }

    static String kafkaUuid(UUID u) {
        return new Uuid(u.getMostSignificantBits(), u.getLeastSignificantBits()).toString();
    }

    /**
     * The remote storage and the store agree: every object belongs to a
     * segment the store holds copying, copied or deleting (codes 0 to 2),
     * and every segment copied (1) has its object. Empty when they agree,
     * else the disagreements.
     */
    static List<String> disagreements(String dsn) throws IOException {
        Map<String, Integer> store = storeSegments(dsn);
        Set<String> objs = objects();
        List<String> out = new ArrayList<>();
        for (String o : objs) {
            Integer s = store.get(o);
            if (s == null || s > 2) {
                out.add("object " + o + " is " + (s == null ? "unknown to the store" : "of a segment the store holds deleted"));
            }
        }
        // Read again: an object of a segment copied after the first listing is there by now.
        Set<String> objsAfter = objects();
        store.forEach((seg, state) -> {
            if (state == 1 && !objs.contains(seg) && !objsAfter.contains(seg) && Integer.valueOf(1).equals(storeSegments(dsn).get(seg))) {
                out.add("segment " + seg + " is COPY_SEGMENT_FINISHED in the store, and its object is missing");
            }
        });
        return out;
    }

    static void awaitAgreement() throws InterruptedException {
        AtomicReference<List<String>> last = new AtomicReference<>(List.of());
        try {
            Fixture.await("remote storage and the store agree", () -> {
                try {
                    last.set(disagreements(dsn));
                } catch (IOException e) {
                    throw new AssertionError(e);
                }
                return last.get().isEmpty();
            });
        } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + ": " + last.get(), e);
        }
        assertTrue(storeSegments(dsn).values().stream().filter(s -> s == 1).count() >= 6, "segments copied: " + storeSegments(dsn));
    }

    /** Waits until retention deleted, from remote storage and in the store, at least one of `ids`. */
    static void awaitDeletedOneOf(Set<String> ids, String what) throws InterruptedException {
        Fixture.await(what, () -> {
            try {
                Set<String> objs = objects();
                Map<String, Integer> store = storeSegments(dsn);
                return ids.stream().anyMatch(id -> !objs.contains(id) && (store.get(id) == null || store.get(id) == 3));
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        });
    }

    // --- the steps ---------------------------------------------------------

    /** On TBRLMM: both topics tiered, leadership of kept-0 moved between copies, retention on retained. */
    @Test
    @Order(1)
    void tierOnTbrlmm() throws Exception {
        List<TopicPartition> all = partitions();
        produce(all, 3);
        Fixture.await("segments of every partition in remote storage", () -> {
            try {
                for (TopicPartition tp : all) {
                    if (objectsOf(tp).size() < 2) {
                        return false;
                    }
                }
                return true;
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        });
        TopicPartition kept0 = new TopicPartition(KEPT, 0);
        admin.alterPartitionReassignments(Map.of(kept0, Optional.of(new NewPartitionReassignment(List.of(1, 0))))).all().get();
        Fixture.await("reassignment done", () -> {
            try {
                return admin.listPartitionReassignments().reassignments().get().isEmpty();
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        elect();
        int kept0Before = objectsOf(kept0).size();
        produce(all, 3);
        Fixture.await("kept-0's new leader copies", () -> {
            try {
                return objectsOf(kept0).size() >= kept0Before + 2;
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        });
        Set<String> retainedObjects = objectsOf(RETAINED_0);
        retain(4);
        awaitDeletedOneOf(retainedObjects, "retention on TBRLMM deletes remote segments of " + RETAINED);
        consumeKeptFromZero();
    }

    /** The import copies TBRLMM's metadata into the store and follows it; verify finds no difference. */
    @Test
    @Order(2)
    void importAndVerify() throws Exception {
        assertEquals(TbrlmmTool.EXIT_DIFFERENCES, verify(rlmmds.get(0).target()), "before the import the store differs");
        if (!Boolean.getBoolean("roll.skip.import")) {
            startFollowing();
        }
        awaitVerified();
    }

    /** Each broker onto the plugin while a producer and a consumer run; then the checks. */
    @Test
    @Order(3)
    void rollOntoThePlugin() throws Exception {
        beforeSwitch = objectsOf(RETAINED_0);
        try (Traffic t = new Traffic()) {
            roll(PLUGIN);
        }
        stopFollowing();
        awaitVerified();
        consumeKeptFromZero();
        awaitAgreement();
        // Retention after the switch deletes segments TBRLMM's brokers uploaded.
        produce(List.of(RETAINED_0), 2);
        Fixture.await("retained's new segments uploaded", () -> {
            try {
                return objectsOf(RETAINED_0).stream().filter(o -> !beforeSwitch.contains(o)).count() >= 1;
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        });
        retain(2);
        awaitDeletedOneOf(beforeSwitch, "retention on the plugin deletes a segment uploaded before the switch");
        awaitAgreement();
        duringPlugin = objectsOf(RETAINED_0);
        duringPlugin.removeAll(beforeSwitch);
        assertTrue(!duringPlugin.isEmpty(), "segments of retained uploaded on the plugin");
    }

    /** The way back: the import follows again, each broker onto TBRLMM while a producer and a consumer run; the same checks. */
    @Test
    @Order(4)
    void rollBack() throws Exception {
        startFollowing();
        try (Traffic t = new Traffic()) {
            roll(TBRLMM);
        }
        produce(List.of(RETAINED_0), 2);
        retain(1);
        awaitDeletedOneOf(duringPlugin, "retention on TBRLMM deletes a segment uploaded on the plugin");
        awaitVerified();
        awaitAgreement();
        stopFollowing();
        consumeKeptFromZero();
    }

    /** The checks fail on a store that imported nothing. */
    @Test
    @Order(5)
    void checksFailOnAnEmptyStore() throws Exception {
        String empty = pg.database("roll_empty");
        try (Fixture.Rlmmd r = new Fixture.Rlmmd(empty).start()) {
            assertTrue(!disagreements(empty).isEmpty(), "remote storage against an empty store");
            assertEquals(TbrlmmTool.EXIT_DIFFERENCES, verify(r.target()), "verify against an empty store");
        }
    }
}
