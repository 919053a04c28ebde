package io.github.krabka.remotestorage.kafka;

import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Range;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigException;

/**
 * The plugin's configuration. A broker passes it the properties that carry
 * {@code remote.log.metadata.manager.impl.prefix} (by default {@code rlmm.config.})
 * with the prefix removed: {@code rlmm.config.rlmmd.target} arrives as
 * {@code rlmmd.target}.
 */
public final class RlmmdConfig extends AbstractConfig {
    /** The broker's default remote.log.metadata.manager.impl.prefix, with which messages name the keys. */
    static final String PREFIX = "rlmm.config.";
    public static final String TARGET = "rlmmd.target";
    public static final String TARGET_DOC = "The rlmmd to call (the sidecar mode): host:port, or unix:/path for "
        + "its unix socket. Plaintext unless rlmmd.tls.ca.file is set. Usually the rlmmd on the broker's own "
        + "host, on loopback or a unix socket. Not with database.url. When neither is set, 127.0.0.1:9190.";
    public static final String TARGET_DEFAULT = "127.0.0.1:9190";

    public static final String DATABASE_URL = "database.url";
    public static final String DATABASE_URL_DOC = "The PostgreSQL database, as a libpq URL "
        + "(postgres://user:password@host:5432/db?sslmode=verify-full) or key/value string. Setting it runs the "
        + "embedded mode: the plugin starts rlmmd from its own jar as a child of the broker, and supervises it. "
        + "Not with rlmmd.target. Kafka's config providers work here, e.g. ${file:/etc/kafka/secrets.properties:db-url}.";

    public static final String DATABASE_MIGRATE = "database.migrate";
    public static final String DATABASE_MIGRATE_DOC = "Embedded mode: whether rlmmd migrates the database to its "
        + "schema when it starts (idempotent; brokers may race). false for a broker role that may not change the "
        + "schema: rlmmd then refuses a schema that is not current, naming its version.";

    public static final String EMBEDDED_DIR = "embedded.dir";
    public static final String EMBEDDED_DIR_DOC = "Embedded mode: the directory the plugin unpacks rlmmd into, and "
        + "where each child's unix socket lives, in a directory only the broker's user can enter. It must be "
        + "writable and allow programs to run (not mounted noexec). Default: remotestorage-rlmmd-<user> in "
        + "java.io.tmpdir.";

    public static final String EMBEDDED_BINARY = "embedded.binary";
    public static final String EMBEDDED_BINARY_DOC = "Embedded mode: run this rlmmd instead of the jar's (for a "
        + "platform the jar has no binary for). It must report the jar's version (rlmmd --version).";

    public static final String EMBEDDED_MEMORY_LIMIT_MB = "embedded.memory.limit.mb";
    public static final String EMBEDDED_MEMORY_LIMIT_MB_DOC = "Embedded mode: rlmmd's memory budget in MiB, "
        + "the Go runtime's soft limit (rlmmd --memory-limit, as GOMEMLIMIT): the garbage collector works harder "
        + "as the child nears it. 0: no limit.";
    public static final int EMBEDDED_MEMORY_LIMIT_MB_DEFAULT = 256;

    public static final String EMBEDDED_GC_PERCENT = "embedded.gc.percent";
    public static final String EMBEDDED_GC_PERCENT_DOC = "Embedded mode: rlmmd's GOGC, the heap growth the garbage "
        + "collector allows over the live heap before it runs, in percent. Lower holds less memory for more CPU; "
        + "the cache's segments hold no pointers, so a collection costs little (docs/BENCHMARKS.md, \"The embedded mode\").";
    public static final int EMBEDDED_GC_PERCENT_DEFAULT = 25;

    public static final String EMBEDDED_RELEASE_BINARY_PAGES = "embedded.release.binary.pages";
    public static final String EMBEDDED_RELEASE_BINARY_PAGES_DOC = "Embedded mode: after its start, and after each "
        + "change of the broker's partitions once they are loaded, rlmmd asks the kernel to drop the pages of its "
        + "binary that only it maps (rlmmd --release-binary-pages): code run only while it starts or loads, which "
        + "would otherwise stay in its resident memory. The calls it serves fault back the few MB they run.";

    public static final String EMBEDDED_METRICS_LISTEN = "embedded.metrics.listen";
    public static final String EMBEDDED_METRICS_LISTEN_DOC = "Embedded mode: host:port of rlmmd's Prometheus "
        + "/metrics endpoint; empty (the default) turns it off, so that several brokers on one host do not collide.";

    public static final String EMBEDDED_START_TIMEOUT_MS = "embedded.start.timeout.ms";
    public static final String EMBEDDED_START_TIMEOUT_MS_DOC = "Embedded mode: how long configure waits for the "
        + "child to serve, to fail (configure then fails with its error), or to report that it waits for the "
        + "database (configure then returns, and isReady is false until it serves).";
    public static final long EMBEDDED_START_TIMEOUT_MS_DEFAULT = 30_000L;

