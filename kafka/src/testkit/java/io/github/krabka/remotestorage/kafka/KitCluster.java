package io.github.krabka.remotestorage.kafka;

import java.util.Map;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;

/**
 * An in-process KRaft cluster from Kafka's test kit of 4.0 on
 * (org.apache.kafka.common.test, in kafka-test-common-runtime). Kafka 3.9's
 * kit has the same calls in another package: src/testkit-3.9 holds its
 * twin, and the build picks one by the Kafka line (kafka/pom.xml).
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

    /** KafkaClusterTestKit.restartBroker, which the test kit has from Kafka 4.3 on. */
    void restartBroker(int id) throws Exception {
        restartBroker(id, Map.of());
    }

    /** The same, the broker's configuration changed by overrides. */
    void restartBroker(int id, Map<String, Object> overrides) throws Exception {
        java.lang.reflect.Method restart;
        try {
            restart = KafkaClusterTestKit.class.getMethod("restartBroker", int.class, Map.class);
        } catch (NoSuchMethodException e) {
            throw new AssertionError("this Kafka's test kit cannot restart a broker (KafkaClusterTestKit.restartBroker is 4.3 on)", e);
        }
        restart.invoke(kit, id, overrides);
    }

    @Override
    public void close() throws Exception {
        kit.close();
    }
}
