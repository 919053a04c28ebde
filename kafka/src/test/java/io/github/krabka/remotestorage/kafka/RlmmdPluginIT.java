package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The plugin against a real rlmmd and PostgreSQL, called as a broker calls
 * it: the classes of the shaded jar.
 */
class RlmmdPluginIT {
    private static Fixture.Postgres pg;
    private static Fixture.Rlmmd rlmmd;

    @BeforeAll
    static void setUp() throws Exception {
        pg = new Fixture.Postgres();
        rlmmd = new Fixture.Rlmmd(pg.database("plugin")).start();
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (rlmmd != null) {
            rlmmd.close();
        }
        if (pg != null) {
            pg.close();
        }
    }

    static RlmmdRemoteLogMetadataManager plugin(String target, long timeoutMs) {
        RlmmdRemoteLogMetadataManager m = new RlmmdRemoteLogMetadataManager();
        m.configure(Map.of(RlmmdConfig.TARGET, target, RlmmdConfig.CALL_TIMEOUT_MS, String.valueOf(timeoutMs),
            "broker.id", "1"));
        return m;
    }

    static TopicIdPartition newTp() {
        return new TopicIdPartition(Uuid.randomUuid(), 0, "plugin-it");
    }

    static RemoteLogSegmentMetadata segment(TopicIdPartition tp, long start, long end, Map<Integer, Long> epochs) {
        return new RemoteLogSegmentMetadata(new RemoteLogSegmentId(tp, Uuid.randomUuid()), start, end, 1000 + end, 1,
            5, 1024, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, epochs, true);
    }

