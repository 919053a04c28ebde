package io.github.krabka.remotestorage.kafka;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.server.log.remote.metadata.storage.RemoteLogMetadataTopicPartitioner;
import org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManagerConfig;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes each metadata change the plugin made in the store to Kafka's
 * topic-based manager's topic too, as that manager (TBRLMM) writes it: the
 * record of Kafka's serde, in the metadata partition Kafka's partitioner
 * picks, with TBRLMM's producer settings. Brokers still on TBRLMM then see
 * the plugin's writes, which is what keeps a rolling switch, and the way
 * back, consistent (docs/KAFKA.md, "The rolling switch").
 *
 * <p>It reads TBRLMM's own keys ({@code remote.log.metadata.*}, with the
 * {@code remote.log.metadata.common.client.bootstrap.servers} the broker
 * sets when {@code remote.log.metadata.manager.listener.name} is set), so a
 * broker keeps the settings it had on TBRLMM.
 *
 * <p>A record the topic did not take is kept, in order, and sent first by
 * the next change; that change is refused, before it reaches the store,
 * while the backlog cannot be sent. So the topic misses no change the
 * store has, and takes each in the store's order.
 */
final class TopicMirror implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(TopicMirror.class);

    private final KafkaProducer<byte[], byte[]> producer;
    private final String topic;
    private final int partitions;
    private final RemoteLogMetadataTopicPartitioner partitioner;
    private final RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
    /** Changes in the store whose record the topic has not taken yet, oldest first. */
    private final Deque<RemoteLogMetadata> backlog = new ArrayDeque<>();
    private boolean partitionsChecked;

    private TopicMirror(KafkaProducer<byte[], byte[]> producer, String topic, int partitions) {
        this.producer = producer;
        this.topic = topic;
        this.partitions = partitions;
        this.partitioner = new RemoteLogMetadataTopicPartitioner(partitions);
    }

    /** A mirror with TBRLMM's settings among the plugin's configs; fails as TBRLMM's configure would on bad ones. */
    static TopicMirror open(Map<String, ?> configs) {
        TopicBasedRemoteLogMetadataManagerConfig c;
        try {
            c = new TopicBasedRemoteLogMetadataManagerConfig(configs);
        } catch (RuntimeException e) {
            throw new ConfigException(RlmmdConfig.MIRROR_ENABLE + " needs the topic-based manager's settings "
                + "(remote.log.metadata.manager.listener.name, rlmm.config.remote.log.metadata.*): " + e.getMessage());
        }
        Map<String, Object> props = new HashMap<>(c.producerProperties());
        props.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "remotestorage-mirror-" + configs.get("broker.id"));
        // Each record is sent alone and waited for: lingering (5 ms by
        // default from Kafka 4.0) batches nothing and only adds its wait.
        props.putIfAbsent(ProducerConfig.LINGER_MS_CONFIG, 0);
        KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        return new TopicMirror(p, c.remoteLogMetadataTopicName(), c.metadataTopicPartitionsCount());
    }

    String topic() {
        return topic;
    }

    /**
     * Sends the backlog; true when it is empty. A change must not reach the
     * store while this is false.
     */
    synchronized boolean drain() {
        try {
            sendBacklog();
            return true;
        } catch (RemoteStorageException e) {
            return false;
        }
    }

    /**
     * Before a change goes to the store: the topic's partition count is
     * checked once, and the backlog goes to the topic, or the change is
     * refused.
     */
    synchronized void before(String what) throws RemoteStorageException {
        try {
            checkPartitions();
            sendBacklog();
        } catch (RemoteStorageException e) {
            throw new RemoteStorageException("remotestorage: " + what + " refused, nothing written"
                + (backlog.isEmpty() ? "" : ": " + backlog.size() + " earlier changes are not in " + topic + " yet") + ": " + e.getMessage(), e);
        }
    }

    /** After the store took a change: its record goes to the topic, or waits in the backlog for the next change. */
    synchronized void after(RemoteLogMetadata m, String what) throws RemoteStorageException {
        backlog.addLast(m);
        try {
            sendBacklog();
        } catch (RemoteStorageException e) {
            throw new RemoteStorageException("remotestorage: " + what + " is in the store but not in " + topic
                + " yet (brokers on the topic-based manager do not see it); it is sent before the next change: " + e.getMessage(), e);
        }
    }

    private void sendBacklog() throws RemoteStorageException {
        while (!backlog.isEmpty()) {
            RemoteLogMetadata m = backlog.peekFirst();
            send(m);
            backlog.removeFirst();
        }
    }

    private void send(RemoteLogMetadata m) throws RemoteStorageException {
        checkPartitions();
        ProducerRecord<byte[], byte[]> r = record(m);
        try {
            // The producer bounds the wait: delivery.timeout.ms (TBRLMM's
            // remote.log.metadata.producer.* settings).
            producer.send(r).get();
        } catch (ExecutionException e) {
            throw new RemoteStorageException("write to " + topic + ": " + e.getCause(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RemoteStorageException("write to " + topic + ": interrupted", e);
        } catch (RuntimeException e) {
            throw new RemoteStorageException("write to " + topic + ": " + e, e);
        }
    }

    /** The record TBRLMM writes for a change: no key, the serde's value, the partitioner's metadata partition. */
    private ProducerRecord<byte[], byte[]> record(RemoteLogMetadata m) {
        return new ProducerRecord<>(topic, partitioner.metadataPartition(m.topicIdPartition()), null, serde.serialize(m));
    }

    /**
     * The topic's partition count must be the one TBRLMM's partitioner is
     * given (remote.log.metadata.topic.num.partitions): else brokers on
     * TBRLMM read another partition than the one written.
     */
    private void checkPartitions() throws RemoteStorageException {
        if (partitionsChecked) {
            return;
        }
        List<PartitionInfo> info;
        try {
            info = producer.partitionsFor(topic);
        } catch (RuntimeException e) {
            throw new RemoteStorageException("read the partitions of " + topic + ": " + e, e);
        }
        if (info.size() != partitions) {
            throw new RemoteStorageException(topic + " has " + info.size() + " partitions, but remote.log.metadata.topic.num.partitions says "
                + partitions + ": set it as the brokers on the topic-based manager have it");
        }
        partitionsChecked = true;
        log.info("remotestorage: mirroring every metadata change to {} ({} partitions)", topic, partitions);
    }

    /**
     * Sends what is left of the backlog for up to 5 s (logging what cannot
     * be sent), then closes the producer and its thread: a broker's shutdown
     * does not wait on a topic that does not answer.
     */
    @Override
    public synchronized void close() {
        long deadline = System.nanoTime() + CLOSE_WAIT.toNanos();
        try {
            while (!backlog.isEmpty()) {
                RemoteLogMetadata m = backlog.peekFirst();
                producer.send(record(m)).get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                backlog.removeFirst();
            }
        } catch (ExecutionException | TimeoutException | RuntimeException e) {
            // logged below, with what is left
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (!backlog.isEmpty()) {
            log.error("remotestorage: closing with {} metadata changes in the store that are not in {}: "
                + "brokers on the topic-based manager miss them until they are written there (TbrlmmTool verify lists them)",
                backlog.size(), topic);
        }
        producer.close(CLOSE_WAIT);
    }

    private static final Duration CLOSE_WAIT = Duration.ofSeconds(5);
}
