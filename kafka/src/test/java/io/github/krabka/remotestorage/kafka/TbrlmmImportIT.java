package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.server.log.remote.metadata.storage.RemoteLogMetadataTopicPartitioner;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.function.Executable;

/**
 * TbrlmmTool's import and verify against a real Kafka broker (in process)
 * holding topic-based metadata written with Kafka's own serde, and rlmmd
 * over a throwaway PostgreSQL. Each test has its own metadata topic (the
 * tool's --topic), database and rlmmd.
 */
class TbrlmmImportIT {
    static final int METADATA_PARTITIONS = 3;
    static final Uuid ORDERS = Uuid.randomUuid();
    static final Uuid CLICKS = Uuid.randomUuid();
    static final Uuid GONE = Uuid.randomUuid();
    static final TopicIdPartition A0 = new TopicIdPartition(ORDERS, 0, "orders");
    static final TopicIdPartition A1 = new TopicIdPartition(ORDERS, 1, "orders");
    static final TopicIdPartition B0 = new TopicIdPartition(CLICKS, 0, "clicks");
    static final TopicIdPartition C0 = new TopicIdPartition(GONE, 0, "gone");

    static Fixture.Postgres pg;
    static KitCluster cluster;
    static Admin admin;

    Fixture.Rlmmd rlmmd;
    String topic;
    String db;

