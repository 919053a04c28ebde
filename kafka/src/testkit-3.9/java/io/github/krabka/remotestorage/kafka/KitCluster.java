package io.github.krabka.remotestorage.kafka;

import java.util.Map;
import kafka.testkit.KafkaClusterTestKit;
import kafka.testkit.TestKitNodes;

/**
 * An in-process KRaft cluster from Kafka 3.9's test kit (kafka.testkit, in
 * kafka_2.13's test jar): src/testkit's KitCluster with that package's
 * imports, and no broker restart.
 */
final class KitCluster implements AutoCloseable {
    private final KafkaClusterTestKit kit;

    private KitCluster(KafkaClusterTestKit kit) {
        this.kit = kit;
    }

    /** Formats and starts the nodes, and waits for the brokers to be ready. */
    static KitCluster start(boolean combined, int controllers, int brokers,
                            Map<Integer, Map<String, String>> perServer, Map<String, String> config) throws Exception {
        TestKitNodes nodes = new TestKitNodes.Builder().setCombined(combined)
            .setNumControllerNodes(controllers).setNumBrokerNodes(brokers)
            .setPerServerProperties(perServer).build();
        KafkaClusterTestKit.Builder b = new KafkaClusterTestKit.Builder(nodes);
        config.forEach(b::setConfigProp);
        KafkaClusterTestKit kit = b.build();
        try {
            kit.format();
            kit.startup();
            kit.waitForReadyBrokers();
        } catch (Exception | Error e) {
            kit.close();
            throw e;
        }
        return new KitCluster(kit);
    }

    String bootstrapServers() {
        return kit.bootstrapServers();
    }

    void waitForReadyBrokers() throws Exception {
        kit.waitForReadyBrokers();
    }

    /** The in-process broker of that id (a kafka.server.BrokerServer). */
    Object broker(int id) {
        return kit.brokers().get(id);
    }

    /** Kafka 3.9's test kit cannot restart a broker. */
    void restartBroker(int id) {
        restartBroker(id, Map.of());
    }

    /** Kafka 3.9's test kit cannot restart a broker. */
    void restartBroker(int id, Map<String, Object> overrides) {
        throw new AssertionError("Kafka 3.9's test kit cannot restart a broker (the 4.x kits can: see src/testkit)");
    }

    private boolean closed;

    /** Shuts the cluster down; a second call does nothing. */
    @Override
    public synchronized void close() throws Exception {
        if (!closed) {
            closed = true;
            kit.close();
        }
    }
}
