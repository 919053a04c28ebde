package io.github.krabka.remotestorage.kafka;

import com.google.protobuf.ByteString;
import io.github.krabka.remotestorage.v1.EpochStart;
import io.github.krabka.remotestorage.v1.PartitionDelete;
import io.github.krabka.remotestorage.v1.PartitionDeleteState;
import io.github.krabka.remotestorage.v1.Segment;
import io.github.krabka.remotestorage.v1.SegmentId;
import io.github.krabka.remotestorage.v1.SegmentState;
import io.github.krabka.remotestorage.v1.SegmentUpdate;
import io.github.krabka.remotestorage.v1.TopicIdPartition;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata.CustomMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;

/** Kafka's metadata types to and from the messages of remotestorage.v1. */
final class Convert {
    private Convert() {
    }

    static ByteString uuid(Uuid id) {
        ByteBuffer b = ByteBuffer.allocate(16);
        b.putLong(id.getMostSignificantBits()).putLong(id.getLeastSignificantBits());
        return ByteString.copyFrom(b.array());
    }

    static Uuid uuid(ByteString b) {
        if (b.size() != 16) {
            throw new IllegalArgumentException("rlmmd sent an id of " + b.size() + " bytes, want 16");
        }
        ByteBuffer buf = b.asReadOnlyByteBuffer();
        return new Uuid(buf.getLong(), buf.getLong());
    }

    static TopicIdPartition tp(org.apache.kafka.common.TopicIdPartition tp) {
        return TopicIdPartition.newBuilder()
            .setTopicId(uuid(tp.topicId()))
            .setTopic(tp.topic())
            .setPartition(tp.partition())
            .build();
    }

    static org.apache.kafka.common.TopicIdPartition tp(TopicIdPartition m) {
        return new org.apache.kafka.common.TopicIdPartition(uuid(m.getTopicId()), m.getPartition(), m.getTopic());
    }

    static SegmentId segmentId(RemoteLogSegmentId id) {
        return SegmentId.newBuilder().setTopicIdPartition(tp(id.topicIdPartition())).setId(uuid(id.id())).build();
    }

    static SegmentState state(RemoteLogSegmentState s) {
        switch (s) {
            case COPY_SEGMENT_STARTED:
                return SegmentState.SEGMENT_STATE_COPY_SEGMENT_STARTED;
            case COPY_SEGMENT_FINISHED:
                return SegmentState.SEGMENT_STATE_COPY_SEGMENT_FINISHED;
            case DELETE_SEGMENT_STARTED:
                return SegmentState.SEGMENT_STATE_DELETE_SEGMENT_STARTED;
            case DELETE_SEGMENT_FINISHED:
                return SegmentState.SEGMENT_STATE_DELETE_SEGMENT_FINISHED;
            default:
                return SegmentState.SEGMENT_STATE_UNSPECIFIED;
        }
    }

    static RemoteLogSegmentState state(SegmentState s) {
        switch (s) {
            case SEGMENT_STATE_COPY_SEGMENT_STARTED:
                return RemoteLogSegmentState.COPY_SEGMENT_STARTED;
            case SEGMENT_STATE_COPY_SEGMENT_FINISHED:
                return RemoteLogSegmentState.COPY_SEGMENT_FINISHED;
            case SEGMENT_STATE_DELETE_SEGMENT_STARTED:
                return RemoteLogSegmentState.DELETE_SEGMENT_STARTED;
            case SEGMENT_STATE_DELETE_SEGMENT_FINISHED:
                return RemoteLogSegmentState.DELETE_SEGMENT_FINISHED;
            default:
                throw new IllegalArgumentException("rlmmd sent segment state " + s);
        }
    }

    static PartitionDeleteState state(RemotePartitionDeleteState s) {
        switch (s) {
            case DELETE_PARTITION_MARKED:
                return PartitionDeleteState.PARTITION_DELETE_STATE_DELETE_PARTITION_MARKED;
            case DELETE_PARTITION_STARTED:
                return PartitionDeleteState.PARTITION_DELETE_STATE_DELETE_PARTITION_STARTED;
            case DELETE_PARTITION_FINISHED:
                return PartitionDeleteState.PARTITION_DELETE_STATE_DELETE_PARTITION_FINISHED;
            default:
                return PartitionDeleteState.PARTITION_DELETE_STATE_UNSPECIFIED;
        }
    }

