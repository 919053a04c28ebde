package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Optional;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentId;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.junit.jupiter.api.Test;

/** Verify's test of whether a segment holds an offset within a leader epoch (its tie between overlapping segments). */
class TbrlmmToolTest {
    @Test
    void holdsAnOffsetWithinItsEpochRangeOnly() {
        TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), 0, "t");
        // Epoch 1 over [100, 149], epoch 2 over [150, 199].
        RemoteLogSegmentMetadata s = new RemoteLogSegmentMetadata(new RemoteLogSegmentId(tp, Uuid.randomUuid()), 100, 199, 1, 1, 1, 1,
            Optional.empty(), RemoteLogSegmentState.COPY_SEGMENT_FINISHED, Map.of(1, 100L, 2, 150L));
        assertTrue(TbrlmmTool.holds(s, 1, 100));
        assertTrue(TbrlmmTool.holds(s, 1, 149));
        assertFalse(TbrlmmTool.holds(s, 1, 150), "epoch 2 from 150");
        assertTrue(TbrlmmTool.holds(s, 2, 150));
        assertTrue(TbrlmmTool.holds(s, 2, 199));
        assertFalse(TbrlmmTool.holds(s, 2, 200), "past the end");
        assertFalse(TbrlmmTool.holds(s, 1, 99), "before the start");
        assertFalse(TbrlmmTool.holds(s, 3, 160), "an epoch it does not carry");
    }
}
