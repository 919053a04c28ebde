package org.apache.kafka.server.log.remote.metadata.storage;

import io.github.krabka.remotestorage.kafka.Fixture;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.utils.ChildFirstClassLoader;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadataManager;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;

/**
 * Stands in for Kafka's topic-based manager in Kafka's own tests, which build
 * it by this class name (RemoteLogMetadataManagerTestUtils): this class comes
 * before kafka-storage's jar on the test class path.
 *
 * <p>Every call of the RemoteLogMetadataManager interface goes to the plugin,
 * {@code RlmmdRemoteLogMetadataManager}, loaded child first from its shaded
 * jar as a broker loads it (remote.log.metadata.manager.class.path), and
 * configured in its embedded mode (it runs an rlmmd of its own) on a fresh database of one throwaway
 * PostgreSQL. Every answer the tests check comes from the plugin.
 *
 * <p>The one thing kept of the topic-based manager: its consumer hands every
 * event of an assigned partition to the RemotePartitionMetadataStore it was
 * built with, and RemoteLogSegmentLifecycleTest verifies that on a spy of
 * the store. Here each write the plugin acknowledged is handed to that store
 * in the same way; nothing reads the store.
 */
public class TopicBasedRemoteLogMetadataManager implements RemoteLogMetadataManager {
    private static final String PLUGIN_CLASS = "io.github.krabka.remotestorage.kafka.RlmmdRemoteLogMetadataManager";
    private static final AtomicInteger DATABASES = new AtomicInteger();
    private static Fixture.Postgres postgres;

    private final Supplier<RemotePartitionMetadataStore> storeSupplier;
    private volatile RemotePartitionMetadataStore store;
    private volatile RemoteLogMetadataManager plugin;

    public TopicBasedRemoteLogMetadataManager() {
        this(RemoteLogMetadataTopicPartitioner::new, RemotePartitionMetadataStore::new);
    }

    TopicBasedRemoteLogMetadataManager(Function<Integer, RemoteLogMetadataTopicPartitioner> partitioner,
                                       Supplier<RemotePartitionMetadataStore> storeSupplier) {
        this.storeSupplier = storeSupplier;
    }

    /** The constructor Kafka 3.9's test helpers call (the flag started the topic-based manager's producer and consumer). */
    TopicBasedRemoteLogMetadataManager(boolean startConsumerThread,
                                       Function<Integer, RemoteLogMetadataTopicPartitioner> partitioner,
                                       Supplier<RemotePartitionMetadataStore> storeSupplier) {
        this(partitioner, storeSupplier);
    }

