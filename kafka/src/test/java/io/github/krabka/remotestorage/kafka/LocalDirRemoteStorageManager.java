package io.github.krabka.remotestorage.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

/**
 * A RemoteStorageManager that keeps segments in a local directory, one
 * directory per segment id (Kafka's LocalTieredStorage lives in a test jar
 * Maven Central does not serve for 4.4.0). It counts what it does, for the
 * tests to assert on.
 */
public class LocalDirRemoteStorageManager implements RemoteStorageManager {
    /**
     * The segment ids uploaded, by "topicId-partition:startOffset-endOffset",
     * in the order of their uploads: a range uploaded twice holds two ids.
     */
    public static final Map<String, List<UUID>> COPIES = new ConcurrentHashMap<>();
    public static final AtomicLong FETCHES = new AtomicLong();
    public static final AtomicLong DELETES = new AtomicLong();

    private Path root;

    @Override
    public void configure(Map<String, ?> configs) {
        Object dir = configs.get("dir");
        if (dir == null) {
            throw new IllegalArgumentException("LocalDirRemoteStorageManager needs rsm.config.dir");
        }
        root = Path.of(dir.toString());
        try {
            Files.createDirectories(root);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Path dirOf(RemoteLogSegmentMetadata m) {
        return root.resolve(m.topicIdPartition().topicId() + "-" + m.topicIdPartition().partition())
            .resolve(m.remoteLogSegmentId().id().toString());
    }

    public static String rangeKey(RemoteLogSegmentMetadata m) {
        return m.topicIdPartition().topicId() + "-" + m.topicIdPartition().partition() + ":" + m.startOffset() + "-" + m.endOffset();
    }

    @Override
    public Optional<RemoteLogSegmentMetadata.CustomMetadata> copyLogSegmentData(RemoteLogSegmentMetadata m, LogSegmentData data)
        throws RemoteStorageException {
        Path dir = dirOf(m);
        try {
            Files.createDirectories(dir);
            Files.copy(data.logSegment(), dir.resolve("log"), StandardCopyOption.REPLACE_EXISTING);
            Files.copy(data.offsetIndex(), dir.resolve("offset"), StandardCopyOption.REPLACE_EXISTING);
            Files.copy(data.timeIndex(), dir.resolve("time"), StandardCopyOption.REPLACE_EXISTING);
            if (data.transactionIndex().isPresent()) {
                Files.copy(data.transactionIndex().get(), dir.resolve("txn"), StandardCopyOption.REPLACE_EXISTING);
            }
            Files.copy(data.producerSnapshotIndex(), dir.resolve("producer"), StandardCopyOption.REPLACE_EXISTING);
            ByteBuffer epochs = data.leaderEpochIndex().duplicate();
            try (FileChannel ch = FileChannel.open(dir.resolve("epoch"), StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
                while (epochs.hasRemaining()) {
                    ch.write(epochs);
                }
            }
        } catch (IOException e) {
            throw new RemoteStorageException("copy " + m.remoteLogSegmentId(), e);
        }
        Uuid id = m.remoteLogSegmentId().id();
        COPIES.computeIfAbsent(rangeKey(m), k -> new CopyOnWriteArrayList<>())
            .add(new UUID(id.getMostSignificantBits(), id.getLeastSignificantBits()));
        return Optional.empty();
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata m, int startPosition) throws RemoteStorageException {
        return fetchLogSegment(m, startPosition, Integer.MAX_VALUE);
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata m, int startPosition, int endPosition) throws RemoteStorageException {
        Path log = dirOf(m).resolve("log");
        try {
            FileChannel ch = FileChannel.open(log, StandardOpenOption.READ);
            long end = Math.min(ch.size(), endPosition == Integer.MAX_VALUE ? ch.size() : (long) endPosition + 1);
            ch.position(startPosition);
            FETCHES.incrementAndGet();
            InputStream in = Channels.newInputStream(ch);
            return new java.io.FilterInputStream(in) {
                private long left = Math.max(0, end - startPosition);

                @Override
                public int read() throws IOException {
                    if (left <= 0) {
                        return -1;
                    }
                    int b = super.read();
                    if (b >= 0) {
                        left--;
                    }
                    return b;
                }

                @Override
                public int read(byte[] buf, int off, int len) throws IOException {
                    if (left <= 0) {
                        return -1;
                    }
                    int n = super.read(buf, off, (int) Math.min(len, left));
                    if (n > 0) {
                        left -= n;
                    }
                    return n;
                }
            };
        } catch (java.nio.file.NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("no segment " + m.remoteLogSegmentId(), e);
        } catch (IOException e) {
            throw new RemoteStorageException("fetch " + m.remoteLogSegmentId(), e);
        }
    }

    @Override
    public InputStream fetchIndex(RemoteLogSegmentMetadata m, IndexType type) throws RemoteStorageException {
        String name;
        switch (type) {
            case OFFSET:
                name = "offset";
                break;
            case TIMESTAMP:
                name = "time";
                break;
            case TRANSACTION:
                name = "txn";
                break;
            case PRODUCER_SNAPSHOT:
                name = "producer";
                break;
            case LEADER_EPOCH:
                name = "epoch";
                break;
            default:
                throw new RemoteStorageException("unknown index type " + type);
        }
        Path p = dirOf(m).resolve(name);
        try {
            return Files.newInputStream(p);
        } catch (java.nio.file.NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("no " + name + " index of " + m.remoteLogSegmentId(), e);
        } catch (IOException e) {
            throw new RemoteStorageException("fetch " + name + " index of " + m.remoteLogSegmentId(), e);
        }
    }

    @Override
    public void deleteLogSegmentData(RemoteLogSegmentMetadata m) throws RemoteStorageException {
        Path dir = dirOf(m);
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) files.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new RemoteStorageException("delete " + m.remoteLogSegmentId(), e);
        }
        DELETES.incrementAndGet();
    }

    @Override
    public void close() {
    }
}
