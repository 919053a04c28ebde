package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A broker given only the plugin's class, its jar and
 * rlmm.config.database.url: over an empty database it tiers a topic,
 * restarts, and reads every record back through the remote tier; and its
 * rlmmd never outlives it, however it ends.
 */
class EmbeddedBrokerIT {
    static final int SEGMENT_BYTES = 1 << 20;
    static final int RECORDS = 4 * SEGMENT_BYTES / 1070;

    static Fixture.Postgres pg;

    @BeforeAll
    static void setUp() throws Exception {
        TieredBrokers.requireKafkaLine("EmbeddedBrokerIT");
        pg = new Fixture.Postgres();
    }

    @AfterAll
    static void tearDown() throws Exception {
        Fixture.closeAll(pg);
    }

    static byte[] value(int i) {
        byte[] v = new byte[1000];
        Arrays.fill(v, (byte) ('a' + i % 26));
        return v;
    }

    /**
     * The three settings, the database URL through Kafka's file config
     * provider as an operator keeps a secret; the default embedded
     * directory; then a restart, and every record read back from offset 0.
     */
    @Test
    void threeSettingsOverAnEmptyDatabase() throws Exception {
        Path secrets = Files.createTempFile("rlmm-secrets", ".properties");
        Files.writeString(secrets, "db-url=" + pg.emptyDatabase("embedded_broker") + "\n");
        Map<String, String> config = EmbeddedBrokerMain.config("${file:" + secrets + ":db-url}", null,
            Files.createTempDirectory("rlmm-remote"));
        config.put("config.providers", "file");
        config.put("config.providers.file.class", "org.apache.kafka.common.config.provider.FileConfigProvider");
        String topic = "embedded";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KitCluster cluster = KitCluster.start(false, 1, 1, Map.of(), config);
             Admin admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers()))) {
            long child = TieredBrokers.childPid(0);
            assertTrue(child > 0, "the broker runs its rlmmd");
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(TieredBrokers.fastTieredTopic(SEGMENT_BYTES)))).all().get();
            TieredBrokers.awaitTopicIds(admin, List.of(topic));
            produce(cluster, topic, RECORDS);
            Fixture.await("local segments deleted after their copy", () -> earliestLocal(admin, tp) > 0);

            cluster.restartBroker(0);
            cluster.waitForReadyBrokers();
            long after = TieredBrokers.childPid(0);
            assertTrue(after > 0 && after != child, "the restarted broker runs a new rlmmd");
            assertFalse(ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false), "the old broker's rlmmd is gone");
            long fetches = LocalDirRemoteStorageManager.FETCHES.get();
            consumeAll(cluster, tp, RECORDS);
            assertTrue(LocalDirRemoteStorageManager.FETCHES.get() > fetches, "the first offsets came from the remote tier");
            assertTrue(earliestLocal(admin, tp) > 0, "and are not in the local log");
            cluster.close(); // the broker's orderly shutdown
            assertFalse(ProcessHandle.of(after).map(ProcessHandle::isAlive).orElse(false),
                "the rlmmd of a broker shut down in order is gone when the shutdown returns");
        }
    }

    static long earliestLocal(Admin admin, TopicPartition tp) {
        try {
            return admin.listOffsets(Map.of(tp, OffsetSpec.earliestLocal())).partitionResult(tp).get().offset();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    static void produce(KitCluster cluster, String topic, int n) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < n; i++) {
                prod.send(new ProducerRecord<>(topic, 0, Integer.toString(i).getBytes(StandardCharsets.US_ASCII), value(i)));
            }
            prod.flush();
        }
    }

    static void consumeAll(KitCluster cluster, TopicPartition tp, int n) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrapServers());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(List.of(tp));
            c.seek(tp, 0);
            long next = 0;
            long deadline = System.nanoTime() + Fixture.TIMEOUT.toNanos();
            while (next < n) {
                assertTrue(System.nanoTime() < deadline, "consumer stuck at offset " + next + " of " + n);
                for (ConsumerRecord<byte[], byte[]> r : c.poll(java.time.Duration.ofMillis(500))) {
                    assertEquals(next, r.offset(), "offsets in order, none missing");
                    assertEquals(Long.toString(next), new String(r.key(), StandardCharsets.US_ASCII));
                    next++;
                }
            }
        }
    }

    // ---- the broker in a JVM of its own ----

    record Jvm(Process process, long child, List<String> lines) {
    }

    static Jvm startJvm(String dsn, Path dir, Path remote) throws Exception {
        String javaBin = ProcessHandle.current().info().command().orElse("java");
        List<String> cmd = new ArrayList<>(List.of(javaBin, "-cp", System.getProperty("java.class.path"),
            "-Drlmm.plugin.jar=" + TieredBrokers.pluginJar(), "-Dlog4j2.configurationFile=log4j2.properties",
            EmbeddedBrokerMain.class.getName(), dsn, dir.toString(), remote.toString()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        List<String> lines = Collections.synchronizedList(new ArrayList<>());
        CompletableFuture<Long> child = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    System.out.println("[broker jvm " + p.pid() + "] " + line);
                    lines.add(line);
                    if (line.startsWith("CHILD ")) {
                        child.complete(Long.parseLong(line.substring(6).trim()));
                    }
                }
                child.completeExceptionally(new AssertionError("the broker's JVM ended before its broker was ready"));
            } catch (IOException e) {
                child.completeExceptionally(e);
            }
        });
        t.setDaemon(true);
        t.start();
        long pid = child.get(Fixture.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        assertTrue(pid > 0, "the broker's rlmmd runs");
        return new Jvm(p, pid, lines);
    }

    /** Waits up to `ms` for the process to end; how long it took, or -1 if it did not. */
    static long awaitGone(long pid, long ms) throws InterruptedException {
        long t0 = System.nanoTime();
        while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
            if (System.nanoTime() - t0 > TimeUnit.MILLISECONDS.toNanos(ms)) {
                return -1;
            }
            Thread.sleep(20);
        }
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    }

    /** The processes running a binary unpacked into dir. */
    static List<Long> rlmmdsOf(Path dir) {
        return ProcessHandle.allProcesses()
            .filter(h -> h.info().command().map(c -> c.startsWith(dir.toString())).orElse(false))
            .map(ProcessHandle::pid).toList();
    }

    static long runDirs(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(f -> f.getFileName().toString().startsWith("run-")).count();
        }
    }

    /**
     * SIGKILL of the broker's JVM: its rlmmd exits within seconds (it reads
     * the end of its standard input), none remains, and the next start on
     * the same directory succeeds. Then SIGTERM: its rlmmd is gone with the
     * JVM. (threeSettingsOverAnEmptyDatabase checks the broker's orderly
     * shutdown in process.)
     */
    @Test
    void noRlmmdOutlivesItsBroker() throws Exception {
        String dsn = pg.database("embedded_jvm");
        Path dir = Files.createTempDirectory("rlmm-embedded-jvm");
        Path remote = Files.createTempDirectory("rlmm-remote");
        Jvm first = startJvm(dsn, dir, remote);
        first.process().destroyForcibly(); // SIGKILL
        assertTrue(first.process().waitFor(Fixture.TIMEOUT.toSeconds(), TimeUnit.SECONDS));
        long ms = awaitGone(first.child(), 10_000);
        assertTrue(ms >= 0, "the rlmmd (pid " + first.child() + ") of a SIGKILLed broker still runs 10 s later");
        System.out.println("rlmmd gone " + ms + " ms after its broker's JVM was killed");
        assertEquals(List.of(), rlmmdsOf(dir), "no rlmmd of the killed broker remains");
        assertEquals(1, runDirs(dir), "the killed broker's socket directory is left behind");

        Jvm second = startJvm(dsn, dir, remote);
        assertNotEquals(first.child(), second.child());
        assertEquals(1, runDirs(dir), "the next start removed what the killed broker left");
        second.process().destroy(); // SIGTERM: the broker shuts down in order
        assertTrue(second.process().waitFor(Fixture.TIMEOUT.toSeconds(), TimeUnit.SECONDS));
        assertTrue(awaitGone(second.child(), 5_000) >= 0, "the rlmmd of a broker stopped by SIGTERM is gone with it");
        assertEquals(List.of(), rlmmdsOf(dir));
    }
}