    static Segment segment(RemoteLogSegmentMetadata m) {
        Segment.Builder b = Segment.newBuilder()
            .setId(segmentId(m.remoteLogSegmentId()))
            .setStartOffset(m.startOffset())
            .setEndOffset(m.endOffset())
            .setMaxTimestampMs(m.maxTimestampMs())
            .setBrokerId(m.brokerId())
            .setEventTimestampMs(m.eventTimestampMs())
            .setSegmentSizeInBytes(m.segmentSizeInBytes())
            .setState(state(m.state()))
            .setTxnIndexEmpty(txnIndexEmpty(m));
        m.customMetadata().ifPresent(c -> b.setCustomMetadata(ByteString.copyFrom(c.value())));
        for (Map.Entry<Integer, Long> e : m.segmentLeaderEpochs().entrySet()) {
            b.addSegmentLeaderEpochs(EpochStart.newBuilder().setEpoch(e.getKey()).setStartOffset(e.getValue()));
        }
        return b.build();
    }

    static RemoteLogSegmentMetadata segment(Segment m) {
        Map<Integer, Long> epochs = new HashMap<>();
        for (EpochStart e : m.getSegmentLeaderEpochsList()) {
            epochs.put(e.getEpoch(), e.getStartOffset());
        }
        Optional<CustomMetadata> custom = m.hasCustomMetadata()
            ? Optional.of(new CustomMetadata(m.getCustomMetadata().toByteArray()))
            : Optional.empty();
        RemoteLogSegmentId id = new RemoteLogSegmentId(tp(m.getId().getTopicIdPartition()), uuid(m.getId().getId()));
        if (NEW_WITH_TXN_INDEX_EMPTY == null) {
            return new RemoteLogSegmentMetadata(id, m.getStartOffset(), m.getEndOffset(), m.getMaxTimestampMs(),
                m.getBrokerId(), m.getEventTimestampMs(), m.getSegmentSizeInBytes(), custom, state(m.getState()), epochs);
        }
        try {
            return (RemoteLogSegmentMetadata) NEW_WITH_TXN_INDEX_EMPTY.invokeExact(id, m.getStartOffset(), m.getEndOffset(),
                m.getMaxTimestampMs(), m.getBrokerId(), m.getEventTimestampMs(), m.getSegmentSizeInBytes(), custom,
                state(m.getState()), epochs, m.getTxnIndexEmpty());
        } catch (Throwable t) {
            throw new IllegalStateException("RemoteLogSegmentMetadata's constructor failed", t);
        }
    }

    /*
     * Kafka 4.0 added whether a segment's transaction index is empty
     * (isTxnIdxEmpty, and a constructor taking it); Kafka 3.9's
     * RemoteLogSegmentMetadata has neither. The plugin is compiled against
     * the newer API and looks both up once, so that one jar runs on both:
     * on 3.9 a segment is stored as "transaction index not known to be
     * empty" (txn_index_empty false), the answer that never skips an index.
     */
    private static final MethodHandle IS_TXN_INDEX_EMPTY = lookup(l -> l.findVirtual(RemoteLogSegmentMetadata.class,
        "isTxnIdxEmpty", MethodType.methodType(boolean.class)));
    private static final MethodHandle NEW_WITH_TXN_INDEX_EMPTY = lookup(l -> l.findConstructor(RemoteLogSegmentMetadata.class,
        MethodType.methodType(void.class, RemoteLogSegmentId.class, long.class, long.class, long.class, int.class, long.class,
            int.class, Optional.class, RemoteLogSegmentState.class, Map.class, boolean.class)));

    private interface Find {
        MethodHandle find(MethodHandles.Lookup l) throws NoSuchMethodException, IllegalAccessException;
    }

    /** The handle, or null when this Kafka's API lacks it. */
    private static MethodHandle lookup(Find find) {
        try {
            return find.find(MethodHandles.publicLookup());
        } catch (NoSuchMethodException | IllegalAccessException e) {
            return null;
        }
    }

    static boolean txnIndexEmpty(RemoteLogSegmentMetadata m) {
        if (IS_TXN_INDEX_EMPTY == null) {
            return false;
        }
        try {
            return (boolean) IS_TXN_INDEX_EMPTY.invokeExact(m);
        } catch (Throwable t) {
            throw new IllegalStateException("RemoteLogSegmentMetadata.isTxnIdxEmpty failed", t);
        }
    }

    static SegmentUpdate update(RemoteLogSegmentMetadataUpdate u) {
        SegmentUpdate.Builder b = SegmentUpdate.newBuilder()
            .setId(segmentId(u.remoteLogSegmentId()))
            .setEventTimestampMs(u.eventTimestampMs())
            .setState(state(u.state()))
            .setBrokerId(u.brokerId());
        u.customMetadata().ifPresent(c -> b.setCustomMetadata(ByteString.copyFrom(c.value())));
        return b.build();
    }

    static PartitionDelete partitionDelete(RemotePartitionDeleteMetadata d) {
        return PartitionDelete.newBuilder()
            .setTopicIdPartition(tp(d.topicIdPartition()))
            .setState(state(d.state()))
            .setEventTimestampMs(d.eventTimestampMs())
            .setBrokerId(d.brokerId())
            .build();
    }
}
