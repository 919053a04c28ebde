package io.github.krabka.remotestorage.kafka;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.StandardMBean;
import org.apache.kafka.common.config.ConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The embedded mode's rlmmd: a child process of the broker, run from a
 * binary the jar carries, listening on a unix socket only the broker's user
 * can reach, and supervised.
 *
 * <p><b>The binary.</b> The jar holds rlmmd for linux-amd64 and linux-arm64
 * with the SHA-256 digest of each and the version both report. The one for
 * this platform is unpacked into {@link RlmmdConfig#EMBEDDED_DIR} under a
 * name made of its version and digest: written to a temporary file, checked,
 * then renamed into place, so that brokers sharing the directory, and a
 * broker restarting while an older copy runs, never see a partial file. Its
 * digest is checked again before every start; a copy that does not match is
 * deleted and unpacked again, never run. {@code rlmmd --version} must name
 * the jar's version.
 *
 * <p><b>The child.</b> It gets the database URL through its environment
 * (DATABASE_URL), never its command line, and its standard input is a pipe
 * from the broker that nothing writes to: however the broker's JVM ends,
 * SIGKILL included, the kernel closes that pipe and the child, started with
 * {@code --stop-on-stdin-eof}, stops within about two seconds. Its log lines
 * reach the broker's log through slf4j, under the logger
 * {@code io.github.krabka.remotestorage.kafka.rlmmd}, each starting with
 * {@code rlmmd[pid]}. Each child's socket is in a directory of its own
 * (mode 700) with a record of the broker's process; a start removes the
 * directories of brokers no longer running, and stops a child of theirs
 * still running.
 *
 * <p><b>Supervision.</b> A child that exits, or that fails two liveness
 * checks in a row while serving, is killed and started again after a
 * backoff that starts at 100 ms and doubles up to
 * {@link RlmmdConfig#EMBEDDED_RESTART_BACKOFF_MAX_MS}, and starts over once
 * a child has served a minute. Meanwhile {@link #requireServing} fails at
 * once with the child's state; the restarts are counted in JMX
 * ({@link EmbeddedRlmmdMXBean}) and logged.
 */
final class EmbeddedRlmmd implements AutoCloseable, EmbeddedRlmmdMXBean {
    private static final Logger log = LoggerFactory.getLogger(EmbeddedRlmmd.class);
    /** The child's own lines. */
    private static final Logger childLog = LoggerFactory.getLogger("io.github.krabka.remotestorage.kafka.rlmmd");

    static final String RESOURCES = "/io/github/krabka/remotestorage/kafka/rlmmd/";
    static final List<String> PLATFORMS = List.of("linux-amd64", "linux-arm64");
    /** A unix socket's path is at most 107 bytes on Linux (sun_path). */
    static final int MAX_SOCKET_PATH = 107;
    static final long INITIAL_BACKOFF_MS = 100;
    /** A child that served this long resets the backoff. */
    static final long STABLE_MS = 60_000;
    static final long LIVENESS_INTERVAL_MS = 1_000;
    /** How long close waits for the child to stop after its standard input closed, then after SIGTERM. */
    static final long STOP_WAIT_MS = 5_000;

    enum State { STARTING, WAITING_FOR_DATABASE, SERVING, EXITED, UNRESPONSIVE, CLOSED }

    private final RlmmdConfig cfg;
    private final String version;
    private final Path binary;
    private final String expectedDigest; // null: cfg's embedded.binary, run as it is
    private final String platform;
    private final Path dir;
    private final Path runDir;
    private final Path socket;
    private final String brokerId;

    private final Object lock = new Object();
    private volatile State state = State.STARTING;
    private volatile String lastProblem = "";
    private volatile String exitDescription = "";
    private volatile long servingSinceNanos;
    private volatile long restartAtNanos;
    private final AtomicLong restarts = new AtomicLong();
    private Process process; // guarded by lock
    private volatile Thread reader; // the current child's log forwarder
    private boolean closed; // guarded by lock
    private Thread supervisor;
    private volatile BooleanSupplier liveness = () -> true;
    private volatile Runnable onServing = () -> { };
    private ObjectName mbean;
    /** The first child's outcome: serving, or waiting for the database; failed when it exits first. */
    private final CompletableFuture<State> firstOutcome = new CompletableFuture<>();

    private EmbeddedRlmmd(RlmmdConfig cfg, String version, Path binary, String expectedDigest, String platform, Path dir,
                          Path runDir, String brokerId) {
        this.cfg = cfg;
        this.version = version;
        this.binary = binary;
        this.expectedDigest = expectedDigest;
        this.platform = platform;
        this.dir = dir;
        this.runDir = runDir;
        this.socket = runDir.resolve("rlmmd.sock");
        this.brokerId = brokerId;
    }

    /**
     * Unpacks and checks the binary, starts the first child and waits up to
     * {@link RlmmdConfig#EMBEDDED_START_TIMEOUT_MS} for it to serve or to
     * report that it waits for the database.
     *
     * @throws ConfigException naming the key and what is wrong: no binary for
     *     this platform, a directory that is not writable or does not let
     *     programs run, a binary of another version, or a first child that
     *     exited (a malformed database URL, a schema that is not current, a
     *     refused login), with its error
     */
    static EmbeddedRlmmd start(RlmmdConfig cfg, String brokerId) {
        String version = resource("VERSION").map(String::trim).orElseThrow(() -> new ConfigException(
            "remotestorage: this jar carries no rlmmd for the embedded mode (built without it); build it with `make kafka`, "
                + "or run rlmmd beside the broker and set " + RlmmdConfig.PREFIX + RlmmdConfig.TARGET + " (the sidecar mode)"));
        Path dir = directory(cfg);
        Path binary;
        String digest = null;
        String platform = null;
        if (cfg.embeddedBinary() != null) {
            binary = Path.of(cfg.embeddedBinary()).toAbsolutePath();
        } else {
            String p = requirePlatform(System.getProperty("os.name"), System.getProperty("os.arch"), version);
            platform = p;
            digest = resource(p + "/rlmmd.sha256").map(String::trim).orElseThrow(() -> new ConfigException(
                "remotestorage: the jar has no digest of its rlmmd for " + p));
            binary = unpack(dir, platform, version, digest);
        }
        checkVersion(binary, version, dir, cfg.embeddedBinary() != null);
        sweep(dir);
        Path runDir = runDirectory(dir);
        EmbeddedRlmmd e = new EmbeddedRlmmd(cfg, version, binary, digest, platform, dir, runDir, brokerId);
        e.registerMBean();
        e.startSupervisor();
        try {
            State s = e.firstOutcome.get(cfg.startTimeoutMs(), TimeUnit.MILLISECONDS);
            if (s == State.WAITING_FOR_DATABASE) {
                log.warn("remotestorage: the embedded rlmmd waits for the database; tiered storage is paused until it serves: {}",
                    e.lastProblem);
            }
        } catch (TimeoutException te) {
            log.warn("remotestorage: the embedded rlmmd does not serve yet after {} ms ({}); tiered storage is paused until it does",
                cfg.startTimeoutMs(), RlmmdConfig.PREFIX + RlmmdConfig.EMBEDDED_START_TIMEOUT_MS);
        } catch (ExecutionException ee) {
            e.close();
            Throwable c = ee.getCause();
            throw c instanceof ConfigException ce ? ce : new ConfigException("remotestorage: the embedded rlmmd: " + c.getMessage());
        } catch (InterruptedException ie) {
            e.close();
            Thread.currentThread().interrupt();
            throw new ConfigException("remotestorage: interrupted while the embedded rlmmd started");
        }
        return e;
    }

    /** The gRPC target of the child: its unix socket. */
    String target() {
        return "unix:" + socket;
    }

    Path socket() {
        return socket;
    }

    /** The liveness check the supervisor runs once a second while the child serves: true when it answered. */
    void liveness(BooleanSupplier check) {
        this.liveness = check;
    }

    /** Runs each time a child starts serving (the first, and each one started again). */
    void onServing(Runnable r) {
        this.onServing = r;
    }

    boolean serving() {
        return state == State.SERVING;
    }

    /** Fails at once, with the child's state, unless a child serves. */
    void requireServing() {
        if (state != State.SERVING) {
            throw new StatusRuntimeException(Status.UNAVAILABLE.withDescription(getDescription()));
        }
    }

    @Override
    public long getRestarts() {
        return restarts.get();
    }

    @Override
    public String getState() {
        return state.name();
    }

    @Override
    public long getPid() {
        synchronized (lock) {
            return process != null && process.isAlive() ? process.pid() : -1;
        }
    }

    @Override
    public String getDescription() {
        long pid = getPid();
        String who = "the embedded rlmmd" + (pid > 0 ? " (pid " + pid + ")" : "");
        String problem = lastProblem.isEmpty() ? "" : "; its last warning: " + lastProblem;
        return switch (state) {
            case STARTING -> who + " is starting" + problem;
            case WAITING_FOR_DATABASE -> who + " is waiting for the database" + problem;
            case SERVING -> who + " is serving";
            case EXITED -> who + " " + exitDescription + "; started again in "
                + Math.max(0, TimeUnit.NANOSECONDS.toMillis(restartAtNanos - System.nanoTime())) + " ms (restart "
                + (restarts.get() + 1) + ")" + problem;
            case UNRESPONSIVE -> who + " stopped answering (two liveness checks of "
                + cfg.livenessTimeoutMs() + " ms missed); killed, to be started again";
            case CLOSED -> who + " is closed";
        };
    }

    // ---- the binary ----

    /** The jar's platform name for a JVM's os.name and os.arch; null when the jar has no binary for it. */
    static String platform(String osName, String osArch) {
        if (osName == null || osArch == null || !osName.toLowerCase(Locale.ROOT).startsWith("linux")) {
            return null;
        }
        return switch (osArch.toLowerCase(Locale.ROOT)) {
            case "amd64", "x86_64" -> "linux-amd64";
            case "aarch64", "arm64" -> "linux-arm64";
            default -> null;
        };
    }

    /** The jar's platform name for this JVM; refused, naming the platform and the sidecar mode, when it has no binary. */
    static String requirePlatform(String osName, String osArch, String version) {
        String platform = platform(osName, osArch);
        if (platform == null) {
            throw new ConfigException("remotestorage: the jar carries rlmmd for " + String.join(" and ", PLATFORMS)
                + ", not for this platform (os.name " + osName + ", os.arch " + osArch + "): run rlmmd beside the broker and set "
                + RlmmdConfig.PREFIX + RlmmdConfig.TARGET + " instead of " + RlmmdConfig.PREFIX + RlmmdConfig.DATABASE_URL
                + " (the sidecar mode, docs/KAFKA.md), or set " + RlmmdConfig.PREFIX + RlmmdConfig.EMBEDDED_BINARY
                + " to an rlmmd " + version + " built for it");
        }
        return platform;
    }

    private static Optional<String> resource(String name) {
        try (InputStream in = EmbeddedRlmmd.class.getResourceAsStream(RESOURCES + name)) {
            return in == null ? Optional.empty() : Optional.of(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new ConfigException("remotestorage: reading " + RESOURCES + name + " from the jar: " + e);
        }
    }

    private static final Set<PosixFilePermission> OWNER_ONLY_DIR = PosixFilePermissions.fromString("rwx------");

    /** The unpack directory, created (mode 700) when missing; refused when not writable. */
    static Path directory(RlmmdConfig cfg) {
        Path dir = cfg.embeddedDir() != null ? Path.of(cfg.embeddedDir())
            : Path.of(System.getProperty("java.io.tmpdir"), "remotestorage-rlmmd-" + System.getProperty("user.name"));
        dir = dir.toAbsolutePath();
        try {
            if (!Files.isDirectory(dir)) {
                Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(OWNER_ONLY_DIR));
            }
            if (cfg.embeddedDir() == null) {
                // In a shared temporary directory: it must be the broker's user's own.
                String owner = Files.getOwner(dir).getName();
                if (!owner.equals(System.getProperty("user.name"))) {
                    throw notUsable(dir, "it belongs to " + owner + ", not to the broker's user " + System.getProperty("user.name"));
                }
                Files.setPosixFilePermissions(dir, OWNER_ONLY_DIR);
            }
            Path probe = Files.createTempFile(dir, ".write-check-", "");
            Files.delete(probe);
        } catch (IOException | UnsupportedOperationException e) {
            throw notUsable(dir, "it is not a directory the broker can write (" + e + ")");
        }
        return dir;
    }

    static ConfigException notUsable(Path dir, String why) {
        return new ConfigException("remotestorage: the embedded mode's directory " + dir + " cannot be used: " + why
            + "; set " + RlmmdConfig.PREFIX + RlmmdConfig.EMBEDDED_DIR + " to a directory the broker's user can write "
            + "and run programs from");
    }

    /** The unpacked binary of the platform, unpacking it unless a copy with the right digest is there. */
    static Path unpack(Path dir, String platform, String version, String digest) {
        Path target = dir.resolve("rlmmd-" + version + "-" + platform + "-" + digest.substring(0, 12));
        try {
            if (Files.exists(target)) {
                String got = sha256(target);
                if (got.equals(digest) && Files.isExecutable(target)) {
                    return target;
                }
                log.warn("remotestorage: the unpacked rlmmd {} has digest {}, not the jar's {}: deleted, and unpacked again", target, got, digest);
                Files.deleteIfExists(target);
            }
            Path tmp = Files.createTempFile(dir, ".rlmmd-", ".part", PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            try {
                try (InputStream in = EmbeddedRlmmd.class.getResourceAsStream(RESOURCES + platform + "/rlmmd");
                     FileChannel out = FileChannel.open(tmp, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                    if (in == null) {
                        throw new ConfigException("remotestorage: the jar has no rlmmd for " + platform);
                    }
                    try (OutputStream os = java.nio.channels.Channels.newOutputStream(out)) {
                        in.transferTo(os);
                        out.force(true);
                    }
                }
                String got = sha256(tmp);
                if (!got.equals(digest)) {
                    throw new ConfigException("remotestorage: the rlmmd unpacked from the jar into " + tmp + " has digest " + got
                        + ", not " + digest + ": the jar is damaged");
                }
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                log.info("remotestorage: unpacked rlmmd {} for {} into {}", version, platform, target);
            } finally {
                Files.deleteIfExists(tmp);
            }
            return target;
        } catch (IOException e) {
            throw notUsable(dir, "unpacking rlmmd there failed (" + e + ")");
        }
    }

    static String sha256(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[1 << 16];
            for (int n; (n = in.read(buf)) > 0; ) {
                md.update(buf, 0, n);
            }
            return HexFormat.of().formatHex(md.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Runs {@code binary --version}: it must print the jar's version. A directory mounted noexec fails here. */
    static void checkVersion(Path binary, String version, Path dir, boolean configured) {
        Process p;
        try {
            p = new ProcessBuilder(binary.toString(), "--version").redirectErrorStream(true).start();
        } catch (IOException e) {
            if (configured) {
                throw new ConfigException(RlmmdConfig.PREFIX + RlmmdConfig.EMBEDDED_BINARY + " " + binary + ": cannot run it: " + e.getMessage());
            }
            throw notUsable(dir, "programs cannot run from it (mounted noexec?): " + e.getMessage());
        }
        String out;
        try {
            p.getOutputStream().close();
            out = new String(p.getInputStream().readNBytes(4096), StandardCharsets.UTF_8).trim();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new ConfigException("remotestorage: " + binary + " --version did not answer within 30 s");
            }
        } catch (IOException e) {
            throw new ConfigException("remotestorage: " + binary + " --version: " + e);
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new ConfigException("remotestorage: interrupted while running " + binary + " --version");
        }
        if (!out.equals("rlmmd " + version)) {
            throw new ConfigException("remotestorage: " + binary + " reports \"" + out + "\", not rlmmd " + version
                + ", this jar's version: refused" + (configured ? " (" + RlmmdConfig.PREFIX + RlmmdConfig.EMBEDDED_BINARY + ")" : ""));
        }
    }

    // ---- the run directories ----

    /** A new directory (mode 700) for one plugin instance's socket, with the record of its broker's process. */
    static Path runDirectory(Path dir) {
        try {
            Path run = Files.createTempDirectory(dir, "run-", PosixFilePermissions.asFileAttribute(OWNER_ONLY_DIR));
            if (run.resolve("rlmmd.sock").toString().getBytes(StandardCharsets.UTF_8).length > MAX_SOCKET_PATH) {
                Files.delete(run);
                throw notUsable(dir, "its path is too long for a unix socket in it (at most " + MAX_SOCKET_PATH + " bytes with "
                    + run.getFileName() + "/rlmmd.sock)");
            }
            ProcessHandle self = ProcessHandle.current();
            Files.writeString(run.resolve("owner"), self.pid() + " " + startMillis(self) + "\n");
            return run;
        } catch (IOException e) {
            throw notUsable(dir, "creating a directory for the child's socket failed (" + e + ")");
        }
    }

    private static long startMillis(ProcessHandle p) {
        return p.info().startInstant().map(java.time.Instant::toEpochMilli).orElse(0L);
    }

    /**
     * Removes the run directories whose broker process is gone (killed,
     * most likely), after stopping a child of theirs still running: their
     * sockets then never block, nor confuse, a later start.
     */
    static void sweep(Path dir) {
        try (DirectoryStream<Path> runs = Files.newDirectoryStream(dir, "run-*")) {
            for (Path run : runs) {
                if (ownerAlive(run)) {
                    continue;
                }
                Optional<ProcessHandle> child = record(run.resolve("child")).flatMap(r -> ProcessHandle.of(r[0])
                    .filter(h -> startMillis(h) == r[1]));
                if (child.isPresent()) {
                    log.warn("remotestorage: the embedded rlmmd (pid {}) of a broker no longer running is still running: killed",
                        child.get().pid());
                    child.get().destroyForcibly();
                    child.get().onExit().get(STOP_WAIT_MS, TimeUnit.MILLISECONDS);
                }
                deleteTree(run);
                log.info("remotestorage: removed {}, left by a broker no longer running", run);
            }
        } catch (IOException | ExecutionException | TimeoutException e) {
            log.warn("remotestorage: cleaning {} of what stopped brokers left: {}", dir, e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static boolean ownerAlive(Path run) {
        Optional<long[]> owner = record(run.resolve("owner"));
        if (owner.isEmpty()) {
            // Being created right now, or unreadable: leave it unless it is old.
            try {
                return Files.getLastModifiedTime(run).toMillis() > System.currentTimeMillis() - Duration.ofMinutes(1).toMillis();
            } catch (IOException e) {
                return false;
            }
        }
        long[] o = owner.get();
        return ProcessHandle.of(o[0]).filter(h -> startMillis(h) == o[1]).isPresent();
    }

    /** A "pid startMillis" record. */
    private static Optional<long[]> record(Path file) {
        try {
            String[] f = Files.readString(file).trim().split(" ");
            return Optional.of(new long[] {Long.parseLong(f[0]), Long.parseLong(f[1])});
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    private static void deleteTree(Path p) throws IOException {
        try (Stream<Path> all = Files.walk(p)) {
            for (Path q : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        } catch (NoSuchFileException e) {
            // gone already
        }
    }

    // ---- the child ----

    private void startSupervisor() {
        Thread t = new Thread(this::supervise, "rlmmd-embedded-supervisor-" + brokerId);
        t.setDaemon(true);
        supervisor = t;
        t.start();
    }

    private void supervise() {
        long backoff = INITIAL_BACKOFF_MS;
        while (true) {
            Process p;
            try {
                p = launch();
            } catch (IOException | RuntimeException e) {
                if (isClosed()) {
                    return;
                }
                exitDescription = "could not be started: " + e.getMessage();
                if (!firstOutcome.isDone()) {
                    firstOutcome.completeExceptionally(new ConfigException("remotestorage: the embedded rlmmd " + binary
                        + " could not be started: " + e.getMessage()));
                    return;
                }
                log.warn("remotestorage: the embedded rlmmd could not be started: {}", e.toString());
                p = null;
            }
            if (p == null && isClosed()) {
                return;
            }
            if (p != null) {
                watch(p);
                if (isClosed()) {
                    return;
                }
                awaitOutput();
                exitDescription = "exited with code " + p.exitValue();
                if (!firstOutcome.isDone()) {
                    // The first child died before serving or waiting for the
                    // database: a mistake in the configuration, reported by configure.
                    firstOutcome.completeExceptionally(new ConfigException(RlmmdConfig.PREFIX + RlmmdConfig.DATABASE_URL
                        + ": the embedded rlmmd exited with code " + p.exitValue() + " before serving: "
                        + (lastProblem.isEmpty() ? "(no message)" : lastProblem)));
                    return;
                }
                if (servingSinceNanos != 0 && System.nanoTime() - servingSinceNanos > TimeUnit.MILLISECONDS.toNanos(STABLE_MS)) {
                    backoff = INITIAL_BACKOFF_MS;
                }
            }
            restartAtNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(backoff);
            if (state != State.UNRESPONSIVE) {
                state = State.EXITED;
            }
            log.warn("remotestorage: {}", getDescription());
            if (!sleep(backoff)) {
                return;
            }
            restarts.incrementAndGet();
            backoff = Math.min(2 * backoff, cfg.restartBackoffMaxMs());
        }
    }

    /** Waits a little for the exited child's last lines to be read: its error is in them. */
    private void awaitOutput() {
        Thread r = reader;
        if (r != null) {
            try {
                r.join(STOP_WAIT_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Sleeps unless closed first; false when closed. */
    private boolean sleep(long ms) {
        synchronized (lock) {
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
            while (!closed) {
                long left = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime());
                if (left <= 0) {
                    return true;
                }
                try {
                    lock.wait(left);
                } catch (InterruptedException e) {
                    return false;
                }
            }
            return false;
        }
    }

    private boolean isClosed() {
        synchronized (lock) {
            return closed;
        }
    }

    /** Starts a child, unless closed; null when closed. */
    private Process launch() throws IOException {
        if (expectedDigest != null) {
            String got = sha256(binary);
            if (!got.equals(expectedDigest)) {
                log.warn("remotestorage: the unpacked rlmmd {} has digest {}, not the jar's {}: deleted, and unpacked again",
                    binary, got, expectedDigest);
                Files.deleteIfExists(binary);
                unpack(dir, platform, version, expectedDigest);
            }
        }
        List<String> cmd = new ArrayList<>(List.of(binary.toString(), "--listen", target(),
            "--metrics-listen", cfg.metricsListen(), "--stop-on-stdin-eof", "--shutdown-timeout", "2s"));
        if (cfg.migrate()) {
            cmd.add("--migrate");
        }
        if (cfg.releaseBinaryPages()) {
            cmd.add("--release-binary-pages");
        }
        if (cfg.memoryLimitMb() > 0) {
            cmd.add("--memory-limit");
            cmd.add(cfg.memoryLimitMb() + "MiB");
        }
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        Map<String, String> env = pb.environment();
        env.keySet().removeIf(k -> k.startsWith("RLMMD_") || k.equals("GOMEMLIMIT"));
        env.put("DATABASE_URL", cfg.databaseUrl());
        env.put("GOGC", String.valueOf(cfg.gcPercent()));
        synchronized (lock) {
            if (closed) {
                return null;
            }
            state = State.STARTING;
            lastProblem = "";
            servingSinceNanos = 0;
            Process p = pb.start();
            process = p;
            Files.writeString(runDir.resolve("child"), p.pid() + " " + startMillis(p.toHandle()) + "\n");
            Thread reader = new Thread(() -> forwardLog(p), "rlmmd-embedded-log-" + brokerId + "-" + p.pid());
            reader.setDaemon(true);
            reader.start();
            this.reader = reader;
            log.info("remotestorage: started the embedded rlmmd {} (pid {}) on {}", version, p.pid(), target());
            return p;
        }
    }

    /** Waits until p exits, killing it when it stops answering while it serves. */
    private void watch(Process p) {
        int missed = 0;
        while (true) {
            try {
                if (p.waitFor(LIVENESS_INTERVAL_MS, TimeUnit.MILLISECONDS)) {
                    return;
                }
            } catch (InterruptedException e) {
                return;
            }
            if (isClosed()) {
                return;
            }
            if (state != State.SERVING) {
                continue;
            }
            missed = liveness.getAsBoolean() ? 0 : missed + 1;
            if (missed >= 2 && p.isAlive() && state == State.SERVING) {
                state = State.UNRESPONSIVE;
                log.warn("remotestorage: the embedded rlmmd (pid {}) missed two liveness checks of {} ms: killing it", p.pid(),
                    cfg.livenessTimeoutMs());
                p.destroyForcibly();
            }
        }
    }

    /** slog's text format: time=… level=LEVEL msg=… */
    private static final Pattern SLOG = Pattern.compile("^time=\\S+ level=(\\w+) (.*)$");
    /** A password in a URL (user:password@) or a key/value string (password=…), in case a line carries one. */
    private static final Pattern PASSWORD = Pattern.compile("(://[^:/@\\s]*:)[^@\\s]*@|(password\\s*=\\s*)('[^']*'|\\S+)",
        Pattern.CASE_INSENSITIVE);

    static String scrub(String line) {
        Matcher m = PASSWORD.matcher(line);
        StringBuilder b = new StringBuilder();
        while (m.find()) {
            m.appendReplacement(b, Matcher.quoteReplacement(m.group(1) != null ? m.group(1) + "xxxxx@" : m.group(2) + "xxxxx"));
        }
        m.appendTail(b);
        return b.toString();
    }

    /** The child's lines into the broker's log, each marked with its pid; they also move the state. */
    private void forwardLog(Process p) {
        String tag = "rlmmd[" + p.pid() + "]";
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            for (String raw; (raw = r.readLine()) != null; ) {
                String line = scrub(raw);
                Matcher m = SLOG.matcher(line);
                String level = m.matches() ? m.group(1) : "INFO";
                String text = m.matches() ? m.group(2) : line;
                switch (level) {
                    case "ERROR" -> childLog.error("{} {}", tag, text);
                    case "WARN" -> childLog.warn("{} {}", tag, text);
                    case "DEBUG" -> childLog.debug("{} {}", tag, text);
                    default -> childLog.info("{} {}", tag, text);
                }
                if (level.equals("ERROR") || level.equals("WARN") || !m.matches()) {
                    lastProblem = text;
                }
                if (text.startsWith("msg=\"rlmmd: serving\"")) {
                    servingSinceNanos = System.nanoTime();
                    state = State.SERVING;
                    try {
                        onServing.run();
                    } catch (RuntimeException e) {
                        log.warn("remotestorage: after the embedded rlmmd started serving: {}", e.toString());
                    }
                    firstOutcome.complete(State.SERVING);
                } else if (text.contains("the database does not answer yet") && state == State.STARTING) {
                    state = State.WAITING_FOR_DATABASE;
                    firstOutcome.complete(State.WAITING_FOR_DATABASE);
                }
            }
        } catch (IOException e) {
            // the child's output ended with it
        }
    }

    // ---- JMX ----

    private void registerMBean() {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        String base = "io.github.krabka.remotestorage:type=EmbeddedRlmmd,broker=" + ObjectName.quote(brokerId);
        for (int i = 0; mbean == null && i < 100; i++) {
            try {
                ObjectName name = new ObjectName(i == 0 ? base : base + ",instance=" + i);
                server.registerMBean(new StandardMBean(this, EmbeddedRlmmdMXBean.class, true), name);
                mbean = name;
            } catch (javax.management.InstanceAlreadyExistsException e) {
                // another instance of the plugin for the same broker id: the next name
            } catch (JMException e) {
                log.warn("remotestorage: the embedded rlmmd's JMX bean could not be registered: {}", e.toString());
                return;
            }
        }
    }

    ObjectName mbeanName() {
        return mbean;
    }

    // ---- close ----

    /**
     * Stops the child: closes its standard input (it stops gracefully within
     * about two seconds), then SIGTERM, then SIGKILL, each after
     * {@link #STOP_WAIT_MS}; then removes its socket's directory.
     */
    @Override
    public void close() {
        Process p;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            lock.notifyAll();
            p = process;
        }
        state = State.CLOSED;
        if (supervisor != null) {
            supervisor.interrupt();
        }
        if (p != null) {
            stop(p);
        }
        try {
            if (supervisor != null && supervisor != Thread.currentThread()) {
                supervisor.join(STOP_WAIT_MS);
            }
            Thread r = reader;
            if (r != null) {
                r.join(STOP_WAIT_MS); // ends with the child's output
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            deleteTree(runDir);
        } catch (IOException e) {
            log.warn("remotestorage: removing {}: {}", runDir, e.toString());
        }
        if (mbean != null) {
            try {
                ManagementFactory.getPlatformMBeanServer().unregisterMBean(mbean);
            } catch (JMException e) {
                // gone already
            }
        }
    }

    private static void stop(Process p) {
        try {
            try {
                p.getOutputStream().close();
            } catch (IOException e) {
                // closed already
            }
            if (!p.waitFor(STOP_WAIT_MS, TimeUnit.MILLISECONDS)) {
                log.warn("remotestorage: the embedded rlmmd (pid {}) did not stop within {} ms of its input closing: SIGTERM", p.pid(), STOP_WAIT_MS);
                p.destroy();
                if (!p.waitFor(STOP_WAIT_MS, TimeUnit.MILLISECONDS)) {
                    p.destroyForcibly();
                    p.waitFor(STOP_WAIT_MS, TimeUnit.MILLISECONDS);
                }
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