    public static final String EMBEDDED_LIVENESS_TIMEOUT_MS = "embedded.liveness.timeout.ms";
    public static final String EMBEDDED_LIVENESS_TIMEOUT_MS_DOC = "Embedded mode: the deadline of the once-a-second "
        + "check that the serving child answers; after two misses in a row it is killed and started again.";
    public static final long EMBEDDED_LIVENESS_TIMEOUT_MS_DEFAULT = 5_000L;

    public static final String EMBEDDED_RESTART_BACKOFF_MAX_MS = "embedded.restart.backoff.max.ms";
    public static final String EMBEDDED_RESTART_BACKOFF_MAX_MS_DOC = "Embedded mode: the longest wait before "
        + "starting a child again after it exited; the wait starts at 100 ms and doubles with each exit that comes "
        + "less than a minute after the child started serving.";
    public static final long EMBEDDED_RESTART_BACKOFF_MAX_MS_DEFAULT = 10_000L;

    public static final String CALL_TIMEOUT_MS = "rlmmd.call.timeout.ms";
    public static final String CALL_TIMEOUT_MS_DOC = "Deadline of every call but the lists, in "
        + "milliseconds. The broker waits on writes without a timeout of its own, so this bounds how "
        + "long a copy or delete task can hang on a slow or absent rlmmd.";
    public static final long CALL_TIMEOUT_MS_DEFAULT = 10_000L;

    public static final String LIST_TIMEOUT_MS = "rlmmd.list.timeout.ms";
    public static final String LIST_TIMEOUT_MS_DOC = "Deadline of a whole list (listRemoteLogSegments), "
        + "from the call until the iterator has read the last segment, in milliseconds.";
    public static final long LIST_TIMEOUT_MS_DEFAULT = 60_000L;

    public static final String TLS_CA_FILE = "rlmmd.tls.ca.file";
    public static final String TLS_CA_FILE_DOC = "PEM file of the CA that signed rlmmd's certificate. "
        + "Setting it turns TLS on.";
    public static final String TLS_CERT_FILE = "rlmmd.tls.cert.file";
    public static final String TLS_CERT_FILE_DOC = "PEM certificate the broker presents to rlmmd (mutual TLS); "
        + "needs rlmmd.tls.key.file and rlmmd.tls.ca.file.";
    public static final String TLS_KEY_FILE = "rlmmd.tls.key.file";
    public static final String TLS_KEY_FILE_DOC = "PEM PKCS#8 private key of rlmmd.tls.cert.file.";

    public static final String MIRROR_ENABLE = "tbrlmm.mirror.enable";
    public static final String MIRROR_ENABLE_DOC = "Also write every metadata change to Kafka's topic-based "
        + "manager's topic (__remote_log_metadata), as that manager writes it, so that brokers still on it see "
        + "this broker's changes: for a rolling switch between the two, and the way back. Reads that manager's "
        + "own remote.log.metadata.* settings and remote.log.metadata.manager.listener.name.";

    public static final ConfigDef CONFIG_DEF = new ConfigDef()
        .define(TARGET, Type.STRING, null, new ConfigDef.NonEmptyString(), Importance.HIGH, TARGET_DOC)
        .define(DATABASE_URL, Type.PASSWORD, null, Importance.HIGH, DATABASE_URL_DOC)
        .define(DATABASE_MIGRATE, Type.BOOLEAN, true, Importance.MEDIUM, DATABASE_MIGRATE_DOC)
        .define(EMBEDDED_DIR, Type.STRING, null, Importance.LOW, EMBEDDED_DIR_DOC)
        .define(EMBEDDED_BINARY, Type.STRING, null, Importance.LOW, EMBEDDED_BINARY_DOC)
        .define(EMBEDDED_MEMORY_LIMIT_MB, Type.INT, EMBEDDED_MEMORY_LIMIT_MB_DEFAULT, Range.atLeast(0), Importance.LOW,
            EMBEDDED_MEMORY_LIMIT_MB_DOC)
        .define(EMBEDDED_GC_PERCENT, Type.INT, EMBEDDED_GC_PERCENT_DEFAULT, Range.atLeast(1), Importance.LOW, EMBEDDED_GC_PERCENT_DOC)
        .define(EMBEDDED_RELEASE_BINARY_PAGES, Type.BOOLEAN, true, Importance.LOW, EMBEDDED_RELEASE_BINARY_PAGES_DOC)
        .define(EMBEDDED_METRICS_LISTEN, Type.STRING, "", Importance.LOW, EMBEDDED_METRICS_LISTEN_DOC)
        .define(EMBEDDED_START_TIMEOUT_MS, Type.LONG, EMBEDDED_START_TIMEOUT_MS_DEFAULT, Range.atLeast(1), Importance.LOW,
            EMBEDDED_START_TIMEOUT_MS_DOC)
        .define(EMBEDDED_LIVENESS_TIMEOUT_MS, Type.LONG, EMBEDDED_LIVENESS_TIMEOUT_MS_DEFAULT, Range.atLeast(1), Importance.LOW,
            EMBEDDED_LIVENESS_TIMEOUT_MS_DOC)
        .define(EMBEDDED_RESTART_BACKOFF_MAX_MS, Type.LONG, EMBEDDED_RESTART_BACKOFF_MAX_MS_DEFAULT, Range.atLeast(100), Importance.LOW,
            EMBEDDED_RESTART_BACKOFF_MAX_MS_DOC)
        .define(CALL_TIMEOUT_MS, Type.LONG, CALL_TIMEOUT_MS_DEFAULT, Range.atLeast(1), Importance.MEDIUM, CALL_TIMEOUT_MS_DOC)
        .define(LIST_TIMEOUT_MS, Type.LONG, LIST_TIMEOUT_MS_DEFAULT, Range.atLeast(1), Importance.LOW, LIST_TIMEOUT_MS_DOC)
        .define(TLS_CA_FILE, Type.STRING, null, Importance.MEDIUM, TLS_CA_FILE_DOC)
        .define(TLS_CERT_FILE, Type.STRING, null, Importance.MEDIUM, TLS_CERT_FILE_DOC)
        .define(TLS_KEY_FILE, Type.STRING, null, Importance.MEDIUM, TLS_KEY_FILE_DOC)
        .define(MIRROR_ENABLE, Type.BOOLEAN, false, Importance.MEDIUM, MIRROR_ENABLE_DOC);

