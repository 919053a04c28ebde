package io.github.krabka.remotestorage.kafka;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * The processes the end-to-end tests run: a throwaway PostgreSQL (the Go
 * tests' own, through bin/rlmm-pgfixture) and rlmmd processes, built by
 * `make kafka-e2e` into rlmm.bin.dir.
 */
final class Fixture {
    /** One timeout for every wait; RLMM_E2E_TIMEOUT_SCALE scales it on slow machines. */
    static final Duration TIMEOUT = Duration.ofSeconds(90L
        * Long.parseLong(System.getenv().getOrDefault("RLMM_E2E_TIMEOUT_SCALE", "1")));

    static Path bin(String name) {
        Path p = Path.of(System.getProperty("rlmm.bin.dir", "../bin")).resolve(name).toAbsolutePath();
        if (!Files.isExecutable(p)) {
            throw new IllegalStateException(p + " is missing: run the tests through `make kafka-e2e`, which builds it");
        }
        return p;
    }

    /** Waits until cond holds, checking every 50 ms, failing after TIMEOUT. */
    static void await(String what, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + TIMEOUT + " waiting for " + what);
            }
            Thread.sleep(50);
        }
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /** The PostgreSQL of bin/rlmm-pgfixture. */
    static final class Postgres implements AutoCloseable {
        private final Process proc;
        private final BufferedReader out;
        private final Writer in;

        Postgres() throws IOException {
            proc = new ProcessBuilder(bin("rlmm-pgfixture").toString())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            out = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8));
            in = new OutputStreamWriter(proc.getOutputStream(), StandardCharsets.UTF_8);
            String ready = out.readLine();
            if (ready == null || !ready.startsWith("READY")) {
                throw new IOException("rlmm-pgfixture did not start: " + ready);
            }
        }

        private synchronized String command(String cmd) throws IOException {
            in.write(cmd + "\n");
            in.flush();
            String line = out.readLine();
            if (line == null || line.startsWith("ERR")) {
                throw new IOException("rlmm-pgfixture " + cmd + ": " + line);
            }
            return line;
        }

        /** A new migrated database; its DSN. */
        String database(String name) throws IOException {
            return command("db " + name).substring("DSN ".length());
        }

        void stop() throws IOException {
            command("stop");
        }

        void start() throws IOException {
            command("start");
        }

        @Override
        public void close() throws Exception {
            in.close();
            proc.waitFor(60, TimeUnit.SECONDS);
            proc.destroy();
        }
    }

    /** One rlmmd process on 127.0.0.1, or on a unix socket. */
    static final class Rlmmd implements AutoCloseable {
        final int port;
        final String dsn;
        private final Path socket; // null: TCP on port
        private Process proc;

        Rlmmd(String dsn) throws IOException {
            this(dsn, null);
        }

        Rlmmd(String dsn, Path socket) throws IOException {
            this.port = socket == null ? freePort() : 0;
            this.dsn = dsn;
            this.socket = socket;
        }

        String target() {
            return socket == null ? "127.0.0.1:" + port : "unix:" + socket;
        }

        /** Starts rlmmd and waits for its "serving" log line. */
        Rlmmd start() throws IOException, InterruptedException {
            List<String> cmd = new ArrayList<>(List.of(bin("rlmmd").toString(), "--listen", target(),
                "--metrics-listen", "", "--database-url", dsn, "--health-interval", "500ms"));
            proc = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            CompletableFuture<Void> serving = new CompletableFuture<>();
            Process p = proc;
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = r.readLine()) != null) {
                        System.err.println("[rlmmd " + target() + "] " + line);
                        if (line.contains("rlmmd: serving")) {
                            serving.complete(null);
                        }
                    }
                    serving.completeExceptionally(new IOException("rlmmd exited before serving"));
                } catch (IOException e) {
                    serving.completeExceptionally(e);
                }
            }, "rlmmd-" + target() + "-log");
            t.setDaemon(true);
            t.start();
            try {
                serving.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                throw new IOException("rlmmd on " + target() + " did not start", e);
            }
            return this;
        }

        /** SIGTERM: a graceful stop. */
        void stop() throws InterruptedException {
            if (proc != null) {
                proc.destroy();
                if (!proc.waitFor(TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                    throw new AssertionError("rlmmd on " + target() + " did not stop");
                }
                proc = null;
            }
        }

        @Override
        public void close() throws InterruptedException {
            stop();
        }
    }
}