    static void finish(RlmmdRemoteLogMetadataManager m, RemoteLogSegmentMetadata s) throws Exception {
        m.updateRemoteLogSegmentMetadata(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 6, Optional.empty(),
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)).get();
    }

    static <T> List<T> all(Iterator<T> it) {
        List<T> out = new ArrayList<>();
        it.forEachRemaining(out::add);
        return out;
    }

    @Test
    void roundTrip() throws Exception {
        try (RlmmdRemoteLogMetadataManager m = plugin(rlmmd.target(), 5000)) {
            TopicIdPartition tp = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            RemoteLogSegmentMetadata a = segment(tp, 0, 99, Map.of(0, 0L));
            RemoteLogSegmentMetadata b = segment(tp, 100, 199, Map.of(0, 100L, 1, 150L));
            RemoteLogSegmentMetadata c = segment(tp, 200, 299, Map.of(1, 200L));
            for (RemoteLogSegmentMetadata s : List.of(a, b, c)) {
                m.addRemoteLogSegmentMetadata(s).get();
                finish(m, s);
            }
            Optional<RemoteLogSegmentMetadata> got = m.remoteLogSegmentMetadata(tp, 0, 120);
            assertTrue(got.isPresent());
            assertEquals(b.remoteLogSegmentId(), got.get().remoteLogSegmentId());
            assertEquals(b.segmentLeaderEpochs(), got.get().segmentLeaderEpochs());
            assertEquals(RemoteLogSegmentState.COPY_SEGMENT_FINISHED, got.get().state());
            assertEquals(Optional.empty(), m.remoteLogSegmentMetadata(tp, 0, 160), "offset 160 is epoch 1's in b");
            // Kafka's highestOffsetForEpoch is the end of the epoch inside the
            // segments (149 for epoch 0), not the largest end offset (199).
            assertEquals(Optional.of(149L), m.highestOffsetForEpoch(tp, 0));
            assertEquals(Optional.of(299L), m.highestOffsetForEpoch(tp, 1));
            assertEquals(Optional.empty(), m.highestOffsetForEpoch(tp, 2));
            assertEquals(3, all(m.listRemoteLogSegments(tp)).size());
            assertEquals(2, all(m.listRemoteLogSegments(tp, 1)).size());
            assertEquals(2048, m.remoteLogSize(tp, 0));
            assertEquals(Optional.empty(), m.nextSegmentWithTxnIndex(tp, 0, 0));
            Fixture.await("isReady", () -> m.isReady(tp));

            // Refusals keep their meaning.
            ExecutionException dup = assertThrows(ExecutionException.class, () -> m.addRemoteLogSegmentMetadata(a).get());
            assertInstanceOf(RemoteStorageException.class, dup.getCause());
            assertTrue(dup.getCause().getMessage().contains("ERROR_KIND_INVALID_ADD"), dup.getCause().getMessage());
            RemoteLogSegmentId unknown = new RemoteLogSegmentId(tp, Uuid.randomUuid());
            ExecutionException nf = assertThrows(ExecutionException.class, () -> m.updateRemoteLogSegmentMetadata(
                new RemoteLogSegmentMetadataUpdate(unknown, 7, Optional.empty(), RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 1)).get());
            assertInstanceOf(RemoteResourceNotFoundException.class, nf.getCause());

            // A list of more segments than one batch.
            TopicIdPartition big = newTp();
            for (int i = 0; i < 600; i++) {
                m.addRemoteLogSegmentMetadata(segment(big, i * 10L, i * 10L + 9, Map.of(0, i * 10L))).get();
            }
            List<RemoteLogSegmentMetadata> list = all(m.listRemoteLogSegments(big));
            assertEquals(600, list.size());
            for (int i = 0; i < 600; i++) {
                assertEquals(i * 10L, list.get(i).startOffset());
            }
        }
    }

    /**
     * A partition whose deletion finished answers every read with
     * RemoteResourceNotFoundException, as Kafka's managers do; one never seen
     * answers empty, and one whose deletion runs still answers its segments.
     */
    @Test
    void deletedPartition() throws Exception {
        try (RlmmdRemoteLogMetadataManager m = plugin(rlmmd.target(), 5000)) {
            TopicIdPartition tp = newTp();
            TopicIdPartition unseen = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp, unseen), Set.of());
            Fixture.await("isReady", () -> m.isReady(tp) && m.isReady(unseen));
            RemoteLogSegmentMetadata a = segment(tp, 0, 99, Map.of(0, 0L));
            m.addRemoteLogSegmentMetadata(a).get();
            finish(m, a);
            for (RemotePartitionDeleteState st : List.of(RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                    RemotePartitionDeleteState.DELETE_PARTITION_STARTED)) {
                m.putRemotePartitionDeleteMetadata(new RemotePartitionDeleteMetadata(tp, st, 7, 1)).get();
                assertTrue(m.remoteLogSegmentMetadata(tp, 0, 50).isPresent(), "in " + st);
            }
            m.putRemotePartitionDeleteMetadata(new RemotePartitionDeleteMetadata(tp,
                RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, 8, 1)).get();
            List<org.junit.jupiter.api.function.Executable> reads = List.of(
                () -> m.remoteLogSegmentMetadata(tp, 0, 50),
                () -> m.highestOffsetForEpoch(tp, 0),
                () -> m.listRemoteLogSegments(tp),
                () -> m.listRemoteLogSegments(tp, 0),
                () -> m.remoteLogSize(tp, 0),
                () -> m.nextSegmentWithTxnIndex(tp, 0, 0));
            for (org.junit.jupiter.api.function.Executable read : reads) {
                RemoteResourceNotFoundException e = assertThrows(RemoteResourceNotFoundException.class, read);
                assertTrue(e.getMessage().contains("DELETE_PARTITION_FINISHED"), e.getMessage());
            }
            ExecutionException add = assertThrows(ExecutionException.class,
                () -> m.addRemoteLogSegmentMetadata(segment(tp, 100, 199, Map.of(0, 100L))).get());
            assertInstanceOf(RemoteStorageException.class, add.getCause());

            assertEquals(Optional.empty(), m.remoteLogSegmentMetadata(unseen, 0, 50));
            assertEquals(Optional.empty(), m.highestOffsetForEpoch(unseen, 0));
            assertEquals(List.of(), all(m.listRemoteLogSegments(unseen)));
            assertEquals(List.of(), all(m.listRemoteLogSegments(unseen, 0)));
            assertEquals(0, m.remoteLogSize(unseen, 0));
            assertEquals(Optional.empty(), m.nextSegmentWithTxnIndex(unseen, 0, 0));
        }
    }

    /**
     * rlmmd on a unix socket (a target of unix:/path): the plugin reaches it
     * through Netty's epoll domain sockets, which the jar carries.
     */
    @Test
    void overAUnixSocket() throws Exception {
        Path dir = Files.createTempDirectory("rlmmd");
        try (Fixture.Rlmmd own = new Fixture.Rlmmd(rlmmd.dsn, dir.resolve("rlmmd.sock")).start();
             RlmmdRemoteLogMetadataManager m = plugin(own.target(), 5000)) {
            TopicIdPartition tp = newTp();
            RemoteLogSegmentMetadata a = segment(tp, 0, 99, Map.of(0, 0L));
            m.addRemoteLogSegmentMetadata(a).get();
            finish(m, a);
            Optional<RemoteLogSegmentMetadata> got = m.remoteLogSegmentMetadata(tp, 0, 50);
            assertTrue(got.isPresent(), "the segment, over " + own.target());
            assertEquals(a.remoteLogSegmentId(), got.get().remoteLogSegmentId());
        } finally {
            Files.deleteIfExists(dir.resolve("rlmmd.sock"));
            Files.delete(dir);
        }
    }

    /** A target no transport can reach is refused at configure, named. */
    @Test
    void unreachableTargetIsAConfigError() {
        ConfigException e = assertThrows(ConfigException.class, () -> plugin("nosuchscheme://rlmmd", 1000));
        assertTrue(e.getMessage().contains(RlmmdConfig.TARGET + " nosuchscheme://rlmmd"), e.getMessage());
    }


    /** No rlmmd at the target: configure fails, naming the target, rather than the first copy. */
    @Test
    void missingRlmmdIsAConfigError() throws Exception {
        String target = "127.0.0.1:" + Fixture.freePort();
        ConfigException e = assertThrows(ConfigException.class, () -> plugin(target, 2000));
        assertTrue(e.getMessage().contains(RlmmdConfig.TARGET + " " + target + ": no rlmmd answers"), e.getMessage());
    }

    /** A gRPC server without rlmmd's service (another program, or an incompatible rlmmd): configure fails. */
    @Test
    void incompatibleServerIsAConfigError() throws Exception {
        io.grpc.Server other = io.grpc.Grpc.newServerBuilderForPort(0, io.grpc.InsecureServerCredentials.create()).build().start();
        try {
            String target = "127.0.0.1:" + other.getPort();
            ConfigException e = assertThrows(ConfigException.class, () -> plugin(target, 2000));
            assertTrue(e.getMessage().contains(RlmmdConfig.TARGET + " " + target + ": the server there does not serve"), e.getMessage());
            assertTrue(e.getMessage().contains("incompatible"), e.getMessage());
        } finally {
            other.shutdownNow();
        }
    }

    /**
     * A plugin whose rlmmd is down, or whose rlmmd restarted (a new cache
     * that no longer holds the partition): isReady is false, writes fail
     * within the deadline; once rlmmd is back, isReady assigns the partition
     * again and turns true.
     */
    @Test
    void rlmmdDownAndBack() throws Exception {
        Fixture.Rlmmd own = new Fixture.Rlmmd(rlmmd.dsn).start();
        try (RlmmdRemoteLogMetadataManager m = plugin(own.target(), 1000)) {
            TopicIdPartition tp = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            RemoteLogSegmentMetadata a = segment(tp, 0, 99, Map.of(0, 0L));
            m.addRemoteLogSegmentMetadata(a).get();
            Fixture.await("isReady before the stop", () -> m.isReady(tp));

            own.stop();
            assertFalse(m.isReady(tp), "isReady with rlmmd down");
            ExecutionException down = assertThrows(ExecutionException.class, () -> finishFuture(m, a).get());
            assertInstanceOf(RemoteStorageException.class, down.getCause());
            assertThrows(RemoteStorageException.class, () -> m.remoteLogSegmentMetadata(tp, 0, 0));

            own.start();
            // The new rlmmd does not consume tp yet: the first isReady says
            // false and assigns it again.
            assertFalse(m.isReady(tp), "isReady of a restarted rlmmd before it loaded the partition");
            Fixture.await("isReady after rlmmd came back", () -> m.isReady(tp));
            finish(m, a);
            assertEquals(a.remoteLogSegmentId(), m.remoteLogSegmentMetadata(tp, 0, 50).get().remoteLogSegmentId());
        } finally {
            own.close();
        }
    }

    /**
     * A Kafka 3.9 broker never calls isReady: after rlmmd restarts, the
     * plugin's next call of any kind sends the assignment again, and rlmmd
     * consumes the partition again (a probe plugin of its own sees it caught
     * up). Without the re-send, rlmmd never consumes it again.
     */
    @Test
    void restartedRlmmdGetsTheAssignmentWithoutIsReady() throws Exception {
        Fixture.Rlmmd own = new Fixture.Rlmmd(rlmmd.dsn).start();
        try (RlmmdRemoteLogMetadataManager m = plugin(own.target(), 1000);
             RlmmdRemoteLogMetadataManager probe = plugin(own.target(), 1000)) {
            TopicIdPartition tp = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            RemoteLogSegmentMetadata a = segment(tp, 0, 99, Map.of(0, 0L));
            m.addRemoteLogSegmentMetadata(a).get();
            finish(m, a);
            Fixture.await("rlmmd consumes the partition", () -> probe.isReady(tp));

            own.stop();
            own.start();
            assertFalse(probe.isReady(tp), "a restarted rlmmd does not consume the partition before it is assigned again");
            Fixture.await("rlmmd consumes the partition again after the plugin's next lookups", () -> {
                try {
                    assertTrue(m.remoteLogSegmentMetadata(tp, 0, 50).isPresent(), "the segment, through the restarted rlmmd");
                } catch (RemoteStorageException e) {
                    return false; // the first call may still meet the connection to the old process
                }
                return probe.isReady(tp);
            });
        } finally {
            own.close();
        }
    }

    private static java.util.concurrent.CompletableFuture<Void> finishFuture(RlmmdRemoteLogMetadataManager m, RemoteLogSegmentMetadata s)
        throws RemoteStorageException {
        return m.updateRemoteLogSegmentMetadata(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 6, Optional.empty(),
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1));
    }

    /**
     * The lookup a fetch of the remote tier makes, through the plugin and
     * rlmmd (answered from rlmmd's cache), at 1 and 8 callers: p50 and p99
     * printed, not asserted (a busy machine moves them). Each caller first
     * makes RLMM_BENCH_WARMUP lookups (default 20000), not measured: a
     * broker's JVM has compiled the path long before, and with 200 warm-up
     * calls the p99 was two to four times the warm one. Then
     * RLMM_BENCH_LOOKUPS (default 10000) are measured.
     */
    @Test
    void lookupLatency() throws Exception {
        lookupLatency("sidecar rlmmd on TCP", plugin(rlmmd.target(), 5000));
        RlmmdRemoteLogMetadataManager embedded = new RlmmdRemoteLogMetadataManager();
        embedded.configure(Map.of(RlmmdConfig.DATABASE_URL, rlmmd.dsn, RlmmdConfig.CALL_TIMEOUT_MS, "5000", "broker.id", "1"));
        lookupLatency("embedded rlmmd on its unix socket", embedded);
    }

    /** Lookups at 1 and 8 callers through m, which it closes; p50 and p99 printed. */
    static void lookupLatency(String mode, RlmmdRemoteLogMetadataManager plugin) throws Exception {
        int warmup = Integer.parseInt(System.getenv().getOrDefault("RLMM_BENCH_WARMUP", "20000"));
        int perCaller = Integer.parseInt(System.getenv().getOrDefault("RLMM_BENCH_LOOKUPS", "10000"));
        try (RlmmdRemoteLogMetadataManager m = plugin) {
            TopicIdPartition tp = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            int segments = 1000;
            for (int i = 0; i < segments; i++) {
                RemoteLogSegmentMetadata s = segment(tp, i * 100L, i * 100L + 99, Map.of(0, i * 100L));
                m.addRemoteLogSegmentMetadata(s).get();
                finish(m, s);
            }
            Fixture.await("isReady", () -> m.isReady(tp));
            for (int callers : new int[] {1, 8}) {
                ExecutorService pool = Executors.newFixedThreadPool(callers);
                List<Future<long[]>> results = new ArrayList<>();
                for (int c = 0; c < callers; c++) {
                    int seed = c;
                    results.add(pool.submit(() -> {
                        long[] nanos = new long[perCaller];
                        java.util.Random rnd = new java.util.Random(seed);
                        for (int i = -warmup; i < perCaller; i++) {
                            long off = rnd.nextInt(segments * 100);
                            long t0 = System.nanoTime();
                            Optional<RemoteLogSegmentMetadata> s = m.remoteLogSegmentMetadata(tp, 0, off);
                            if (i >= 0) {
                                nanos[i] = System.nanoTime() - t0;
                            }
                            if (s.isEmpty()) {
                                throw new AssertionError("no segment for offset " + off);
                            }
                        }
                        return nanos;
                    }));
                }
                long[] all = new long[0];
                for (Future<long[]> f : results) {
                    long[] n = f.get();
                    long[] merged = Arrays.copyOf(all, all.length + n.length);
                    System.arraycopy(n, 0, merged, all.length, n.length);
                    all = merged;
                }
                pool.shutdown();
                Arrays.sort(all);
                System.out.printf("BENCH plugin+rlmmd lookup (%s) callers=%d n=%d p50=%.1fus p99=%.1fus%n", mode, callers, all.length,
                    all[all.length / 2] / 1e3, all[(int) (all.length * 0.99)] / 1e3);
            }
        }
    }
}
