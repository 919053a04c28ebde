package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The embedded mode, the plugin given only {@code database.url}: it runs
 * rlmmd from its jar as its child, and these tests call it as a broker
 * does, with the classes of the shaded jar. Each test has an embedded
 * directory of its own. The checks of mounts (noexec, read-only) need root,
 * as CI runs.
 */
class EmbeddedRlmmdIT {
    /** A password no log line, error or command line may show. */
    static final String SECRET = "pw-never-shown-7Qx";

    static Fixture.Postgres pg;
    static Path base;

    @BeforeAll
    static void setUp() throws Exception {
        pg = new Fixture.Postgres();
        base = Files.createTempDirectory("rlmm-embedded");
    }

    @AfterAll
    static void tearDown() throws Exception {
        Fixture.closeAll(pg);
    }

    /** A DSN of the fixture with a password in it (the fixture trusts local logins, so any password works). */
    static String withSecret(String dsn) {
        return dsn.replace("postgres://postgres@", "postgres://postgres:" + SECRET + "@");
    }

    static Map<String, Object> props(String databaseUrl, Path dir, String... more) {
        Map<String, Object> p = new HashMap<>();
        p.put(RlmmdConfig.DATABASE_URL, databaseUrl);
        p.put(RlmmdConfig.EMBEDDED_DIR, dir.toString());
        p.put(RlmmdConfig.CALL_TIMEOUT_MS, "5000");
        p.put("broker.id", "7");
        for (int i = 0; i < more.length; i += 2) {
            p.put(more[i], more[i + 1]);
        }
        return p;
    }

    static RlmmdRemoteLogMetadataManager plugin(Map<String, Object> props) {
        RlmmdRemoteLogMetadataManager m = new RlmmdRemoteLogMetadataManager();
        m.configure(props);
        return m;
    }

    static Path dir(String name) throws IOException {
        return Files.createDirectories(base.resolve(name));
    }

    static TopicIdPartition newTp() {
        return new TopicIdPartition(Uuid.randomUuid(), 0, "embedded-it");
    }

    static boolean alive(long pid) {
        return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
    }

    static String cmdline(long pid) throws IOException {
        return new String(Files.readAllBytes(Path.of("/proc/" + pid + "/cmdline")), StandardCharsets.UTF_8).replace('\0', ' ');
    }

    /** The child's environment variable name, from /proc/PID/environ, or null. */
    static String environ(long pid, String name) throws IOException {
        for (String kv : new String(Files.readAllBytes(Path.of("/proc/" + pid + "/environ")), StandardCharsets.UTF_8).split("\0")) {
            if (kv.startsWith(name + "=")) {
                return kv.substring(name.length() + 1);
            }
        }
        return null;
    }

    /** A segment of 3.9's constructor (the matrix compiles this suite on every line). */
    static RemoteLogSegmentMetadata segment(TopicIdPartition tp, long start, long end, Map<Integer, Long> epochs) {
        return new RemoteLogSegmentMetadata(new RemoteLogSegmentId(tp, Uuid.randomUuid()), start, end, 1000 + end, 1,
            5, 1024, Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_STARTED, epochs);
    }

    static void finish(RlmmdRemoteLogMetadataManager m, RemoteLogSegmentMetadata s) throws Exception {
        m.updateRemoteLogSegmentMetadata(new RemoteLogSegmentMetadataUpdate(s.remoteLogSegmentId(), 6, Optional.empty(),
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)).get();
    }

    /** Adds and finishes a segment, and reads it back. */
    static RemoteLogSegmentMetadata write(RlmmdRemoteLogMetadataManager m, TopicIdPartition tp, long start) throws Exception {
        RemoteLogSegmentMetadata s = segment(tp, start, start + 99, Map.of(0, start));
        m.addRemoteLogSegmentMetadata(s).get();
        finish(m, s);
        assertEquals(Optional.of(s.remoteLogSegmentId()), m.remoteLogSegmentMetadata(tp, 0, start + 50).map(x -> x.remoteLogSegmentId()));
        return s;
    }

    static long restartsInJmx(EmbeddedRlmmd e) throws Exception {
        return (Long) ManagementFactory.getPlatformMBeanServer().getAttribute(e.mbeanName(), "Restarts");
    }

