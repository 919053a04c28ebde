package io.github.krabka.remotestorage.kafka;

import com.google.protobuf.InvalidProtocolBufferException;
import io.github.krabka.remotestorage.v1.AddSegmentRequest;
import io.github.krabka.remotestorage.v1.CaughtUpRequest;
import io.github.krabka.remotestorage.v1.EpochEndOffsetRequest;
import io.github.krabka.remotestorage.v1.EpochEndOffsetResponse;
import io.github.krabka.remotestorage.v1.ErrorDetail;
import io.github.krabka.remotestorage.v1.ErrorKind;
import io.github.krabka.remotestorage.v1.GetSegmentRequest;
import io.github.krabka.remotestorage.v1.GetSegmentResponse;
import io.github.krabka.remotestorage.v1.ListSegmentsRequest;
import io.github.krabka.remotestorage.v1.ListSegmentsResponse;
import io.github.krabka.remotestorage.v1.NextSegmentWithTxnIndexRequest;
import io.github.krabka.remotestorage.v1.NextSegmentWithTxnIndexResponse;
import io.github.krabka.remotestorage.v1.OnPartitionLeadershipChangesRequest;
import io.github.krabka.remotestorage.v1.OnStopPartitionsRequest;
import io.github.krabka.remotestorage.v1.PutPartitionDeleteRequest;
import io.github.krabka.remotestorage.v1.RemoteLogMetadataServiceGrpc.RemoteLogMetadataServiceBlockingStub;
import io.github.krabka.remotestorage.v1.RemoteLogSizeRequest;
import io.github.krabka.remotestorage.v1.RemoteLogSizeResponse;
import io.github.krabka.remotestorage.v1.Segment;
import io.github.krabka.remotestorage.v1.UpdateSegmentRequest;
import io.grpc.ChannelCredentials;
import io.grpc.ConnectivityState;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.protobuf.StatusProto;
import java.io.File;
import java.io.IOException;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadataManager;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link RemoteLogMetadataManager} that keeps the metadata in PostgreSQL
 * through rlmmd, the remotestorage gRPC service.
 *
 * <p>Broker properties:
 * <pre>
 * remote.log.storage.system.enable=true
 * remote.log.metadata.manager.class.name=io.github.krabka.remotestorage.kafka.RlmmdRemoteLogMetadataManager
 * remote.log.metadata.manager.class.path=/opt/remotestorage/remotestorage-kafka.jar
 * rlmm.config.rlmmd.target=127.0.0.1:9190
 * </pre>
 *
 * <p>Every call has a deadline ({@link RlmmdConfig#CALL_TIMEOUT_MS}).
 * {@code configure} fails unless rlmmd answers at the target. The writes are done when their future is returned (the broker
 * waits on it at once). Failures become {@link RemoteStorageException};
 * an update of a segment rlmmd does not know becomes
 * {@link RemoteResourceNotFoundException}. {@link #isReady} is rlmmd's
 * CaughtUp, and false while rlmmd or its database does not answer: the
 * broker's copy, expiration and follower tasks then skip their run, and
 * resume once it is back.
 *
 * <p>With {@link RlmmdConfig#MIRROR_ENABLE} on, each change also goes to
 * Kafka's topic-based manager's topic after the store took it
 * ({@link TopicMirror}), and isReady is false while earlier changes wait to
 * be written there.
 */
public class RlmmdRemoteLogMetadataManager implements RemoteLogMetadataManager {
    private static final Logger log = LoggerFactory.getLogger(RlmmdRemoteLogMetadataManager.class);

    private volatile RlmmdConfig config;
    private volatile RlmmdChannel channel;
    private volatile RlmmdClient client;
    /** What the log lines name as rlmmd: the sidecar's target, or the embedded child's socket. */
    private volatile String target;
    /** The child of the embedded mode; null in the sidecar mode. */
    private volatile EmbeddedRlmmd embedded;
    /** Set when {@link RlmmdConfig#MIRROR_ENABLE} is on. */
    private volatile TopicMirror mirror;

    /** The partitions the broker assigned to this manager: true for a leader, false for a follower. */
    private final Map<TopicIdPartition, Boolean> assigned = new ConcurrentHashMap<>();
    /** Whether the last isReady call reached rlmmd; a change is logged once. */
    private final AtomicBoolean reachable = new AtomicBoolean(true);
    /**
     * Set when the channel connects again after it was connected: rlmmd may
     * have restarted and forgotten the assignment, which the next call sends
     * again first. Kafka 3.9 brokers never call isReady, so a reconnection
     * is the only sign they give.
     */
    private final AtomicBoolean reassign = new AtomicBoolean(false);
    /** Held while the assignment changes or is sent, so that a re-send never undoes a newer change. */
    private final Object assignment = new Object();

    @Override
    public void configure(Map<String, ?> configs) {
        RlmmdConfig cfg = new RlmmdConfig(configs);
        if (cfg.embedded()) {
            configureEmbedded(cfg, configs);
            return;
        }
        ChannelCredentials creds = credentials(cfg);
        // Building the channel does not connect: the first call does.
        RlmmdChannel rc;
        try {
            rc = RlmmdChannel.open(cfg.target(), creds, cfg.callTimeoutMs());
        } catch (RuntimeException e) {
            throw new ConfigException(RlmmdConfig.TARGET + " " + cfg.target() + ": " + e.getMessage()
                + (cfg.target().startsWith("unix:") ? " (a unix socket needs Netty's native transport: Linux on x86_64 or aarch64)" : ""));
        }
        ManagedChannel ch = rc.channel();
        RlmmdClient c = new RlmmdClient(ch, cfg.callTimeoutMs(), cfg.listTimeoutMs());
        watchReconnections(ch, ch.getState(false), false);
        try {
            probe(cfg, c);
        } catch (ConfigException e) {
            rc.close();
            throw e;
        }
        openMirror(cfg, configs, rc);
        this.config = cfg;
        this.target = cfg.target();
        this.channel = rc;
        this.client = c;
        log.info("remotestorage: metadata in rlmmd at {} (call deadline {} ms)", cfg.target(), cfg.callTimeoutMs());
        warnUntestedLine();
    }

    /**
     * The embedded mode: the plugin runs rlmmd as its child
     * ({@link EmbeddedRlmmd}) and calls it on its unix socket. configure
     * returns once the child serves or waits for the database; it fails
     * when the child cannot start (no binary for the platform, an unusable
     * directory, another version) or exits before serving (its error).
     */
    private void configureEmbedded(RlmmdConfig cfg, Map<String, ?> configs) {
        if (cfg.tlsCaFile() != null || cfg.tlsCertFile() != null) {
            throw new ConfigException(RlmmdConfig.PREFIX + RlmmdConfig.TLS_CA_FILE + " and the other rlmmd.tls.* keys are for the "
                + "sidecar mode (" + RlmmdConfig.PREFIX + RlmmdConfig.TARGET + "); the embedded mode's rlmmd listens on a unix "
                + "socket only the broker's user can reach");
        }
        Object brokerId = configs.get("broker.id");
        EmbeddedRlmmd e = EmbeddedRlmmd.start(cfg, brokerId == null ? "unknown" : brokerId.toString());
        RlmmdChannel rc;
        try {
            rc = RlmmdChannel.open(e.target(), InsecureChannelCredentials.create(), cfg.callTimeoutMs());
        } catch (RuntimeException ex) {
            e.close();
            throw new ConfigException("remotestorage: the embedded rlmmd's socket " + e.target() + ": " + ex.getMessage()
                + " (a unix socket needs Netty's native transport: Linux on x86_64 or aarch64)");
        }
        ManagedChannel ch = rc.channel();
        RlmmdClient c = new RlmmdClient(ch, cfg.callTimeoutMs(), cfg.listTimeoutMs());
        watchReconnections(ch, ch.getState(false), false);
        e.liveness(() -> answers(c, cfg.livenessTimeoutMs()));
        e.onServing(() -> {
            // A new child knows no assignment, and the channel may be
            // backing off from the socket the last one left.
            reassign.set(true);
            ch.resetConnectBackoff();
        });
        try {
            openMirror(cfg, configs, rc);
        } catch (RuntimeException ex) {
            e.close();
            throw ex;
        }
        this.config = cfg;
        this.target = e.target() + " (embedded)";
        this.embedded = e;
        this.channel = rc;
        this.client = c;
        log.info("remotestorage: metadata in PostgreSQL through the embedded rlmmd on {} (call deadline {} ms)", e.target(), cfg.callTimeoutMs());
        warnUntestedLine();
    }

    /** Whether rlmmd answers the probe within timeoutMs, with an answer or with an error of its own. */
    private static boolean answers(RlmmdClient c, long timeoutMs) {
        try {
            c.call(timeoutMs).caughtUp(CaughtUpRequest.newBuilder().setTopicIdPartition(PROBE_TP).build());
            return true;
        } catch (StatusRuntimeException e) {
            return detail(e).getKind() != ErrorKind.ERROR_KIND_UNSPECIFIED;
        }
    }

    private void openMirror(RlmmdConfig cfg, Map<String, ?> configs, RlmmdChannel rc) {
        if (cfg.mirrorEnabled()) {
            try {
                this.mirror = TopicMirror.open(configs);
            } catch (RuntimeException e) {
                rc.close();
                throw e;
            }
        }
    }

    private static void warnUntestedLine() {
        String kafka = KafkaLines.running();
        if (!KafkaLines.tested(kafka)) {
            log.warn("remotestorage: this broker runs Kafka {}, outside the lines the plugin is tested on ({}); it loads and runs as on those",
                kafka, KafkaLines.RANGE);
        }
    }

    /** Plaintext, TLS, or mutual TLS, as the rlmmd.tls.* keys say. */
    static ChannelCredentials credentials(RlmmdConfig cfg) {
        try {
            if (cfg.tlsCaFile() == null) {
                return InsecureChannelCredentials.create();
            }
            TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder().trustManager(new File(cfg.tlsCaFile()));
            if (cfg.tlsCertFile() != null) {
                b.keyManager(new File(cfg.tlsCertFile()), new File(cfg.tlsKeyFile()));
            }
            return b.build();
        } catch (IOException | RuntimeException e) {
            throw new ConfigException("rlmmd TLS files (" + RlmmdConfig.TLS_CA_FILE + ", " + RlmmdConfig.TLS_CERT_FILE
                + ", " + RlmmdConfig.TLS_KEY_FILE + "): " + e.getMessage());
        }
    }

    /** The partition of configure's probe: rlmmd consumes no such partition, so it answers from memory. */
    private static final io.github.krabka.remotestorage.v1.TopicIdPartition PROBE_TP = io.github.krabka.remotestorage.v1.TopicIdPartition
        .newBuilder().setTopicId(com.google.protobuf.ByteString.copyFrom(new byte[16])).setTopic("remotestorage-configure-probe").build();

    /**
     * Fails configure, with a message naming the target and what is wrong,
     * unless an rlmmd serving this plugin's service answers there within
     * the call deadline: so that a wrong or missing rlmmd stops the broker
     * at start-up instead of failing its first copy. One CaughtUp of a
     * partition rlmmd does not consume (answered from memory). An rlmmd
     * whose database is down answers with its own error: it is there, and
     * isReady keeps tiered storage paused until the database is back.
     */
    private static void probe(RlmmdConfig cfg, RlmmdClient c) {
        try {
            c.call().caughtUp(CaughtUpRequest.newBuilder().setTopicIdPartition(PROBE_TP).build());
        } catch (StatusRuntimeException e) {
            if (e.getStatus().getCode() == Status.Code.UNIMPLEMENTED) {
                throw new ConfigException(RlmmdConfig.TARGET + " " + cfg.target() + ": the server there does not serve "
                    + "remotestorage.v1.RemoteLogMetadataService (" + brief(e) + "): not rlmmd, or an rlmmd of an incompatible version");
            }
            if (detail(e).getKind() == ErrorKind.ERROR_KIND_UNSPECIFIED) {
                throw new ConfigException(RlmmdConfig.TARGET + " " + cfg.target() + ": no rlmmd answers there within "
                    + cfg.callTimeoutMs() + " ms (" + brief(e) + ")");
            }
            log.warn("remotestorage: rlmmd at {} answers, but not for its database yet: {}", cfg.target(), brief(e));
        }
    }

    private RlmmdClient rlmmd() {
        RlmmdClient c = client;
        if (c == null) {
            throw new IllegalStateException("RlmmdRemoteLogMetadataManager used before configure()");
        }
        EmbeddedRlmmd e = embedded;
        if (e != null) {
            e.requireServing();
        }
        if (reassign.compareAndSet(true, false)) {
            resendAssignment(c);
        }
        return c;
    }

    /** Sets {@link #reassign} each time the channel is ready again after it was ready once. */
    private void watchReconnections(ManagedChannel ch, ConnectivityState last, boolean wasReady) {
        ch.notifyWhenStateChanged(last, () -> {
            ConnectivityState now = ch.getState(false);
            if (now == ConnectivityState.SHUTDOWN) {
                return;
            }
            boolean ready = now == ConnectivityState.READY;
            if (ready && wasReady) {
                reassign.set(true);
            }
            watchReconnections(ch, now, wasReady || ready);
        });
    }

    /** Sends every assigned partition again; on failure the next call retries. */
    private void resendAssignment(RlmmdClient c) {
        synchronized (assignment) {
            Set<TopicIdPartition> leaders = new HashSet<>();
            Set<TopicIdPartition> followers = new HashSet<>();
            assigned.forEach((tp, leader) -> (leader ? leaders : followers).add(tp));
            if (leaders.isEmpty() && followers.isEmpty()) {
                return;
            }
            if (!sendAssignment(c, leaders, followers)) {
                reassign.set(true);
            } else {
                log.info("remotestorage: rlmmd at {} connected again: sent the assignment of {} leaders and {} followers again",
                    target, leaders.size(), followers.size());
            }
        }
    }

    @Override
    public CompletableFuture<Void> addRemoteLogSegmentMetadata(RemoteLogSegmentMetadata m) throws RemoteStorageException {
        return write(m, "add segment " + m.remoteLogSegmentId(),
            c -> c.addSegment(AddSegmentRequest.newBuilder().setSegment(Convert.segment(m)).build()));
    }

    @Override
    public CompletableFuture<Void> updateRemoteLogSegmentMetadata(RemoteLogSegmentMetadataUpdate u) throws RemoteStorageException {
        return write(u, "update segment " + u.remoteLogSegmentId() + " to " + u.state(),
            c -> c.updateSegment(UpdateSegmentRequest.newBuilder().setUpdate(Convert.update(u)).build()));
    }

    @Override
    public CompletableFuture<Void> putRemotePartitionDeleteMetadata(RemotePartitionDeleteMetadata d) throws RemoteStorageException {
        return write(d, "partition " + d.topicIdPartition() + " to " + d.state(),
            c -> c.putPartitionDelete(PutPartitionDeleteRequest.newBuilder().setPartitionDelete(Convert.partitionDelete(d)).build()));
    }

    /**
     * One change: to the store through rlmmd, then, with the mirror on, to
     * the topic-based manager's topic. Done when the future is returned.
     */
    private CompletableFuture<Void> write(RemoteLogMetadata m, String what,
                                          Consumer<RemoteLogMetadataServiceBlockingStub> call) {
        TopicMirror mi = mirror;
        try {
            if (mi != null) {
                mi.before(what);
            }
            call.accept(rlmmd().call());
            if (mi != null) {
                mi.after(m, what);
            }
            return CompletableFuture.completedFuture(null);
        } catch (StatusRuntimeException e) {
            return CompletableFuture.failedFuture(error(what, e));
        } catch (RemoteStorageException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public Optional<RemoteLogSegmentMetadata> remoteLogSegmentMetadata(TopicIdPartition tp, int epochForOffset, long offset)
        throws RemoteStorageException {
        try {
            GetSegmentResponse r = rlmmd().call().getSegment(GetSegmentRequest.newBuilder()
                .setTopicIdPartition(Convert.tp(tp)).setEpoch(epochForOffset).setOffset(offset).build());
            requireNotDeleted(tp, r.getPartitionDeleted());
            return r.hasSegment() ? Optional.of(Convert.segment(r.getSegment())) : Optional.empty();
        } catch (StatusRuntimeException e) {
            throw error("segment of " + tp + " at epoch " + epochForOffset + " offset " + offset, e);
        }
    }

    /**
     * Kafka's meaning: the end of {@code leaderEpoch} inside the finished
     * segments, which the copy task resumes after. rlmmd's EpochEndOffset,
     * not its HighestOffsetForEpoch (the largest end offset of the segments
     * carrying the epoch, which may reach into a later epoch).
     */
    @Override
    public Optional<Long> highestOffsetForEpoch(TopicIdPartition tp, int leaderEpoch) throws RemoteStorageException {
        try {
            EpochEndOffsetResponse r = rlmmd().call().epochEndOffset(EpochEndOffsetRequest.newBuilder()
                .setTopicIdPartition(Convert.tp(tp)).setEpoch(leaderEpoch).build());
            requireNotDeleted(tp, r.getPartitionDeleted());
            return r.getFound() ? Optional.of(r.getOffset()) : Optional.empty();
        } catch (StatusRuntimeException e) {
            throw error("highest offset of " + tp + " for epoch " + leaderEpoch, e);
        }
    }

    @Override
    public Iterator<RemoteLogSegmentMetadata> listRemoteLogSegments(TopicIdPartition tp) throws RemoteStorageException {
        return list(tp, ListSegmentsRequest.newBuilder().setTopicIdPartition(Convert.tp(tp)).build(), "segments of " + tp);
    }

    @Override
    public Iterator<RemoteLogSegmentMetadata> listRemoteLogSegments(TopicIdPartition tp, int leaderEpoch) throws RemoteStorageException {
        return list(tp, ListSegmentsRequest.newBuilder().setTopicIdPartition(Convert.tp(tp)).setEpoch(leaderEpoch).build(),
            "segments of " + tp + " for epoch " + leaderEpoch);
    }

    /**
     * Streams the list. The first batch is read before returning, so that a
     * failure to start is a RemoteStorageException, and a partition whose
     * deletion finished a RemoteResourceNotFoundException; a failure after
     * that surfaces from the iterator as a KafkaException caused by one.
     */
    private Iterator<RemoteLogSegmentMetadata> list(TopicIdPartition tp, ListSegmentsRequest req, String what) throws RemoteStorageException {
        Iterator<ListSegmentsResponse> batches;
        ListSegmentsResponse firstBatch;
        try {
            batches = rlmmd().list(req);
            firstBatch = batches.hasNext() ? batches.next() : ListSegmentsResponse.getDefaultInstance();
        } catch (StatusRuntimeException e) {
            throw error(what, e);
        }
        requireNotDeleted(tp, firstBatch.getPartitionDeleted());
        Iterator<Segment> first = firstBatch.getSegmentsList().iterator();
        return new Iterator<>() {
            private Iterator<Segment> batch = first;

            @Override
            public boolean hasNext() {
                try {
                    while (!batch.hasNext() && batches.hasNext()) {
                        batch = batches.next().getSegmentsList().iterator();
                    }
                } catch (StatusRuntimeException e) {
                    throw new KafkaException(error(what, e));
                }
                return batch.hasNext();
            }

            @Override
            public RemoteLogSegmentMetadata next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                return Convert.segment(batch.next());
            }
        };
    }

    @Override
    public long remoteLogSize(TopicIdPartition tp, int leaderEpoch) throws RemoteStorageException {
        try {
            RemoteLogSizeResponse r = rlmmd().call().remoteLogSize(RemoteLogSizeRequest.newBuilder()
                .setTopicIdPartition(Convert.tp(tp)).setEpoch(leaderEpoch).build());
            requireNotDeleted(tp, r.getPartitionDeleted());
            return r.getSizeBytes();
        } catch (StatusRuntimeException e) {
            throw error("remote log size of " + tp + " for epoch " + leaderEpoch, e);
        }
    }

    // Not @Override: Kafka 3.9's interface lacks it (4.0 added it), and the
    // plugin compiles against 3.9's too (docs/KAFKA.md).
    public Optional<RemoteLogSegmentMetadata> nextSegmentWithTxnIndex(TopicIdPartition tp, int epoch, long offset)
        throws RemoteStorageException {
        try {
            NextSegmentWithTxnIndexResponse r = rlmmd().call().nextSegmentWithTxnIndex(NextSegmentWithTxnIndexRequest.newBuilder()
                .setTopicIdPartition(Convert.tp(tp)).setEpoch(epoch).setOffset(offset).build());
            requireNotDeleted(tp, r.getPartitionDeleted());
            return r.hasSegment() ? Optional.of(Convert.segment(r.getSegment())) : Optional.empty();
        } catch (StatusRuntimeException e) {
            throw error("next segment with a transaction index of " + tp + " at epoch " + epoch + " offset " + offset, e);
        }
    }

    /**
     * rlmmd's CaughtUp; false when rlmmd or its database does not answer. A
     * partition the broker assigned but rlmmd does not consume (rlmmd
     * restarted since, or the assignment call failed) is assigned again here:
     * rlmmd loads it, and a later call answers true.
     */
    // Not @Override: Kafka 3.9's interface lacks it (4.0 added it).
    public boolean isReady(TopicIdPartition tp) {
        TopicMirror mi = mirror;
        if (mi != null && !mi.drain()) {
            return false; // changes the topic has not taken yet: tiered storage pauses until it takes them
        }
        try {
            boolean ready = rlmmd().call().caughtUp(CaughtUpRequest.newBuilder().setTopicIdPartition(Convert.tp(tp)).build()).getCaughtUp();
            if (reachable.compareAndSet(false, true)) {
                log.info("remotestorage: rlmmd at {} answers again", target);
            }
            if (!ready) {
                synchronized (assignment) {
                    Boolean leader = assigned.get(tp);
                    if (leader != null) {
                        sendAssignment(rlmmd(), leader ? Set.of(tp) : Set.of(), leader ? Set.of() : Set.of(tp));
                    }
                }
            }
            return ready;
        } catch (StatusRuntimeException e) {
            ErrorDetail d = detail(e);
            if (d.getKind() == ErrorKind.ERROR_KIND_NOT_READY) {
                return false; // loading the partition
            }
            if (reachable.compareAndSet(true, false)) {
                log.warn("remotestorage: rlmmd at {} cannot say whether {} is caught up; tiered storage pauses until it can: {}",
                    target, tp, brief(e));
            }
            return false;
        }
    }

    @Override
    public void onPartitionLeadershipChanges(Set<TopicIdPartition> leaderPartitions, Set<TopicIdPartition> followerPartitions) {
        synchronized (assignment) {
            for (TopicIdPartition tp : leaderPartitions) {
                assigned.put(tp, true);
            }
            for (TopicIdPartition tp : followerPartitions) {
                assigned.put(tp, false);
            }
            RlmmdClient c;
            try {
                c = rlmmd();
            } catch (StatusRuntimeException e) {
                // The embedded child does not serve: the next call after it
                // is back sends the whole assignment.
                reassign.set(true);
                log.warn("remotestorage: the assignment of {} leaders and {} followers waits for rlmmd: {}",
                    leaderPartitions.size(), followerPartitions.size(), brief(e));
                return;
            }
            sendAssignment(c, leaderPartitions, followerPartitions);
        }
    }

    /** One OnPartitionLeadershipChanges; false (and a warning) when rlmmd did not take it. */
    private boolean sendAssignment(RlmmdClient c, Set<TopicIdPartition> leaders, Set<TopicIdPartition> followers) {
        OnPartitionLeadershipChangesRequest.Builder b = OnPartitionLeadershipChangesRequest.newBuilder();
        leaders.forEach(tp -> b.addLeaders(Convert.tp(tp)));
        followers.forEach(tp -> b.addFollowers(Convert.tp(tp)));
        try {
            c.call().onPartitionLeadershipChanges(b.build());
            return true;
        } catch (StatusRuntimeException e) {
            // isReady, or the next call after a reconnection, assigns them
            // again: until then they are not ready.
            log.warn("remotestorage: rlmmd at {} did not take the assignment of {} leaders and {} followers; it is sent again later: {}",
                target, leaders.size(), followers.size(), brief(e));
            return false;
        }
    }

    @Override
    public void onStopPartitions(Set<TopicIdPartition> partitions) {
        OnStopPartitionsRequest.Builder b = OnStopPartitionsRequest.newBuilder();
        partitions.forEach(tp -> b.addPartitions(Convert.tp(tp)));
        synchronized (assignment) {
            partitions.forEach(assigned::remove);
            try {
                rlmmd().call().onStopPartitions(b.build());
            } catch (StatusRuntimeException e) {
                log.warn("remotestorage: rlmmd at {} did not take the stop of {} partitions: {}",
                    target, partitions.size(), brief(e));
            }
        }
    }

    /**
     * Closes the channel to rlmmd: waits up to 2 s (the call deadline when
     * shorter) for calls in flight, cancels the rest, and returns once every
     * thread the plugin started has ended, Netty's global event executor
     * included (about one second), at most 3 s later. Kafka's tests check
     * that no thread outlives a closed manager.
     */
    @Override
    public void close() throws IOException {
        TopicMirror mi = mirror;
        if (mi != null) {
            mirror = null;
            mi.close();
        }
        RlmmdChannel ch = channel;
        channel = null;
        if (ch != null) {
            ch.close();
        }
        EmbeddedRlmmd e = embedded;
        embedded = null;
        if (e != null) {
            e.close();
        }
    }

    /** The embedded mode's child; null in the sidecar mode. For tests. */
    EmbeddedRlmmd embeddedRlmmd() {
        return embedded;
    }

    /**
     * Kafka's managers answer every read of a partition whose deletion
     * finished (DELETE_PARTITION_FINISHED) with RemoteResourceNotFoundException;
     * rlmmd says so in the read's answer (partition_deleted).
     */
    private static void requireNotDeleted(TopicIdPartition tp, boolean deleted) throws RemoteResourceNotFoundException {
        if (deleted) {
            throw new RemoteResourceNotFoundException("rlmmd: partition " + tp + " is deleted (DELETE_PARTITION_FINISHED)");
        }
    }

    /** A status in one line: its code and description, without the cause's stack. */
    static String brief(StatusRuntimeException e) {
        Status st = e.getStatus();
        return st.getCode() + (st.getDescription() == null ? "" : ": " + st.getDescription());
    }

    /** The ErrorDetail rlmmd put in a status, or an empty one. */
    static ErrorDetail detail(StatusRuntimeException e) {
        com.google.rpc.Status st = StatusProto.fromThrowable(e);
        if (st != null) {
            for (com.google.protobuf.Any any : st.getDetailsList()) {
                if (any.is(ErrorDetail.class)) {
                    try {
                        return any.unpack(ErrorDetail.class);
                    } catch (InvalidProtocolBufferException ignored) {
                        // fall through: no usable detail
                    }
                }
            }
        }
        return ErrorDetail.getDefaultInstance();
    }

    /**
     * The exception for a failed call: RemoteResourceNotFoundException for
     * an unknown segment, else RemoteStorageException. The message names the
     * call, the status, the library's error and whether a failed write may
     * still have been applied.
     */
    static RemoteStorageException error(String what, StatusRuntimeException e) {
        ErrorDetail d = detail(e);
        Status st = e.getStatus();
        String msg = "rlmmd: " + what + ": " + st.getCode()
            + (d.getKind() == ErrorKind.ERROR_KIND_UNSPECIFIED ? "" : " (" + d.getKind() + ")")
            + (d.getOutcomeUnknown() ? " [outcome unknown: the write may have been applied]" : "")
            + (st.getDescription() == null ? "" : ": " + st.getDescription());
        if (d.getKind() == ErrorKind.ERROR_KIND_SEGMENT_NOT_FOUND || (st.getCode() == Status.Code.NOT_FOUND && d.getKind() == ErrorKind.ERROR_KIND_UNSPECIFIED)) {
            return new RemoteResourceNotFoundException(msg, e);
        }
        return new RemoteStorageException(msg, e);
    }
}
