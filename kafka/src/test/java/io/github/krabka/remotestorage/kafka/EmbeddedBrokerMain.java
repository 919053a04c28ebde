package io.github.krabka.remotestorage.kafka;

import java.nio.file.Path;
import java.util.Map;

/**
 * One Kafka broker (a combined node) with the plugin in the embedded mode,
 * in a JVM of its own, for EmbeddedBrokerIT to kill: it prints
 * {@code CHILD <pid>} (its rlmmd's process id) once the broker is ready,
 * then runs until it is killed; SIGTERM shuts the broker down in order.
 *
 * <pre>EmbeddedBrokerMain DATABASE_URL EMBEDDED_DIR REMOTE_DIR</pre>
 */
public final class EmbeddedBrokerMain {
    private EmbeddedBrokerMain() {
    }

    /** The broker properties: tiered storage, and the plugin given the database and nothing else of its own but where to unpack. */
    static Map<String, String> config(String databaseUrl, Path embeddedDir, Path remoteDir) {
        Map<String, String> config = TieredBrokers.fastTiering(remoteDir);
        config.put("remote.log.metadata.manager.class.name", RlmmdRemoteLogMetadataManager.class.getName());
        config.put("remote.log.metadata.manager.class.path", TieredBrokers.pluginJar().toString());
        config.put("rlmm.config." + RlmmdConfig.DATABASE_URL, databaseUrl);
        if (embeddedDir != null) {
            config.put("rlmm.config." + RlmmdConfig.EMBEDDED_DIR, embeddedDir.toString());
        }
        config.put("offsets.topic.replication.factor", "1");
        config.put("offsets.topic.num.partitions", "1");
        return config;
    }

    public static void main(String[] args) throws Exception {
        KitCluster cluster = KitCluster.start(false, 1, 1, Map.of(), config(args[0], Path.of(args[1]), Path.of(args[2])));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                cluster.close();
                System.out.println("CLOSED");
            } catch (Exception e) {
                e.printStackTrace();
            }
        }));
        System.out.println("CHILD " + TieredBrokers.childPid(0));
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