    /** The one PostgreSQL of this JVM, started by the first manager. */
    private static synchronized Fixture.Postgres postgres() throws IOException {
        if (postgres == null) {
            Fixture.Postgres pg = new Fixture.Postgres();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    pg.close();
                } catch (Exception e) {
                    System.err.println("stopping the PostgreSQL fixture: " + e);
                }
            }));
            postgres = pg;
        }
        return postgres;
    }

    /**
     * Starts rlmmd and configures the plugin, once: a second call changes
     * nothing (Kafka's manager skips it too, and RemoteLogMetadataManagerTest
     * configures a built manager again).
     */
    @Override
    public synchronized void configure(Map<String, ?> configs) {
        if (plugin != null) {
            return;
        }
        Path jar = Path.of(System.getProperty("rlmm.plugin.jar", "../target/remotestorage-kafka-0.1.0.jar")).toAbsolutePath();
        if (!Files.isReadable(jar)) {
            throw new IllegalStateException(jar + " is missing: run the suite through `make kafka-contract`, which builds it");
        }
        try {
            String dsn = postgres().database("contract_" + DATABASES.incrementAndGet());
            ClassLoader loader = new ChildFirstClassLoader(jar.toString(), getClass().getClassLoader());
            RemoteLogMetadataManager p = (RemoteLogMetadataManager) loader.loadClass(PLUGIN_CLASS).getDeclaredConstructor().newInstance();
            Map<String, Object> pluginConfigs = new HashMap<>(configs);
            // The embedded mode: the plugin runs its own rlmmd on the database.
            pluginConfigs.put("database.url", dsn);
            p.configure(pluginConfigs);
            plugin = p;
        } catch (IOException | ReflectiveOperationException e) {
            throw new KafkaException("load the plugin from " + jar, e);
        }
        store = storeSupplier.get();
    }

    /** What Kafka 4's test helpers call after configure (BrokerReadyCallback, which Kafka 3.9 lacks). */
    public void onBrokerReady() {
        // The plugin's channel connects on its first call.
    }

    /** What Kafka's test helpers wait for after configure. */
    boolean isInitialized() {
        return plugin != null;
    }

    private RemoteLogMetadataManager plugin() {
        RemoteLogMetadataManager p = plugin;
        if (p == null) {
            throw new IllegalStateException("TopicBasedRemoteLogMetadataManager used before configure()");
        }
        return p;
    }

    /** Hands an acknowledged event to the store, when the partition is assigned (as the topic-based consumer does). */
    private void handled(TopicIdPartition tp, Runnable handle) {
        RemotePartitionMetadataStore s = store;
        if (s != null && s.isInitialized(tp)) {
            handle.run();
        }
    }

    @Override
    public CompletableFuture<Void> addRemoteLogSegmentMetadata(RemoteLogSegmentMetadata m) throws RemoteStorageException {
        return plugin().addRemoteLogSegmentMetadata(m)
            .thenRun(() -> handled(m.topicIdPartition(), () -> store.handleRemoteLogSegmentMetadata(m)));
    }

    @Override
    public CompletableFuture<Void> updateRemoteLogSegmentMetadata(RemoteLogSegmentMetadataUpdate u) throws RemoteStorageException {
        return plugin().updateRemoteLogSegmentMetadata(u)
            .thenRun(() -> handled(u.remoteLogSegmentId().topicIdPartition(), () -> store.handleRemoteLogSegmentMetadataUpdate(u)));
    }

    @Override
    public CompletableFuture<Void> putRemotePartitionDeleteMetadata(RemotePartitionDeleteMetadata d) throws RemoteStorageException {
        return plugin().putRemotePartitionDeleteMetadata(d)
            .thenRun(() -> handled(d.topicIdPartition(), () -> store.handleRemotePartitionDeleteMetadata(d)));
    }

    @Override
    public Optional<RemoteLogSegmentMetadata> remoteLogSegmentMetadata(TopicIdPartition tp, int epochForOffset, long offset)
        throws RemoteStorageException {
        return plugin().remoteLogSegmentMetadata(tp, epochForOffset, offset);
    }

    @Override
    public Optional<Long> highestOffsetForEpoch(TopicIdPartition tp, int leaderEpoch) throws RemoteStorageException {
        return plugin().highestOffsetForEpoch(tp, leaderEpoch);
    }

    @Override
    public Iterator<RemoteLogSegmentMetadata> listRemoteLogSegments(TopicIdPartition tp) throws RemoteStorageException {
        return plugin().listRemoteLogSegments(tp);
    }

    @Override
    public Iterator<RemoteLogSegmentMetadata> listRemoteLogSegments(TopicIdPartition tp, int leaderEpoch) throws RemoteStorageException {
        return plugin().listRemoteLogSegments(tp, leaderEpoch);
    }

    @Override
    public void onPartitionLeadershipChanges(Set<TopicIdPartition> leaderPartitions, Set<TopicIdPartition> followerPartitions) {
        plugin().onPartitionLeadershipChanges(leaderPartitions, followerPartitions);
        Set<TopicIdPartition> all = new HashSet<>(leaderPartitions);
        all.addAll(followerPartitions);
        for (TopicIdPartition tp : all) {
            store.maybeLoadPartition(tp);
            store.markInitialized(tp);
        }
    }

    @Override
    public void onStopPartitions(Set<TopicIdPartition> partitions) {
        plugin().onStopPartitions(partitions);
        partitions.forEach(store::clearTopicPartition);
    }

    @Override
    public long remoteLogSize(TopicIdPartition tp, int leaderEpoch) throws RemoteStorageException {
        return plugin().remoteLogSize(tp, leaderEpoch);
    }

    // nextSegmentWithTxnIndex and isReady: Kafka 4.0 added them to the
    // interface, so they are not @Override here (this class compiles on 3.9
    // too); on 4.x they override the interface's defaults.

    public Optional<RemoteLogSegmentMetadata> nextSegmentWithTxnIndex(TopicIdPartition tp, int epoch, long offset)
        throws RemoteStorageException {
        @SuppressWarnings("unchecked")
        Optional<RemoteLogSegmentMetadata> s = (Optional<RemoteLogSegmentMetadata>) invokePlugin("nextSegmentWithTxnIndex",
            new Class<?>[] {TopicIdPartition.class, int.class, long.class}, tp, epoch, offset);
        return s;
    }

    public boolean isReady(TopicIdPartition tp) {
        try {
            return (Boolean) invokePlugin("isReady", new Class<?>[] {TopicIdPartition.class}, tp);
        } catch (RemoteStorageException e) {
            throw new KafkaException(e);
        }
    }

    /** Calls a method of the plugin that this line's interface may lack. */
    private Object invokePlugin(String name, Class<?>[] types, Object... args) throws RemoteStorageException {
        try {
            return plugin().getClass().getMethod(name, types).invoke(plugin(), args);
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof RemoteStorageException rse) {
                throw rse;
            }
            throw new KafkaException(e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new KafkaException("the plugin has no " + name, e);
        }
    }

    /**
     * Closes the plugin, which stops its rlmmd. Nothing waits here for the
     * plugin's threads: its close returns once they have ended, and Kafka's
     * tests check right after that no thread outlives the test.
     */
    @Override
    public synchronized void close() throws IOException {
        try {
            if (plugin != null) {
                plugin.close();
            }
        } finally {
            if (store != null) {
                store.close();
            }
        }
    }
}
