package io.github.krabka.remotestorage.kafka;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.metadata.storage.RemotePartitionMetadataStore;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;

/**
 * What Kafka's topic-based metadata manager (TBRLMM) holds after replaying
 * its topic, record by record. It decides, as TBRLMM's cache does, whether a
 * record is taken or dropped (an update of a segment it does not know, an
 * illegal transition by Kafka's RemoteLogSegmentState.isValidTransition, an
 * add not in COPY_SEGMENT_STARTED, a record of a partition whose deletion
 * finished), and feeds the records it takes to Kafka's own
 * RemotePartitionMetadataStore when asked to (verify), whose answers are
 * TBRLMM's.
 *
 * <p>One divergence from TBRLMM: a second add of a segment id already added
 * is dropped (TBRLMM's cache would replace the segment by a new one in
 * COPY_SEGMENT_STARTED); the store keeps segment ids unique.
 */
final class TbrlmmModel {
    /** Why TBRLMM drops a record; null when it takes it. */
    enum Refusal {
        UNKNOWN_SEGMENT("an update of a segment TBRLMM does not know"),
        ILLEGAL_TRANSITION("a segment state transition TBRLMM refuses"),
        ADD_NOT_COPY_STARTED("an add in a state other than COPY_SEGMENT_STARTED"),
        DUPLICATE_ADD("an add of a segment id already added"),
        PARTITION_DELETED("a segment record of a partition whose deletion finished");

        final String what;

        Refusal(String what) {
            this.what = what;
        }
    }

    /** Per user partition: the state of every segment TBRLMM knows (DELETE_SEGMENT_FINISHED ones are removed). */
    private final Map<TopicIdPartition, Map<Uuid, RemoteLogSegmentState>> segments = new HashMap<>();
    /** Every segment id ever added, and the add record. */
    private final Map<Uuid, RemoteLogSegmentMetadata> adds = new HashMap<>();
    /** The last partition-delete state of each partition that had one. */
    private final Map<TopicIdPartition, RemotePartitionDeleteState> deletes = new HashMap<>();
    /**
     * The last custom metadata a taken record gave each segment. TBRLMM's
     * cache replaces a segment's custom metadata by the update's, none
     * included; the store keeps it when an update carries none (API.md).
     */
    private final Map<Uuid, byte[]> lastCustom = new HashMap<>();
    /** Every user partition a record named, in the order first seen. */
    private final Set<TopicIdPartition> partitions = new LinkedHashSet<>();
    /** Kafka's own store, fed the records taken; null unless asked for. */
    private final RemotePartitionMetadataStore kafka;

    TbrlmmModel(boolean withKafkaStore) {
        this.kafka = withKafkaStore ? new RemotePartitionMetadataStore() : null;
    }

    /** Applies one record as TBRLMM does: null when it takes it, else why it drops it. */
    Refusal apply(RemoteLogMetadata m) {
        Refusal r = decide(m);
        if (r == null && kafka != null) {
            if (m instanceof RemoteLogSegmentMetadata s) {
                s.customMetadata().ifPresent(c -> lastCustom.put(s.remoteLogSegmentId().id(), c.value()));
            } else if (m instanceof RemoteLogSegmentMetadataUpdate u) {
                u.customMetadata().ifPresent(c -> lastCustom.put(u.remoteLogSegmentId().id(), c.value()));
            }
            kafka.handleRemoteLogMetadata(m);
        }
        return r;
    }

    /** The custom metadata the store holds for a segment after the taken records: the last one given (verify only). */
    Optional<byte[]> storeCustomMetadata(Uuid id) {
        return Optional.ofNullable(lastCustom.get(id));
    }