    @BeforeAll
    static void startCluster() throws Exception {
        pg = new Fixture.Postgres();
        cluster = TieredBrokers.oneBroker();
        admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()));
    }

    @AfterAll
    static void stopCluster() throws Exception {
        Fixture.closeAll(admin, cluster, pg);
    }

    void setUp(TestInfo info) throws Exception {
        String name = info.getTestMethod().orElseThrow().getName().toLowerCase();
        topic = "meta-" + name;
        admin.createTopics(List.of(new NewTopic(topic, METADATA_PARTITIONS, (short) 1))).all().get();
        db = name;
        rlmmd = new Fixture.Rlmmd(pg.database(db)).start();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (rlmmd != null) {
            rlmmd.close();
        }
    }

    // ---- the topic's content ----

    /** The records of a topic, and how many of them TBRLMM drops. */
    static final class Content {
        final List<RemoteLogMetadata> records = new ArrayList<>();
        int dropped;
        /** Per user partition: the segments TBRLMM holds at the end (not DELETE_SEGMENT_FINISHED). */
        final Map<TopicIdPartition, Integer> live = new HashMap<>();
        /** Segment 0 of A0, which carries custom metadata. */
        RemoteLogSegmentId customSegment;
    }

    /**
     * Per user partition of A0, A1, B0: n segments of 100 offsets, a leader
     * epoch every 10 segments and segments spanning two epochs; each copied
     * (custom metadata on some, broker ids and event timestamps varying),
     * the last still copying; the first quarter deleted, one of them still
     * deleting. C0: three segments deleted, then the partition deleted.
     * Dropped by TBRLMM: an update of an unknown segment, an update of a
     * segment deleted, an illegal transition, and an add to C0 after its
     * deletion finished.
     */
    static Content content(int n) {
        Content c = new Content();
        List<List<RemoteLogMetadata>> perPartition = new ArrayList<>();
        for (TopicIdPartition tp : List.of(A0, A1, B0)) {
            List<RemoteLogMetadata> recs = new ArrayList<>();
            List<RemoteLogSegmentMetadata> segs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                long start = i * 100L;
                int epoch = i / 10;
                Map<Integer, Long> epochs = i % 10 == 9 && i != n - 1 ? Map.of(epoch, start, epoch + 1, start + 50) : Map.of(epoch, start);
                Optional<CustomMetadata> custom = i % 4 == 0 ? Optional.of(new CustomMetadata(new byte[] {(byte) i, 7})) : Optional.empty();
                RemoteLogSegmentMetadata s = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(tp, Uuid.randomUuid()), start, start + 99,
                    10_000 + i, i % 3, 1000 + i, 1000 + i, custom, RemoteLogSegmentState.COPY_SEGMENT_STARTED, epochs);
                segs.add(s);
                recs.add(s);
                if (i != n - 1) {
                    Optional<CustomMetadata> c2 = i % 5 == 0 ? Optional.of(new CustomMetadata(new byte[] {9, (byte) i})) : Optional.empty();
                    recs.add(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 2000 + i, c2, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, (i + 1) % 3));
                }
            }
            int deleted = n / 4;
            for (int i = 0; i < deleted; i++) {
                RemoteLogSegmentId id = segs.get(i).remoteLogSegmentId();
                recs.add(new RemoteLogSegmentMetadataUpdate(id, 3000 + i, Optional.empty(), RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 2));
                if (i != deleted - 1) {
                    recs.add(new RemoteLogSegmentMetadataUpdate(id, 4000 + i, Optional.empty(), RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, 2));
                }
            }
            c.live.put(tp, n - (deleted - 1));
            if (tp.equals(A0)) {
                c.customSegment = segs.get(n / 4 + 4 - (n / 4) % 4).remoteLogSegmentId(); // i % 4 == 0, not deleted
                recs.add(new RemoteLogSegmentMetadataUpdate(new RemoteLogSegmentId(tp, Uuid.randomUuid()), 5000, Optional.empty(),
                    RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)); // unknown segment
                recs.add(new RemoteLogSegmentMetadataUpdate(segs.get(deleted - 1).remoteLogSegmentId(), 5001, Optional.empty(),
                    RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)); // DELETE_SEGMENT_STARTED to COPY_SEGMENT_FINISHED
                c.dropped += 2;
            }
            if (tp.equals(B0)) {
                recs.add(new RemoteLogSegmentMetadataUpdate(segs.get(0).remoteLogSegmentId(), 5002, Optional.empty(),
                    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, 1)); // deleted: TBRLMM forgot it
                c.dropped += 1;
            }
            perPartition.add(recs);
        }
        List<RemoteLogMetadata> gone = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            RemoteLogSegmentMetadata s = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(C0, Uuid.randomUuid()), i * 10L, i * 10L + 9,
                100 + i, 0, 100 + i, 10, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, i * 10L));
            gone.add(s);
            for (RemoteLogSegmentState st : List.of(RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)) {
                gone.add(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 200 + i, Optional.empty(), st, 0));
            }
        }
        for (RemotePartitionDeleteState st : RemotePartitionDeleteState.values()) {
            gone.add(new RemotePartitionDeleteMetadata(C0, st, 300 + st.ordinal(), 0));
        }
        gone.add(new RemoteLogSegmentMetadata(new RemoteLogSegmentId(C0, Uuid.randomUuid()), 40, 49, 1, 0, 1, 10, Optional.empty(),
            RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, 40L)));
        c.dropped += 1;
        perPartition.add(gone);
        // Round robin over the user partitions, each in its own order.
        int[] next = new int[perPartition.size()];
        boolean more = true;
        while (more) {
            more = false;
            for (int p = 0; p < perPartition.size(); p++) {
                if (next[p] < perPartition.get(p).size()) {
                    c.records.add(perPartition.get(p).get(next[p]++));
                    more = true;
                }
            }
        }
        return c;
    }

    static TopicIdPartition partitionOf(RemoteLogMetadata m) {
        return m.topicIdPartition();
    }

    /** Writes the records as TBRLMM does: Kafka's serde, the partition of Kafka's partitioner. */
    void produce(List<RemoteLogMetadata> records) throws Exception {
        RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
        RemoteLogMetadataTopicPartitioner partitioner = new RemoteLogMetadataTopicPartitioner(METADATA_PARTITIONS);
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        for (RemoteLogMetadata m : records) {
            out.add(new ProducerRecord<>(topic, partitioner.metadataPartition(partitionOf(m)), null, serde.serialize(m)));
        }
        produceRaw(out);
    }

    void produceRaw(List<ProducerRecord<byte[], byte[]>> records) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.<String, Object>of(
            ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers(), ProducerConfig.ACKS_CONFIG, "all"),
            new ByteArraySerializer(), new ByteArraySerializer())) {
            for (ProducerRecord<byte[], byte[]> r : records) {
                p.send(r).get();
            }
        }
    }

    /** A record in partition 0 of the metadata topic: its offset. */
    long produceOne(byte[] value) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.<String, Object>of(
            ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers(), ProducerConfig.ACKS_CONFIG, "all"),
            new ByteArraySerializer(), new ByteArraySerializer())) {
            return p.send(new ProducerRecord<>(topic, 0, null, value)).get().offset();
        }
    }

    // ---- running the tool ----

    /** An import --follow running in the background, its standard error, and its exit code to come. */
    record Following(Content c, TbrlmmTool tool, ByteArrayOutputStream err, CompletableFuture<Integer> code) {}

    /** Sets the test up with a topic of content(8), starts import --follow, and waits until it has applied the topic. */
    Following follow(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(8);
        produce(c.records);
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        TbrlmmTool tool = new TbrlmmTool(System.out, new PrintStream(err, true, StandardCharsets.UTF_8));
        CompletableFuture<Integer> code = CompletableFuture.supplyAsync(() -> tool.run(args("import", "--follow")));
        Fixture.await("the topic imported", () -> tool.applied() == c.records.size() - c.dropped);
        return new Following(c, tool, err, code);
    }

    static final class Run {
        final int code;
        final String out;
        final String err;
        final TbrlmmTool tool;

        Run(int code, String out, String err, TbrlmmTool tool) {
            this.code = code;
            this.out = out;
            this.err = err;
            this.tool = tool;
        }

        @Override
        public String toString() {
            return "exit " + code + "\nstdout:\n" + out + "\nstderr:\n" + err;
        }
    }

    String[] args(String mode, String... extra) {
        List<String> a = new ArrayList<>(List.of(mode, "--bootstrap-server", cluster.bootstrapServers(), "--rlmmd", rlmmd.target(),
            "--topic", topic));
        if (mode.equals("import")) {
            a.addAll(List.of("--group", "import-" + db, "--progress-interval-ms", "200"));
        }
        a.addAll(Arrays.asList(extra));
        return a.toArray(new String[0]);
    }

    static Run run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        TbrlmmTool tool = new TbrlmmTool(new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        int code = tool.run(args);
        Run r = new Run(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8), tool);
        System.out.println("TbrlmmTool " + String.join(" ", args) + "\n" + r);
        return r;
    }

    Run importAll(String... extra) {
        return run(args("import", extra));
    }

    Run verify(String... extra) {
        return run(args("verify", extra));
    }

    /** The plugin, to read and write the store as a broker does. */
    RlmmdRemoteLogMetadataManager plugin() {
        RlmmdRemoteLogMetadataManager m = new RlmmdRemoteLogMetadataManager();
        m.configure(Map.of(RlmmdConfig.TARGET, rlmmd.target(), RlmmdConfig.CALL_TIMEOUT_MS, "5000", "broker.id", "1"));
        return m;
    }

    static List<RemoteLogSegmentMetadata> list(RlmmdRemoteLogMetadataManager m, TopicIdPartition tp) throws Exception {
        List<RemoteLogSegmentMetadata> out = new ArrayList<>();
        m.listRemoteLogSegments(tp).forEachRemaining(out::add);
        return out;
    }

    static void assertThrowsNotFound(Executable e) {
        try {
            e.execute();
        } catch (RemoteResourceNotFoundException expected) {
            return;
        } catch (Throwable t) {
            throw new AssertionError("want RemoteResourceNotFoundException, got " + t, t);
        }
        throw new AssertionError("want RemoteResourceNotFoundException, got nothing");
    }

    void assertImportedAll(Content c) throws Exception {
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            for (TopicIdPartition tp : List.of(A0, A1, B0)) {
                assertEquals(c.live.get(tp), list(m, tp).size(), "segments of " + tp);
            }
            RemoteLogSegmentMetadata custom = list(m, A0).stream()
                .filter(s -> s.remoteLogSegmentId().equals(c.customSegment)).findFirst().orElseThrow();
            assertTrue(custom.customMetadata().isPresent(), "custom metadata of " + custom);
            assertEquals(RemoteLogSegmentState.COPY_SEGMENT_FINISHED, custom.state());
            assertThrowsNotFound(() -> m.listRemoteLogSegments(C0));
        }
    }

    // ---- the tests ----

    @Test
    void importVerifyImportAgain(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(40);
        produce(c.records);

        Run first = importAll();
        assertEquals(TbrlmmTool.EXIT_OK, first.code, first.toString());
        assertEquals(c.records.size() - c.dropped, first.tool.applied(), "records applied");
        assertEquals(c.dropped, first.tool.dropped(), "records TBRLMM drops");
        assertEquals(0, first.tool.alreadyApplied());
        assertTrue(first.out.contains("import: done: " + c.records.size() + " records read"), first.out);
        assertTrue(first.err.contains("dropped, as TBRLMM drops it: an update of a segment TBRLMM does not know"), first.err);
        assertImportedAll(c);

        Run v = verify();
        assertEquals(TbrlmmTool.EXIT_OK, v.code, v.toString());
        assertTrue(v.out.contains("compared 4 partitions"), v.out);

        // Again, with the checkpoint: nothing to do.
        Run again = importAll();
        assertEquals(TbrlmmTool.EXIT_OK, again.code, again.toString());
        assertEquals(0, again.tool.applied() + again.tool.alreadyApplied() + again.tool.dropped());

        // Again without a checkpoint (another group): every record is
        // recognised, nothing is refused, the store ends the same.
        Run replay = run(args("import", "--group", "replay-" + db));
        assertEquals(TbrlmmTool.EXIT_OK, replay.code, replay.toString());
        assertEquals(0, replay.tool.storeRefused(), replay.toString());
        assertTrue(replay.tool.alreadyApplied() > 0, replay.toString());
        assertImportedAll(c);
        Run v2 = verify();
        assertEquals(TbrlmmTool.EXIT_OK, v2.code, v2.toString());

        // The group's checkpoint against another, empty database: refused.
        rlmmd.close();
        rlmmd = new Fixture.Rlmmd(pg.database(db + "_other")).start();
        Run other = importAll();
        assertEquals(TbrlmmTool.EXIT_ERROR, other.code, other.toString());
        assertTrue(other.err.contains("says records were applied, but the store holds none of the topic's"), other.err);
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            assertEquals(List.of(), list(m, A0), "nothing written");
        }
    }

    /**
     * --skip-deleted writes only the segments TBRLMM still holds at the end,
     * and the store ends as TBRLMM does; a segment the store already holds
     * is never skipped, so its deletion, later in the topic, is applied.
     */
    @Test
    void skipDeletedWritesTheLiveSet(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(40);
        produce(c.records);
        Run first = importAll("--skip-deleted");
        assertEquals(TbrlmmTool.EXIT_OK, first.code, first.toString());
        assertTrue(first.tool.skippedDeleted() > 0, first.toString());
        assertEquals(c.records.size() - c.dropped, first.tool.applied() + first.tool.skippedDeleted(), first.toString());
        assertTrue(first.out.contains(first.tool.skippedDeleted() + " of segments deleted within the topic skipped"), first.out);
        assertImportedAll(c);
        Run v = verify();
        assertEquals(TbrlmmTool.EXIT_OK, v.code, v.toString());

        List<RemoteLogSegmentMetadata> live;
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            live = list(m, A1);
        }
        assertTrue(!live.isEmpty());
        List<RemoteLogMetadata> deletes = new ArrayList<>();
        for (RemoteLogSegmentMetadata s : live) {
            if (s.state() == RemoteLogSegmentState.COPY_SEGMENT_FINISHED) {
                deletes.add(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 9, Optional.empty(),
                    RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 1));
                deletes.add(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 10, Optional.empty(),
                    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, 1));
            }
        }
        assertTrue(!deletes.isEmpty());
        produce(deletes);
        Run again = importAll("--skip-deleted");
        assertEquals(TbrlmmTool.EXIT_OK, again.code, again.toString());
        assertEquals(0, again.tool.skippedDeleted(), "segments the store holds are not skipped: " + again);
        assertEquals(deletes.size(), again.tool.applied(), again.toString());
        Run v2 = verify();
        assertEquals(TbrlmmTool.EXIT_OK, v2.code, v2.toString());
        assertEquals(TbrlmmTool.EXIT_USAGE, verify("--skip-deleted").code, "an import option");
    }

    @Test
    void verifyFindsPlantedDifferencesAndAnEmptyStore(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(12);
        produce(c.records);
        Run empty = verify();
        assertEquals(TbrlmmTool.EXIT_DIFFERENCES, empty.code, empty.toString());
        assertTrue(empty.out.contains("TBRLMM holds it, the store does not"), empty.out);

        assertEquals(TbrlmmTool.EXIT_OK, importAll().code);
        RemoteLogSegmentMetadata planted;
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            planted = list(m, A1).stream().filter(s -> s.state() == RemoteLogSegmentState.COPY_SEGMENT_FINISHED).reduce((a, b) -> b).orElseThrow();
            m.updateRemoteLogSegmentMetadata(new RemoteLogSegmentMetadataUpdate(planted.remoteLogSegmentId(), 9, Optional.empty(),
                RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 1)).get();
        }
        Run v = verify();
        assertEquals(TbrlmmTool.EXIT_DIFFERENCES, v.code, v.toString());
        assertTrue(v.out.contains("segment " + planted.remoteLogSegmentId().id() + ": state: TBRLMM COPY_SEGMENT_FINISHED, the store DELETE_SEGMENT_STARTED"), v.out);
        // A DELETE_SEGMENT_STARTED segment is not found by lookups.
        assertTrue(v.out.contains("lookup at epoch " + planted.segmentLeaderEpochs().keySet().iterator().next() + " offset " + planted.startOffset()
            + ": TBRLMM " + planted.remoteLogSegmentId().id() + ", the store none"), v.out);
    }

    /** The tool as its own process, killed (SIGKILL) mid-import, then run again. */
    @Test
    void killedMidImportResumes(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(300);
        produce(c.records);
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-cp", System.getProperty("java.class.path"), TbrlmmTool.class.getName()));
        cmd.addAll(List.of(args("import", "--max-rate", "400", "--checkpoint-interval-ms", "1000", "--progress-interval-ms", "200")));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        Pattern applied = Pattern.compile("records read, (\\d+) applied");
        CompletableFuture<Long> killedAt = new CompletableFuture<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    System.out.println("[killed import] " + line);
                    Matcher m = applied.matcher(line);
                    if (m.find() && Long.parseLong(m.group(1)) >= 600 && !killedAt.isDone()) {
                        p.destroyForcibly();
                        killedAt.complete(Long.parseLong(m.group(1)));
                    }
                }
                killedAt.completeExceptionally(new AssertionError("the import ended before it was killed"));
            } catch (IOException e) {
                killedAt.completeExceptionally(e);
            }
        });
        reader.start();
        long at = killedAt.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        assertTrue(p.waitFor(Fixture.TIMEOUT.toSeconds(), TimeUnit.SECONDS));
        assertTrue(at < c.records.size() - c.dropped, "killed mid-import");

        Run resumed = importAll();
        assertEquals(TbrlmmTool.EXIT_OK, resumed.code, resumed.toString());
        assertEquals(0, resumed.tool.storeRefused());
        System.out.println("killed after " + at + " records applied; the next run applied " + resumed.tool.applied()
            + " and found " + resumed.tool.alreadyApplied() + " already in the store");
        // It resumed from the checkpoint: not every record was read again.
        assertTrue(resumed.tool.applied() + resumed.tool.alreadyApplied() + resumed.tool.dropped() < c.records.size(), resumed.toString());
        assertImportedAll(c);
        Run v = verify();
        assertEquals(TbrlmmTool.EXIT_OK, v.code, v.toString());
    }

    @Test
    void rlmmdDownMidImport(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(120);
        produce(c.records);
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream errStream = new PrintStream(err, true, StandardCharsets.UTF_8);
        TbrlmmTool tool = new TbrlmmTool(System.out, errStream);
        CompletableFuture<Integer> code = CompletableFuture.supplyAsync(() -> tool.run(args("import", "--max-rate", "300")));
        Fixture.await("100 records applied", () -> tool.applied() >= 100);
        rlmmd.stop();
        Fixture.await("the import to retry", () -> err.toString(StandardCharsets.UTF_8).contains("retrying with backoff"));
        long before = tool.applied();
        rlmmd.start();
        int exit = code.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        System.out.println(err.toString(StandardCharsets.UTF_8));
        assertEquals(TbrlmmTool.EXIT_OK, exit, err.toString(StandardCharsets.UTF_8));
        assertTrue(tool.applied() > before, "applied after rlmmd was back");
        assertEquals(0, tool.storeRefused());
        assertEquals(c.records.size() - c.dropped, tool.applied() + tool.alreadyApplied(), "every record once");
        assertImportedAll(c);
        assertEquals(TbrlmmTool.EXIT_OK, verify().code);
    }

    /**
     * A segment in the store whose records reach the topic only later (a
     * broker on the plugin with the mirror on writes the store first): the
     * first read finds a conflict, the import reads the topic again, and
     * goes on once the records are there.
     */
    @Test
    void aConflictTheTopicCatchesUpWithIsNotFinal(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(8);
        produce(c.records);
        RemoteLogSegmentMetadata late = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(B0, Uuid.randomUuid()), 5000, 5099,
            1, 1, 1, 1, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, 5000L));
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            m.addRemoteLogSegmentMetadata(late).get();
        }
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        TbrlmmTool tool = new TbrlmmTool(System.out, new PrintStream(err, true, StandardCharsets.UTF_8));
        CompletableFuture<Integer> code = CompletableFuture.supplyAsync(() -> tool.run(args("import")));
        Fixture.await("the import to read the topic again", () -> err.toString(StandardCharsets.UTF_8).contains("reading it again"));
        produce(List.of(late));
        int exit = code.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        String log = err.toString(StandardCharsets.UTF_8);
        assertEquals(TbrlmmTool.EXIT_OK, exit, log);
        assertEquals(c.records.size() - c.dropped, tool.applied(), log);
        assertEquals(1, tool.alreadyApplied(), "the late segment's add, already in the store: " + log);
        assertEquals(TbrlmmTool.EXIT_OK, verify().code);
    }

    @Test
    void conflictIsRefused(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(8);
        produce(c.records);
        RemoteLogSegmentMetadata foreign = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(B0, Uuid.randomUuid()), 5000, 5099,
            1, 1, 1, 1, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, 5000L));
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            m.addRemoteLogSegmentMetadata(foreign).get();
        }
        Run r = importAll();
        assertEquals(TbrlmmTool.EXIT_ERROR, r.code, r.toString());
        assertTrue(r.err.contains("conflict: " + B0 + ": segment " + foreign.remoteLogSegmentId().id()), r.err);
        assertTrue(r.err.contains("nothing was written"), r.err);
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            assertEquals(List.of(), list(m, A0), "nothing written");
            assertEquals(1, list(m, B0).size());
        }
    }

    @Test
    void unparsableRecordStopsOrIsSkipped(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(8);
        produce(c.records.subList(0, 10));
        // Frame version 1, RemoteLogSegmentMetadataRecord version 0, then bytes that are not one.
        long offset = produceOne(new byte[] {1, 0, 0, (byte) 0xff, (byte) 0xff, 3});
        produce(c.records.subList(10, c.records.size()));

        Run stop = importAll();
        assertEquals(TbrlmmTool.EXIT_ERROR, stop.code, stop.toString());
        assertTrue(stop.err.contains(topic + " partition 0 offset " + offset + ": RemoteLogSegmentMetadataRecord version 0 cannot be parsed"), stop.err);
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            for (TopicIdPartition tp : List.of(A0, A1, B0)) {
                assertEquals(List.of(), list(m, tp), "nothing written");
            }
        }
        Run skip = importAll("--skip-unparsable");
        assertEquals(TbrlmmTool.EXIT_OK, skip.code, skip.toString());
        assertEquals(1, skip.tool.skipped());
        assertTrue(skip.err.contains("skipped: " + topic + " partition 0 offset " + offset), skip.err);
        assertImportedAll(c);
        assertEquals(TbrlmmTool.EXIT_OK, verify("--skip-unparsable").code);
    }

    @Test
    void unknownSerdeVersionStopsBeforeWriting(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(8);
        produce(c.records);
        // A RemoteLogSegmentMetadataUpdateRecord of version 5, which no Kafka line writes yet.
        long offset = produceOne(new byte[] {1, 1, 5, 0, 0, 0});
        Run r = importAll();
        assertEquals(TbrlmmTool.EXIT_ERROR, r.code, r.toString());
        assertTrue(r.err.contains(topic + " partition 0 offset " + offset + ": RemoteLogSegmentMetadataUpdateRecord version 5, but the serde of Kafka"), r.err);
        assertTrue(r.err.contains("reads versions 0 to 0"), r.err);
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            for (TopicIdPartition tp : List.of(A0, A1, B0)) {
                assertEquals(List.of(), list(m, tp), "nothing written");
            }
        }
        // --skip-unparsable does not skip a version it does not know.
        assertEquals(TbrlmmTool.EXIT_ERROR, importAll("--skip-unparsable").code);
    }

    @Test
    void followKeepsTheStoreCurrent(TestInfo info) throws Exception {
        Following f = follow(info);
        Content c = f.c;
        TbrlmmTool tool = f.tool;
        Fixture.await("a lag report", () -> f.err.toString(StandardCharsets.UTF_8).matches("(?s).*lag 0=0 1=0 2=0.*"));
        RemoteLogSegmentMetadata later = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(A1, Uuid.randomUuid()), 100_000, 100_099,
            1, 1, 1, 1, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(5, 100_000L));
        produce(List.of(later, new RemoteLogSegmentMetadataUpdate(later.remoteLogSegmentId(), 2, Optional.empty(),
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)));
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            Fixture.await("the new segment in the store", () -> {
                try {
                    return m.remoteLogSegmentMetadata(A1, 5, 100_050).isPresent();
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
        }
        tool.stop();
        assertEquals(TbrlmmTool.EXIT_OK, f.code.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS), f.err.toString(StandardCharsets.UTF_8));
        assertEquals(c.records.size() - c.dropped + 2, tool.applied());
        assertEquals(TbrlmmTool.EXIT_OK, verify().code);
    }

    @Test
    void followRefusesAConflictOnANewPartition(TestInfo info) throws Exception {
        Following f = follow(info);
        Content c = f.c;
        TbrlmmTool tool = f.tool;
        // A broker on the plugin writes a partition TBRLMM's topic names only later.
        TopicIdPartition d0 = new TopicIdPartition(Uuid.randomUuid(), 0, "late");
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            m.addRemoteLogSegmentMetadata(new RemoteLogSegmentMetadata(new RemoteLogSegmentId(d0, Uuid.randomUuid()), 0, 99,
                1, 1, 1, 1, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, 0L))).get();
        }
        RemoteLogSegmentMetadata fromTopic = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(d0, Uuid.randomUuid()), 0, 99,
            1, 1, 1, 1, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, 0L));
        produce(List.of(fromTopic));
        int exit = f.code.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        String log = f.err.toString(StandardCharsets.UTF_8);
        assertEquals(TbrlmmTool.EXIT_ERROR, exit, log);
        assertTrue(log.contains("is the first record of " + d0 + ", of which the store already holds 1 segments the topic does not"), log);
        try (RlmmdRemoteLogMetadataManager m = plugin()) {
            assertEquals(1, list(m, d0).size(), "the topic's segment was not written");
        }
    }

    @Test
    void databaseDownMidImport(TestInfo info) throws Exception {
        setUp(info);
        Content c = content(120);
        produce(c.records);
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        TbrlmmTool tool = new TbrlmmTool(System.out, new PrintStream(err, true, StandardCharsets.UTF_8));
        CompletableFuture<Integer> code = CompletableFuture.supplyAsync(() -> tool.run(args("import", "--max-rate", "300")));
        Fixture.await("100 records applied", () -> tool.applied() >= 100);
        pg.stop();
        try {
            Fixture.await("the import to retry", () -> err.toString(StandardCharsets.UTF_8).contains("retrying with backoff"));
        } finally {
            pg.start();
        }
        int exit = code.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        String log = err.toString(StandardCharsets.UTF_8);
        System.out.println(log);
        assertEquals(TbrlmmTool.EXIT_OK, exit, log);
        assertEquals(0, tool.storeRefused(), log);
        assertEquals(c.records.size() - c.dropped, tool.applied() + tool.alreadyApplied(), "every record once");
        assertImportedAll(c);
        assertEquals(TbrlmmTool.EXIT_OK, verify().code);
    }
}
