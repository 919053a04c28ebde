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

    /** Restarts a broker with its configuration (KafkaClusterTestKit.restartBroker from Kafka 4.4 on). */
    void restartBroker(int id) throws Exception {
        restartBroker(id, Map.of());
    }

    /**
     * The same, the broker's configuration changed by overrides (which stay
     * for later restarts). Kafka 4.4's kit has the call; on an older kit
     * of the 4.x lines the steps of 4.4's are taken here, through the
     * kit's fields, by reflection so that this compiles on every line: the
     * broker shut down, a new SharedServer and BrokerServer made of its
     * configuration and overrides, the same metadata properties, fault
     * handlers and listener ports, and started.
     */
    void restartBroker(int id, Map<String, Object> overrides) throws Exception {
        java.lang.reflect.Method restart = null;
        try {
            restart = KafkaClusterTestKit.class.getMethod("restartBroker", int.class, Map.class);
        } catch (NoSuchMethodException e) {
            // an older kit: below
        }
        if (restart != null) {
            restart.invoke(kit, id, overrides);
            return;
        }
        try {
            java.lang.reflect.Field brokersField = KafkaClusterTestKit.class.getDeclaredField("brokers");
            brokersField.setAccessible(true);
            @SuppressWarnings("unchecked")
            Map<Integer, Object> brokers = (Map<Integer, Object>) brokersField.get(kit);
            Object broker = brokers.get(id);
            Class<?> brokerClass = Class.forName("kafka.server.BrokerServer");
            if (!(Boolean) brokerClass.getMethod("isShutdown").invoke(broker)) {
                brokerClass.getMethod("shutdown").invoke(broker);
                brokerClass.getMethod("awaitShutdown").invoke(broker);
            }
            Object oldConfig = brokerClass.getMethod("config").invoke(broker);
            Class<?> configClass = Class.forName("kafka.server.KafkaConfig");
            Map<Object, Object> props = new java.util.HashMap<>((Map<?, ?>) configClass.getMethod("originals").invoke(oldConfig));
            props.putAll(overrides);
            Object config = configClass.getConstructor(Map.class, boolean.class).newInstance(props, false);
            Object quorum = configClass.getMethod("quorumConfig").invoke(config);
            Class<?> quorumClass = Class.forName("org.apache.kafka.raft.QuorumConfig");
            Object voters = quorumClass.getMethod("parseVoterConnections", java.util.List.class)
                .invoke(null, quorumClass.getMethod("voters").invoke(quorum));
            Object bootstrap = quorumClass.getMethod("parseBootstrapServers", java.util.List.class)
                .invoke(null, quorumClass.getMethod("bootstrapServers").invoke(quorum));
            Object shared = brokerClass.getMethod("sharedServer").invoke(broker);
            Class<?> sharedClass = Class.forName("kafka.server.SharedServer");
            Object metaProps = sharedClass.getMethod("metaPropsEnsemble").invoke(shared);
            java.lang.reflect.Field faults = KafkaClusterTestKit.class.getDeclaredField("faultHandlerFactory");
            faults.setAccessible(true);
            java.lang.reflect.Field sockets = KafkaClusterTestKit.class.getDeclaredField("socketFactoryManager");
            sockets.setAccessible(true);
            Object socketManager = sockets.get(kit);
            Object socketFactory = socketManager.getClass().getMethod("getOrCreateSocketFactory", int.class).invoke(socketManager, id);
            java.lang.reflect.Constructor<?> sharedCtor = null;
            for (java.lang.reflect.Constructor<?> c : sharedClass.getConstructors()) {
                if (c.getParameterCount() == 8) {
                    sharedCtor = c;
                }
            }
            if (sharedCtor == null) {
                throw new NoSuchMethodException("kafka.server.SharedServer's constructor of 8 parameters");
            }
            Object newShared = sharedCtor.newInstance(config, metaProps, org.apache.kafka.common.utils.Time.SYSTEM,
                new org.apache.kafka.common.metrics.Metrics(), java.util.concurrent.CompletableFuture.completedFuture(voters), bootstrap,
                faults.get(kit), socketFactory);
            Object newBroker = brokerClass.getConstructor(sharedClass).newInstance(newShared);
            brokers.put(id, newBroker);
            brokerClass.getMethod("startup").invoke(newBroker);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError("this Kafka's test kit cannot restart a broker: " + e, e);
        }
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