    public RlmmdConfig(Map<String, ?> props) {
        super(CONFIG_DEF, props, false);
        if (getString(TARGET) != null && getPassword(DATABASE_URL) != null) {
            throw new ConfigException(PREFIX + DATABASE_URL + " and " + PREFIX + TARGET + " are both set: " + DATABASE_URL
                + " runs rlmmd in the broker (the embedded mode), " + TARGET + " calls an rlmmd run apart (the sidecar "
                + "mode); set one of them");
        }
        if (getPassword(DATABASE_URL) != null && getPassword(DATABASE_URL).value().isBlank()) {
            throw new ConfigException(PREFIX + DATABASE_URL + " is empty: give a libpq URL or key/value string");
        }
        if ((getString(TLS_CERT_FILE) == null) != (getString(TLS_KEY_FILE) == null)) {
            throw new ConfigException(TLS_CERT_FILE + " and " + TLS_KEY_FILE + " go together: set both or neither");
        }
        if (getString(TLS_CERT_FILE) != null && getString(TLS_CA_FILE) == null) {
            throw new ConfigException(TLS_CERT_FILE + " (mutual TLS) needs " + TLS_CA_FILE + ": TLS first");
        }
    }

    /** The embedded mode: database.url set. */
    public boolean embedded() {
        return getPassword(DATABASE_URL) != null;
    }

    /** The sidecar's target: rlmmd.target, else its default. */
    public String target() {
        String t = getString(TARGET);
        return t == null ? TARGET_DEFAULT : t;
    }

    /** The database URL of the embedded mode, with its password: never log it. */
    String databaseUrl() {
        return getPassword(DATABASE_URL).value();
    }

    public boolean migrate() {
        return getBoolean(DATABASE_MIGRATE);
    }

    public String embeddedDir() {
        return getString(EMBEDDED_DIR);
    }

    public String embeddedBinary() {
        return getString(EMBEDDED_BINARY);
    }

    public int memoryLimitMb() {
        return getInt(EMBEDDED_MEMORY_LIMIT_MB);
    }

    public int gcPercent() {
        return getInt(EMBEDDED_GC_PERCENT);
    }

    public boolean releaseBinaryPages() {
        return getBoolean(EMBEDDED_RELEASE_BINARY_PAGES);
    }

    public String metricsListen() {
        return getString(EMBEDDED_METRICS_LISTEN);
    }

    public long startTimeoutMs() {
        return getLong(EMBEDDED_START_TIMEOUT_MS);
    }

    public long livenessTimeoutMs() {
        return getLong(EMBEDDED_LIVENESS_TIMEOUT_MS);
    }

    public long restartBackoffMaxMs() {
        return getLong(EMBEDDED_RESTART_BACKOFF_MAX_MS);
    }

    public long callTimeoutMs() {
        return getLong(CALL_TIMEOUT_MS);
    }

    public long listTimeoutMs() {
        return getLong(LIST_TIMEOUT_MS);
    }

    public String tlsCaFile() {
        return getString(TLS_CA_FILE);
    }

    public String tlsCertFile() {
        return getString(TLS_CERT_FILE);
    }

    public String tlsKeyFile() {
        return getString(TLS_KEY_FILE);
    }

    public boolean mirrorEnabled() {
        return getBoolean(MIRROR_ENABLE);
    }
}
