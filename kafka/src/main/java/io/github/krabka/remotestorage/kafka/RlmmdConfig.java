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
    public static final String TARGET = "rlmmd.target";
    public static final String TARGET_DOC = "The rlmmd to call: host:port, or unix:/path for its unix "
        + "socket. Plaintext unless rlmmd.tls.ca.file is set. Usually the rlmmd on the broker's own "
        + "host, on loopback or a unix socket.";
    public static final String TARGET_DEFAULT = "127.0.0.1:9190";

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
        .define(TARGET, Type.STRING, TARGET_DEFAULT, new ConfigDef.NonEmptyString(), Importance.HIGH, TARGET_DOC)
        .define(CALL_TIMEOUT_MS, Type.LONG, CALL_TIMEOUT_MS_DEFAULT, Range.atLeast(1), Importance.MEDIUM, CALL_TIMEOUT_MS_DOC)
        .define(LIST_TIMEOUT_MS, Type.LONG, LIST_TIMEOUT_MS_DEFAULT, Range.atLeast(1), Importance.LOW, LIST_TIMEOUT_MS_DOC)
        .define(TLS_CA_FILE, Type.STRING, null, Importance.MEDIUM, TLS_CA_FILE_DOC)
        .define(TLS_CERT_FILE, Type.STRING, null, Importance.MEDIUM, TLS_CERT_FILE_DOC)
        .define(TLS_KEY_FILE, Type.STRING, null, Importance.MEDIUM, TLS_KEY_FILE_DOC)
        .define(MIRROR_ENABLE, Type.BOOLEAN, false, Importance.MEDIUM, MIRROR_ENABLE_DOC);

    public RlmmdConfig(Map<String, ?> props) {
        super(CONFIG_DEF, props, false);
        if ((getString(TLS_CERT_FILE) == null) != (getString(TLS_KEY_FILE) == null)) {
            throw new ConfigException(TLS_CERT_FILE + " and " + TLS_KEY_FILE + " go together: set both or neither");
        }
        if (getString(TLS_CERT_FILE) != null && getString(TLS_CA_FILE) == null) {
            throw new ConfigException(TLS_CERT_FILE + " (mutual TLS) needs " + TLS_CA_FILE + ": TLS first");
        }
    }

    public String target() {
        return getString(TARGET);
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
