package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.metadata.storage.ClassLoaderAwareRemoteLogMetadataManager;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadataManager;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * After {@code close()} returns, no thread the plugin started is running.
 * Kafka's own tests of a metadata manager fail on a thread that outlives the
 * test, and a broker that closes the plugin expects it to be gone. The plugin
 * is loaded as a broker loads it with {@code remote.log.metadata.manager.class.path}:
 * from the shaded jar, in Kafka's child-first class loader, called through
 * Kafka's class-loader-aware wrapper; so it runs on its own copy of gRPC and
 * Netty. The check runs right after close returns, without waiting.
 */
class PluginCloseIT {
    private static final String PLUGIN_CLASS = "io.github.krabka.remotestorage.kafka.RlmmdRemoteLogMetadataManager";

    private static Fixture.Postgres pg;
    private static String dsn;
    private static Fixture.Rlmmd rlmmd;

    @BeforeAll
    static void setUp() throws Exception {
        pg = new Fixture.Postgres();
        dsn = pg.database("close");
        rlmmd = new Fixture.Rlmmd(dsn).start();
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

    /** Kafka's ChildFirstClassLoader over the plugin jar: in ...common.utils.internals from 4.4, ...common.utils before. */
    private static ClassLoader childFirst(Path jar) throws ReflectiveOperationException {
        ClassNotFoundException missing = null;
        for (String name : List.of("org.apache.kafka.common.utils.internals.ChildFirstClassLoader",
            "org.apache.kafka.common.utils.ChildFirstClassLoader")) {
            try {
                return (ClassLoader) Class.forName(name).getConstructor(String.class, ClassLoader.class)
                    .newInstance(jar.toString(), PluginCloseIT.class.getClassLoader());
            } catch (ClassNotFoundException e) {
                missing = e;
            }
        }
        throw missing;
    }

    /** The plugin as a broker builds it: loaded child first, wrapped so that each call runs with its class loader. */
    private static RemoteLogMetadataManager load() throws Exception {
        Path jar = TieredBrokers.pluginJar();
        assertTrue(Files.isReadable(jar), jar + " is missing");
        ClassLoader loader = childFirst(jar);
        Class<?> c = loader.loadClass(PLUGIN_CLASS);
        assertEquals(loader, c.getClassLoader(), "the plugin comes from the child-first loader, not the test's class path");
        RemoteLogMetadataManager plugin = (RemoteLogMetadataManager) c.getDeclaredConstructor().newInstance();
        return new ClassLoaderAwareRemoteLogMetadataManager(plugin, loader);
    }

    private static Set<Thread> liveThreads() {
        return Thread.getAllStackTraces().keySet();
    }

    /** The threads alive now that were not alive before, by name and state. */
    private static List<String> startedSince(Set<Thread> before) {
        List<String> started = new ArrayList<>();
        for (Thread t : liveThreads()) {
            if (!before.contains(t) && t.isAlive()) {
                started.add(t.getName() + " (" + t.getState() + (t.isDaemon() ? ", daemon" : "") + ")");
            }
        }
        return started;
    }

    private static RemoteLogSegmentMetadata segment(TopicIdPartition tp, long start, long end) {
        return new RemoteLogSegmentMetadata(new RemoteLogSegmentId(tp, Uuid.randomUuid()), start, end, 1000 + end, 1,
            5, 1024, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, Map.of(0, start));
    }

    private static void configure(RemoteLogMetadataManager m, Fixture.Rlmmd r) {
        m.configure(Map.of(RlmmdConfig.TARGET, r.target(), RlmmdConfig.CALL_TIMEOUT_MS, "5000", "broker.id", "1"));
    }

    private static int count(Iterator<?> it) {
        int n = 0;
        for (; it.hasNext(); it.next()) {
            n++;
        }
        return n;
    }

    @Test
    void closeLeavesNoThreadRunning() throws Exception {
        Set<Thread> before = liveThreads();
        RemoteLogMetadataManager m = load();
        configure(m, rlmmd);
        TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), 0, "close-it");
        m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
        for (long start = 0; start < 300; start += 100) {
            RemoteLogSegmentMetadata s = segment(tp, start, start + 99);
            m.addRemoteLogSegmentMetadata(s).get();
            m.updateRemoteLogSegmentMetadata(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 6, Optional.empty(),
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)).get();
        }
        assertTrue(m.remoteLogSegmentMetadata(tp, 0, 150).isPresent());
        assertEquals(Optional.of(299L), m.highestOffsetForEpoch(tp, 0));
        assertEquals(3, count(m.listRemoteLogSegments(tp)));
        assertFalse(startedSince(before).isEmpty(), "the plugin runs on threads of its own while open");

        long start = System.nanoTime();
        m.close();
        long tookMs = (System.nanoTime() - start) / 1_000_000;

        assertEquals(List.of(), startedSince(before), "threads the plugin started, still running after close() returned");
        System.out.println("close: " + tookMs + " ms");
    }

    /**
     * rlmmd gone before close: close neither hangs nor leaves a thread, and
     * takes no longer than its bound (2 s for calls in flight, 3 s for the
     * threads) whatever rlmmd does.
     */
    @Test
    void closeWithRlmmdDownLeavesNoThreadRunning() throws Exception {
        try (Fixture.Rlmmd own = new Fixture.Rlmmd(dsn).start()) {
            Set<Thread> before = liveThreads();
            RemoteLogMetadataManager m = load();
            configure(m, own);
            TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), 0, "close-it-down");
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            m.addRemoteLogSegmentMetadata(segment(tp, 0, 99)).get();
            own.stop();
            ExecutionException down = assertThrows(ExecutionException.class, () -> m.addRemoteLogSegmentMetadata(segment(tp, 100, 199)).get());
            assertTrue(down.getCause() instanceof RemoteStorageException, String.valueOf(down.getCause()));

            long start = System.nanoTime();
            m.close();
            long tookMs = (System.nanoTime() - start) / 1_000_000;

            assertEquals(List.of(), startedSince(before), "threads the plugin started, still running after close() returned");
            assertTrue(tookMs < 5_000, "close took " + tookMs + " ms with rlmmd down");
            System.out.println("close with rlmmd down: " + tookMs + " ms");
        }
    }

    /**
     * The embedded mode: after close() returns, no thread of the plugin runs
     * and its rlmmd has exited. The JDK's "process reaper" threads are not
     * the plugin's: the JDK keeps one a minute after any child process of
     * the JVM ended, whoever started it.
     */
    @Test
    void embeddedCloseLeavesNoThreadAndNoChild() throws Exception {
        Set<Thread> before = liveThreads();
        RemoteLogMetadataManager m = load();
        m.configure(Map.of(RlmmdConfig.DATABASE_URL, dsn, RlmmdConfig.CALL_TIMEOUT_MS, "5000", "broker.id", "1"));
        TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), 0, "close-it-embedded");
        m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
        m.addRemoteLogSegmentMetadata(segment(tp, 0, 99)).get();
        long child = TieredBrokers.childPid(1);
        assertTrue(child > 0, "the plugin runs its rlmmd");

        long start = System.nanoTime();
        m.close();
        long tookMs = (System.nanoTime() - start) / 1_000_000;

        List<String> started = new ArrayList<>(startedSince(before));
        started.removeIf(name -> name.startsWith("process reaper"));
        assertEquals(List.of(), started, "threads the plugin started, still running after close() returned");
        assertFalse(ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false), "the child still runs after close() returned");
        System.out.println("embedded close: " + tookMs + " ms");
    }
}