    @Test
    void theDatabaseUrlAloneOverAnEmptyDatabase() throws Exception {
        String url = withSecret(pg.emptyDatabase("embedded_empty"));
        long pid;
        Path socketDir;
        try (LogCapture logs = new LogCapture()) {
            try (RlmmdRemoteLogMetadataManager m = plugin(props(url, dir("alone")))) {
                EmbeddedRlmmd e = m.embeddedRlmmd();
                pid = e.getPid();
                assertTrue(pid > 0 && alive(pid), "a child runs");
                assertFalse(cmdline(pid).contains(SECRET), "the password is not on the child's command line: " + cmdline(pid));
                assertEquals("25", environ(pid, "GOGC"), "the child's collector by default");
                assertTrue(cmdline(pid).contains(" --memory-limit 256MiB "), "the child's memory budget by default: " + cmdline(pid));
                socketDir = e.socket().getParent();
                assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(socketDir)),
                    "only the broker's user enters the socket's directory");
                TopicIdPartition tp = newTp();
                m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
                write(m, tp, 0);
                Fixture.await("isReady", () -> m.isReady(tp));
                // The child drops its binary's pages once its partitions are loaded: code
                // it ran to start stays out of its resident memory.
                assertTrue(cmdline(pid).contains(" --release-binary-pages "), cmdline(pid));
                Fixture.await("the child's release of its binary's pages after the loads",
                    () -> logs.text().contains("rlmmd: released the binary's pages\" after=\"partitions loaded\""));
                long binary = Files.size(Path.of(cmdline(pid).split(" ")[0]));
                long file = Fixture.procStatus(pid, "RssFile:");
                assertTrue(file < binary / 2, "the child's resident file pages, " + file / 1024 + " kB, are under half of its binary's "
                    + binary / 1024 + " kB");
            }
            assertFalse(alive(pid), "the child is gone once close() returned");
            assertFalse(Files.exists(socketDir), "its socket's directory is removed");
            String text = logs.text();
            assertTrue(text.contains("io.github.krabka.remotestorage.kafka.rlmmd INFO rlmmd[" + pid + "] msg=\"rlmmd: serving\""),
                "the child's lines reach the broker's log, marked as the child's:\n" + text);
            assertTrue(text.contains("the database schema is current"), "the child migrated the empty database:\n" + text);
            assertFalse(text.contains(SECRET), "no log line shows the password:\n" + text);
        }
    }

    @Test
    void bothModesAreRefused() throws Exception {
        Map<String, Object> p = props(withSecret(pg.emptyDatabase("embedded_both")), dir("both"), RlmmdConfig.TARGET, "127.0.0.1:9190");
        ConfigException e = assertThrows(ConfigException.class, () -> plugin(p));
        assertTrue(e.getMessage().contains("rlmm.config.database.url") && e.getMessage().contains("rlmm.config.rlmmd.target"), e.getMessage());
        assertFalse(e.getMessage().contains(SECRET), e.getMessage());
    }

    @Test
    void aMalformedUrlNamesTheKeyWithoutThePassword() throws Exception {
        try (LogCapture logs = new LogCapture()) {
            ConfigException e = assertThrows(ConfigException.class,
                () -> plugin(props("postgres://postgres:" + SECRET + "@127.0.0.1:notaport/db", dir("malformed"))));
            assertTrue(e.getMessage().contains("rlmm.config.database.url"), e.getMessage());
            assertTrue(e.getMessage().contains("notaport") || e.getMessage().contains("port"), "says what is wrong: " + e.getMessage());
            assertFalse(e.getMessage().contains(SECRET), e.getMessage());
            assertFalse(logs.text().contains(SECRET), logs.text());
        }
    }

    /** A host that accepts connections and never answers: configure returns, isReady is false, calls fail at once. */
    @Test
    void aHostThatNeverAnswers() throws Exception {
        List<Socket> held = new ArrayList<>();
        try (ServerSocket silent = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
             LogCapture logs = new LogCapture()) {
            Thread acceptor = new Thread(() -> {
                try {
                    while (true) {
                        held.add(silent.accept());
                    }
                } catch (IOException e) {
                    // closed
                }
            });
            acceptor.setDaemon(true);
            acceptor.start();
            String url = "postgres://postgres:" + SECRET + "@127.0.0.1:" + silent.getLocalPort() + "/db?sslmode=disable";
            try (RlmmdRemoteLogMetadataManager m = plugin(props(url, dir("silent")))) {
                TopicIdPartition tp = newTp();
                assertFalse(m.isReady(tp), "not ready while the database does not answer");
                long t0 = System.nanoTime();
                ExecutionException e = assertThrows(ExecutionException.class,
                    () -> m.addRemoteLogSegmentMetadata(segment(tp, 0, 99, Map.of(0, 0L))).get());
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                assertTrue(e.getCause() instanceof RemoteStorageException, String.valueOf(e.getCause()));
                assertTrue(e.getCause().getMessage().contains("waiting for the database"), e.getCause().getMessage());
                assertFalse(e.getCause().getMessage().contains(SECRET), e.getCause().getMessage());
                assertTrue(ms < 1000, "fails at once, not after the call deadline: " + ms + " ms");
            }
            assertFalse(logs.text().contains(SECRET), logs.text());
        } finally {
            for (Socket s : held) {
                s.close();
            }
        }
    }

    @Test
    void withoutMigrateASchemaNotCurrentIsRefused() throws Exception {
        ConfigException e = assertThrows(ConfigException.class, () -> plugin(props(pg.emptyDatabase("embedded_nomigrate"),
            dir("nomigrate"), RlmmdConfig.DATABASE_MIGRATE, "false")));
        assertTrue(e.getMessage().contains("no remotestorage schema"), e.getMessage());
    }

    @Test
    void aKilledChildComesBackAndNothingIsLost() throws Exception {
        try (RlmmdRemoteLogMetadataManager m = plugin(props(pg.database("embedded_kill"), dir("kill")))) {
            EmbeddedRlmmd e = m.embeddedRlmmd();
            TopicIdPartition tp = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            RemoteLogSegmentMetadata before = write(m, tp, 0);
            long pid = e.getPid();
            ProcessHandle.of(pid).orElseThrow().destroyForcibly();
            Fixture.await("the plugin sees the child gone", () -> !e.serving());
            assertFalse(m.isReady(tp), "not ready without a child");
            Fixture.await("a new child serves", () -> e.serving() && e.getPid() != pid);
            assertEquals(1, restartsInJmx(e), "one restart, counted in JMX");
            Fixture.await("isReady again", () -> m.isReady(tp));
            assertEquals(Optional.of(before.remoteLogSegmentId()), m.remoteLogSegmentMetadata(tp, 0, 50).map(x -> x.remoteLogSegmentId()),
                "the segment written before the kill");
            write(m, tp, 100);
        }
    }

    @Test
    void aStoppedChildIsKilledAndReplaced() throws Exception {
        try (RlmmdRemoteLogMetadataManager m = plugin(props(pg.database("embedded_stop"), dir("stop"),
            RlmmdConfig.EMBEDDED_LIVENESS_TIMEOUT_MS, "500"))) {
            EmbeddedRlmmd e = m.embeddedRlmmd();
            TopicIdPartition tp = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            RemoteLogSegmentMetadata before = write(m, tp, 0);
            long pid = e.getPid();
            Process stop = new ProcessBuilder("kill", "-STOP", String.valueOf(pid)).inheritIO().start();
            assertEquals(0, stop.waitFor());
            Fixture.await("the stopped child replaced", () -> e.serving() && e.getPid() != pid);
            assertFalse(alive(pid), "the stopped child was killed");
            assertTrue(restartsInJmx(e) >= 1);
            Fixture.await("isReady again", () -> m.isReady(tp));
            assertEquals(Optional.of(before.remoteLogSegmentId()), m.remoteLogSegmentMetadata(tp, 0, 50).map(x -> x.remoteLogSegmentId()));
            write(m, tp, 100);
        }
    }

    @Test
    void theDatabaseDownAtStart() throws Exception {
        String dsn = pg.database("embedded_down");
        pg.stop();
        RlmmdRemoteLogMetadataManager m;
        try {
            m = plugin(props(dsn, dir("down")));
            TopicIdPartition tp = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            assertFalse(m.isReady(tp), "not ready while the database is down");
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> m.addRemoteLogSegmentMetadata(segment(tp, 0, 99, Map.of(0, 0L))).get());
            assertTrue(e.getCause().getMessage().contains("waiting for the database"), e.getCause().getMessage());
        } finally {
            pg.start();
        }
        try (m) {
            TopicIdPartition tp = newTp();
            m.onPartitionLeadershipChanges(Set.of(tp), Set.of());
            Fixture.await("ready once the database answers", () -> m.isReady(tp));
            write(m, tp, 0);
        }
    }

    /** A changed or truncated unpacked copy is deleted and unpacked again; it never runs. */
    @Test
    void aDamagedCopyIsReplacedAndNeverRun() throws Exception {
        Path d = dir("damaged");
        String dsn = pg.database("embedded_damaged");
        plugin(props(dsn, d)).close();
        Path binary;
        try (Stream<Path> files = Files.list(d)) {
            binary = files.filter(f -> f.getFileName().toString().startsWith("rlmmd-")).findFirst().orElseThrow();
        }
        String digest = EmbeddedRlmmd.sha256(binary);
        Path marker = base.resolve("damaged-copy-ran");
        Files.writeString(binary, "#!/bin/sh\ntouch " + marker + "\necho rlmmd " + "\n");
        try (LogCapture logs = new LogCapture(); RlmmdRemoteLogMetadataManager m = plugin(props(dsn, d))) {
            TopicIdPartition tp = newTp();
            write(m, tp, 0);
            assertTrue(logs.text().contains("deleted, and unpacked again"), logs.text());
        }
        assertFalse(Files.exists(marker), "the changed copy ran");
        assertEquals(digest, EmbeddedRlmmd.sha256(binary), "unpacked again");
        // Truncated.
        Files.write(binary, new byte[100]);
        try (RlmmdRemoteLogMetadataManager m = plugin(props(dsn, d))) {
            write(m, newTp(), 0);
        }
        assertEquals(digest, EmbeddedRlmmd.sha256(binary));
    }

    /** What a killed broker leaves (its socket's directory, a socket file) does not block the next start, and is removed. */
    @Test
    void whatAKilledBrokerLeftDoesNotBlock() throws Exception {
        Path d = dir("stale");
        Path stale = Files.createDirectories(d.resolve("run-stale"));
        Files.writeString(stale.resolve("owner"), "999999999 1\n"); // no such process
        Files.writeString(stale.resolve("rlmmd.sock"), "");
        try (RlmmdRemoteLogMetadataManager m = plugin(props(pg.database("embedded_stale"), d))) {
            write(m, newTp(), 0);
            assertFalse(Files.exists(stale), "the stale directory is removed");
        }
    }

    @Test
    void aBinaryOfAnotherVersionIsRefused() throws Exception {
        Path fake = base.resolve("rlmmd-other-version");
        Files.writeString(fake, "#!/bin/sh\necho rlmmd 0.0.1+another\n");
        fake.toFile().setExecutable(true);
        ConfigException e = assertThrows(ConfigException.class, () -> plugin(props(pg.database("embedded_version"), dir("version"),
            RlmmdConfig.EMBEDDED_BINARY, fake.toString())));
        assertTrue(e.getMessage().contains("rlmmd 0.0.1+another") && e.getMessage().contains("refused"), e.getMessage());
    }

    /** A directory mounted noexec, and one mounted read-only: refused, naming the directory and embedded.dir (root: mount). */
    @Test
    void noexecAndReadOnlyDirectoriesAreRefused() throws Exception {
        assertEquals("root", System.getProperty("user.name"), "this test mounts filesystems: run it as root (CI does)");
        String dsn = pg.database("embedded_mounts");
        for (String options : List.of("noexec", "ro")) {
            Path d = dir("mount-" + options);
            mount(d, options);
            try {
                ConfigException e = assertThrows(ConfigException.class, () -> plugin(props(dsn, d)));
                assertTrue(e.getMessage().contains(d.toString()) && e.getMessage().contains("rlmm.config.embedded.dir"), e.getMessage());
                System.out.println(options + ": " + e.getMessage());
            } finally {
                run("umount", d.toString());
            }
        }
    }

    static void mount(Path d, String options) throws Exception {
        run("mount", "-t", "tmpfs", "-o", "size=64m," + options, "tmpfs", d.toString());
    }

    static void run(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), String.join(" ", cmd) + ": " + out);
    }

    @Test
    void eachPluginHasItsOwnChild() throws Exception {
        Path d = dir("two");
        String dsn = pg.database("embedded_two");
        try (RlmmdRemoteLogMetadataManager a = plugin(props(dsn, d));
             RlmmdRemoteLogMetadataManager b = plugin(props(dsn, d, RlmmdConfig.EMBEDDED_GC_PERCENT, "60", RlmmdConfig.EMBEDDED_MEMORY_LIMIT_MB, "0",
                 RlmmdConfig.EMBEDDED_RELEASE_BINARY_PAGES, "false"))) {
            assertNotEquals(a.embeddedRlmmd().getPid(), b.embeddedRlmmd().getPid());
            long pid = b.embeddedRlmmd().getPid();
            assertEquals("60", environ(pid, "GOGC"), "embedded.gc.percent");
            assertFalse(cmdline(pid).contains("--memory-limit"), "embedded.memory.limit.mb=0: no limit: " + cmdline(pid));
            assertFalse(cmdline(pid).contains("--release-binary-pages"), "embedded.release.binary.pages=false: " + cmdline(pid));
            TopicIdPartition tp = newTp();
            RemoteLogSegmentMetadata s = write(a, tp, 0);
            assertEquals(Optional.of(s.remoteLogSegmentId()), b.remoteLogSegmentMetadata(tp, 0, 50).map(x -> x.remoteLogSegmentId()),
                "both children share the database");
        }
    }
}
