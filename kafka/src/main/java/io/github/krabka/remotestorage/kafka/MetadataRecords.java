package io.github.krabka.remotestorage.kafka;

import java.nio.ByteBuffer;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;

/**
 * The records of Kafka's topic-based metadata manager's topic, read with
 * Kafka's own serde (RemoteLogMetadataSerde of the installation's
 * kafka-storage). Each value is a frame: frame version, record type and
 * record version (unsigned varints), then the record. The header is read
 * first, so that a record of a version this Kafka's serde does not know is
 * named as such instead of as a parse failure.
 */
final class MetadataRecords {
    /** The topic-based manager's topic. */
    static final String TOPIC = "__remote_log_metadata";
    /** The only frame version Kafka's metadata serde writes and reads (AbstractApiMessageSerde). */
    static final int FRAME_VERSION = 1;

    /** A record whose frame, type or version this Kafka's serde does not know. */
    static final class UnknownVersionException extends Exception {
        UnknownVersionException(String msg) {
            super(msg);
        }
    }

    /** A record that cannot be parsed although its header is known. */
    static final class UnparsableException extends Exception {
        UnparsableException(String msg, Throwable cause) {
            super(msg, cause);
        }
    }

    /** Exposes the serde's record types: newApiMessage is protected. */
    private static final class Serde extends RemoteLogMetadataSerde {
        ApiMessage message(short type) {
            return newApiMessage(type);
        }
    }

    private final Serde serde = new Serde();
    private final String topic;

    MetadataRecords(String topic) {
        this.topic = topic;
    }

    String at(int partition, long offset) {
        return at(topic, partition, offset);
    }

    static String at(String topic, int partition, long offset) {
        return topic + " partition " + partition + " offset " + offset;
    }

    /**
     * An unsigned varint of the frame header (Kafka's encoding: 7 bits a
     * byte, low first; at most 5 bytes). The class that reads it moved
     * between Kafka lines, so it is read here.
     */
    static int varint(ByteBuffer b) {
        int value = 0;
        for (int shift = 0; shift < 35; shift += 7) {
            int x = b.get() & 0xff;
            value |= (x & 0x7f) << shift;
            if ((x & 0x80) == 0) {
                return value;
            }
        }
        throw new IllegalArgumentException("a varint longer than 5 bytes");
    }

    /** The record, one of the three kinds a manager applies. */
    RemoteLogMetadata decode(int partition, long offset, byte[] value) throws UnknownVersionException, UnparsableException {
        if (value == null) {
            throw new UnparsableException(at(partition, offset) + ": the record has no value", null);
        }
        ByteBuffer b = ByteBuffer.wrap(value);
        int frame;
        int type;
        int version;
        try {
            frame = varint(b);
            type = varint(b);
            version = varint(b);
        } catch (RuntimeException e) {
            throw new UnparsableException(at(partition, offset) + ": its header (frame version, type, version) cannot be read: " + e, e);
        }
        String kafka = KafkaLines.running();
        if (frame != FRAME_VERSION) {
            throw new UnknownVersionException(at(partition, offset) + ": frame version " + frame + ", but the serde of Kafka "
                + kafka + " reads frame version " + FRAME_VERSION + " only: run the tool with the Kafka libraries of the line that wrote the topic");
        }
        ApiMessage message;
        try {
            message = type > Short.MAX_VALUE ? null : serde.message((short) type);
        } catch (RuntimeException e) {
            message = null;
        }
        if (message == null) {
            throw new UnknownVersionException(at(partition, offset) + ": record type " + type + " (version " + version
                + "), which the serde of Kafka " + kafka + " does not know: run the tool with the Kafka libraries of the line that wrote the topic");
        }
        String name = message.getClass().getSimpleName();
        if (version < message.lowestSupportedVersion() || version > message.highestSupportedVersion()) {
            throw new UnknownVersionException(at(partition, offset) + ": " + name + " version " + version + ", but the serde of Kafka "
                + kafka + " reads versions " + message.lowestSupportedVersion() + " to " + message.highestSupportedVersion()
                + ": run the tool with the Kafka libraries of the line that wrote the topic");
        }
        RemoteLogMetadata m;
        try {
            m = serde.deserialize(value);
        } catch (RuntimeException e) {
            throw new UnparsableException(at(partition, offset) + ": " + name + " version " + version + " cannot be parsed: " + e, e);
        }
        if (!(m instanceof RemoteLogSegmentMetadata || m instanceof RemoteLogSegmentMetadataUpdate
            || m instanceof RemotePartitionDeleteMetadata)) {
            throw new UnparsableException(at(partition, offset) + ": a " + name + ", which no metadata manager's operation applies", null);
        }
        return m;
    }
}
