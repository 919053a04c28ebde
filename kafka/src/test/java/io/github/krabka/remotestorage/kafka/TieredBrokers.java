package io.github.krabka.remotestorage.kafka;

import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.Uuid;

/**
 * The settings the end-to-end suites give in-process brokers so that tiered
 * storage takes seconds a step, and one rlmmd per broker.
 */
final class TieredBrokers {
    private TieredBrokers() {
    }

    /**
     * Broker properties: tiered storage on, LocalDirRemoteStorageManager in
     * `remoteDir`, the remote log tasks and retention checks every 300 ms.
     */
    static Map<String, String> fastTiering(Path remoteDir) {
        Map<String, String> config = new HashMap<>();
        config.put("remote.log.storage.system.enable", "true");
        config.put("remote.log.storage.manager.class.name", LocalDirRemoteStorageManager.class.getName());
        config.put("rsm.config.dir", remoteDir.toString());
        config.put("remote.log.manager.task.interval.ms", "300");
        config.put("log.retention.check.interval.ms", "300");
        config.put("log.initial.task.delay.ms", "100");
        config.put("remote.log.manager.copier.thread.pool.size", "2");
        config.put("remote.log.manager.expiration.thread.pool.size", "2");
        return config;
    }

    /** Topic properties: remote storage on, segments of `segmentBytes`, the local log kept 1 s, nothing expired by time. */
    static Map<String, String> fastTieredTopic(int segmentBytes) {
        return Map.of(
            "remote.storage.enable", "true",
            "segment.bytes", String.valueOf(segmentBytes),
            "local.retention.ms", "1000",
            "file.delete.delay.ms", "100",
            "retention.ms", "-1");
    }

    /**
     * The mode the suites give the brokers' plugin: the embedded mode by
     * default (rlmm.config.database.url alone), the sidecar mode with
     * -Drlmm.e2e.mode=sidecar (one rlmmd process per broker, named by
     * rlmm.config.rlmmd.target).
     */
    static boolean sidecar() {
        String mode = System.getProperty("rlmm.e2e.mode", "embedded");
        if (!mode.equals("embedded") && !mode.equals("sidecar")) {
            throw new IllegalArgumentException("rlmm.e2e.mode " + mode + ": want embedded or sidecar");
        }
        return mode.equals("sidecar");
    }

    /**
     * Each broker's plugin properties in the suites' mode: the database URL
     * (embedded), or an rlmmd started on `dsn` for each broker id into
     * `rlmmds` (sidecar).
     */
    static Map<Integer, Map<String, String>> pluginPerBroker(String dsn, int brokers, Map<Integer, Fixture.Rlmmd> rlmmds)
        throws IOException, InterruptedException {
        if (sidecar()) {
            return rlmmdPerBroker(dsn, brokers, rlmmds);
        }
        Map<Integer, Map<String, String>> perServer = new HashMap<>();
        for (int b = 0; b < brokers; b++) {
            perServer.put(b, Map.of("rlmm.config." + RlmmdConfig.DATABASE_URL, dsn));
        }
        return perServer;
    }

    /** The process id of the embedded rlmmd of broker `id`, from its JMX bean; -1 when none runs. */
    static long childPid(int id) {
        try {
            javax.management.ObjectName name = new javax.management.ObjectName(
                "io.github.krabka.remotestorage:type=EmbeddedRlmmd,broker=" + javax.management.ObjectName.quote(String.valueOf(id)));
            return (Long) java.lang.management.ManagementFactory.getPlatformMBeanServer().getAttribute(name, "Pid");
        } catch (javax.management.JMException e) {
            throw new AssertionError("the embedded rlmmd's bean of broker " + id + ": " + e, e);
        }
    }

    /** Starts an rlmmd on `dsn` for each broker id into `rlmmds`; the per-broker properties naming it. */
    static Map<Integer, Map<String, String>> rlmmdPerBroker(String dsn, int brokers, Map<Integer, Fixture.Rlmmd> rlmmds)
        throws IOException, InterruptedException {
        Map<Integer, Map<String, String>> perServer = new HashMap<>();
        for (int b = 0; b < brokers; b++) {
            Fixture.Rlmmd r = new Fixture.Rlmmd(dsn).start();
            rlmmds.put(b, r);
            perServer.put(b, Map.of("rlmm.config." + RlmmdConfig.TARGET, r.target()));
        }
        return perServer;
    }

    /**
     * The ids of topics just created. The controller created them; the
     * broker asked may not know them yet (UnknownTopicOrPartitionException
     * on a busy machine), so it is asked until it does.
     */
    static Map<String, Uuid> awaitTopicIds(Admin admin, List<String> names) throws InterruptedException {
        Map<String, Uuid> ids = new HashMap<>();
        Fixture.await("the topics " + names + " known to the brokers", () -> {
            try {
                admin.describeTopics(names).allTopicNames().get().forEach((name, d) -> ids.put(name, d.topicId()));
                return true;
            } catch (Exception e) {
                return false;
            }
        });
        return ids;
    }

    /** The shaded jar the build made (rlmm.plugin.jar), as a broker loads it. */
    static Path pluginJar() {
        return Path.of(System.getProperty("rlmm.plugin.jar", "target/remotestorage-kafka-0.1.0.jar")).toAbsolutePath();
    }

    /** Checks that the brokers are of the line the build asked for (`make kafka-matrix` runs several), and says which. */
    static void requireKafkaLine(String suite) {
        String version = KafkaLines.running();
        System.out.println(suite + ": Kafka " + version + " brokers");
        org.junit.jupiter.api.Assertions.assertEquals(System.getProperty("kafka.expected.version", version), version,
            "the brokers' Kafka version");
    }

    /** One combined node, its __consumer_offsets of one partition and one replica (a consumer group's checkpoint). */
    static KitCluster oneBroker() throws Exception {
        return KitCluster.start(true, 1, 1, Map.of(), Map.of("offsets.topic.replication.factor", "1",
            "offsets.topic.num.partitions", "1"));
    }
}