    private Refusal decide(RemoteLogMetadata m) {
        if (m instanceof RemoteLogSegmentMetadata s) {
            TopicIdPartition tp = s.remoteLogSegmentId().topicIdPartition();
            partitions.add(tp);
            if (deletes.get(tp) == RemotePartitionDeleteState.DELETE_PARTITION_FINISHED) {
                return Refusal.PARTITION_DELETED;
            }
            if (s.state() != RemoteLogSegmentState.COPY_SEGMENT_STARTED) {
                return Refusal.ADD_NOT_COPY_STARTED;
            }
            if (adds.containsKey(s.remoteLogSegmentId().id())) {
                return Refusal.DUPLICATE_ADD;
            }
            load(tp);
            adds.put(s.remoteLogSegmentId().id(), s);
            segments.computeIfAbsent(tp, k -> new HashMap<>()).put(s.remoteLogSegmentId().id(), s.state());
            return null;
        }
        if (m instanceof RemoteLogSegmentMetadataUpdate u) {
            TopicIdPartition tp = u.remoteLogSegmentId().topicIdPartition();
            partitions.add(tp);
            if (deletes.get(tp) == RemotePartitionDeleteState.DELETE_PARTITION_FINISHED) {
                return Refusal.PARTITION_DELETED;
            }
            Map<Uuid, RemoteLogSegmentState> states = segments.get(tp);
            RemoteLogSegmentState from = states == null ? null : states.get(u.remoteLogSegmentId().id());
            if (from == null) {
                return Refusal.UNKNOWN_SEGMENT;
            }
            if (u.state() == RemoteLogSegmentState.COPY_SEGMENT_STARTED || !RemoteLogSegmentState.isValidTransition(from, u.state())) {
                return Refusal.ILLEGAL_TRANSITION;
            }
            if (u.state() == RemoteLogSegmentState.DELETE_SEGMENT_FINISHED) {
                states.remove(u.remoteLogSegmentId().id());
            } else {
                states.put(u.remoteLogSegmentId().id(), u.state());
            }
            return null;
        }
        RemotePartitionDeleteMetadata d = (RemotePartitionDeleteMetadata) m;
        TopicIdPartition tp = d.topicIdPartition();
        partitions.add(tp);
        deletes.put(tp, d.state());
        if (d.state() == RemotePartitionDeleteState.DELETE_PARTITION_FINISHED) {
            segments.remove(tp);
        }
        return null;
    }

    /** TBRLMM loads a partition's cache when it is assigned: here, when the first record of it is taken. */
    private void load(TopicIdPartition tp) {
        if (kafka != null && !kafka.isInitialized(tp)) {
            kafka.maybeLoadPartition(tp);
            kafka.markInitialized(tp);
        }
    }

    Set<TopicIdPartition> partitions() {
        return partitions;
    }

    /** The add record of a segment id, if the topic added it. */
    RemoteLogSegmentMetadata added(Uuid id) {
        return adds.get(id);
    }

    /** The state TBRLMM holds the segment in; empty when it does not know it (never added, finished deleting). */
    Optional<RemoteLogSegmentState> state(TopicIdPartition tp, Uuid id) {
        Map<Uuid, RemoteLogSegmentState> states = segments.get(tp);
        return Optional.ofNullable(states == null ? null : states.get(id));
    }

    /** How many segments TBRLMM holds (not DELETE_SEGMENT_FINISHED), over every partition. */
    long liveSegments() {
        return segments.values().stream().mapToLong(Map::size).sum();
    }

    RemotePartitionDeleteState deleteState(TopicIdPartition tp) {
        return deletes.get(tp);
    }

    // Kafka's answers. RemotePartitionMetadataStore's reads are public in 3.9
    // and package-private from 4.0 on; the tool runs on Kafka's class path
    // (the unnamed module), where reflection reaches them on every line.

    private static final Method LIST = method("listRemoteLogSegments", TopicIdPartition.class);
    private static final Method LOOKUP = method("remoteLogSegmentMetadata", TopicIdPartition.class, long.class, int.class);
    private static final Method HIGHEST = method("highestLogOffset", TopicIdPartition.class, int.class);

    private static Method method(String name, Class<?>... types) {
        try {
            Method m = RemotePartitionMetadataStore.class.getDeclaredMethod(name, types);
            m.setAccessible(true);
            return m;
        } catch (NoSuchMethodException e) {
            throw new IllegalStateException("this Kafka's RemotePartitionMetadataStore has no " + name + ": the tool does not support it", e);
        }
    }

    /** Thrown by Kafka's store for a partition it does not hold (never loaded, or its deletion finished). */
    static final class NoPartition extends Exception {
        NoPartition(Throwable cause) {
            super(cause);
        }
    }

    private Object call(Method m, Object... args) throws NoPartition {
        try {
            return m.invoke(kafka, args);
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof RemoteResourceNotFoundException) {
                throw new NoPartition(e.getCause());
            }
            throw new IllegalStateException("Kafka's RemotePartitionMetadataStore." + m.getName() + " failed", e.getCause());
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    @SuppressWarnings("unchecked")
    List<RemoteLogSegmentMetadata> kafkaList(TopicIdPartition tp) throws NoPartition {
        List<RemoteLogSegmentMetadata> out = new ArrayList<>();
        ((java.util.Iterator<RemoteLogSegmentMetadata>) call(LIST, tp)).forEachRemaining(out::add);
        return out;
    }

    @SuppressWarnings("unchecked")
    Optional<RemoteLogSegmentMetadata> kafkaLookup(TopicIdPartition tp, int epoch, long offset) throws NoPartition {
        return (Optional<RemoteLogSegmentMetadata>) call(LOOKUP, tp, offset, epoch);
    }

    @SuppressWarnings("unchecked")
    Optional<Long> kafkaHighestOffset(TopicIdPartition tp, int epoch) throws NoPartition {
        return (Optional<Long>) call(HIGHEST, tp, epoch);
    }
}
