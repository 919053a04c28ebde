package io.github.krabka.remotestorage.kafka;

import io.github.krabka.remotestorage.v1.AddSegmentRequest;
import io.github.krabka.remotestorage.v1.EpochEndOffsetRequest;
import io.github.krabka.remotestorage.v1.EpochEndOffsetResponse;
import io.github.krabka.remotestorage.v1.ErrorDetail;
import io.github.krabka.remotestorage.v1.ErrorKind;
import io.github.krabka.remotestorage.v1.GetSegmentRequest;
import io.github.krabka.remotestorage.v1.GetSegmentResponse;
import io.github.krabka.remotestorage.v1.ListSegmentsRequest;
import io.github.krabka.remotestorage.v1.ListSegmentsResponse;
import io.github.krabka.remotestorage.v1.PutPartitionDeleteRequest;
import io.github.krabka.remotestorage.v1.Segment;
import io.github.krabka.remotestorage.v1.UpdateSegmentRequest;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadataUpdate;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentState;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteMetadata;
import org.apache.kafka.server.log.remote.storage.RemotePartitionDeleteState;

/**
 * Moves a cluster's tiered-storage metadata from Kafka's topic-based
 * manager (TBRLMM, the topic __remote_log_metadata) into the store, and
 * compares the two. Runs on the Kafka installation's libraries (its
 * kafka-clients and kafka-storage), with the plugin jar on the class path;
 * see docs/KAFKA.md ("Moving from the topic-based manager") for how to run
 * it, what resume relies on, and the exit codes.
 *
 * <ul>
 * <li>{@code import}: replays the topic from its beginning, each metadata
 * partition in order, as TBRLMM does, and applies every record TBRLMM takes
 * through rlmmd from the checkpoint on: the offsets committed for the
 * consumer group {@code --group}, advanced only after the writes they cover
 * are done. {@code --follow} keeps tailing the topic.</li>
 * <li>{@code verify}: builds TBRLMM's answers with Kafka's own
 * RemotePartitionMetadataStore and compares them with rlmmd's, partition by
 * partition.</li>
 * </ul>
 */
public final class TbrlmmTool {
    /** Finished; for verify: no difference. */
    public static final int EXIT_OK = 0;
    /** verify: differences; import: finished, but the store refused records TBRLMM takes. */
    public static final int EXIT_DIFFERENCES = 1;
    /** Stopped on an error named in its output: nothing past the error was written. */
    public static final int EXIT_ERROR = 2;
    /** A wrong command line. */
    public static final int EXIT_USAGE = 64;

    static final String USAGE = String.join("\n",
        "usage: TbrlmmTool import|verify --bootstrap-server HOST:PORT --rlmmd TARGET [options]",
        "  --topic NAME              the topic to read (default " + MetadataRecords.TOPIC + "; e.g. a copy of it)",
        "  --consumer-config FILE    Kafka consumer properties (security, ...) for reading the topic",
        "  --rlmmd-config FILE       the plugin's rlmmd.* properties (TLS, timeouts); --rlmmd sets rlmmd.target",
        "  --skip-unparsable         skip a record that cannot be parsed (named in the output) instead of stopping",
        "  --skip-deleted            import: skip the records of segments whose deletion finishes in the topic, which",
        "                            TBRLMM forgets, unless the store holds them: writes about the live set, not the history",
        "import only:",
        "  --group NAME              consumer group holding the checkpoint (default remotestorage-import)",
        "  --follow                  keep tailing the topic after catching up, until stopped (SIGTERM or SIGINT)",
        "  --max-rate N              at most N writes a second (default: no limit)",
        "  --parallelism N           writes in flight, each user partition's in order on one (default 8)",
        "  --progress-interval-ms N  progress line period on stderr (default 5000)",
        "  --checkpoint-interval-ms N  how often the checkpoint is committed (default 1000)",
        "  --retry-timeout-ms N      how long to retry rlmmd or Kafka while it does not answer (default 1800000)");

    private final PrintStream out;
    private final PrintStream err;
    private volatile boolean stopped;
    private final java.util.concurrent.CountDownLatch finished = new java.util.concurrent.CountDownLatch(1);
    private volatile KafkaConsumer<byte[], byte[]> liveConsumer;

    // Options.
    private String mode;
    private String bootstrap;
    private String rlmmdTarget;
    private String consumerConfig;
    private String rlmmdConfig;
    private boolean skipUnparsable;
    private boolean skipDeleted;
    private String topic = MetadataRecords.TOPIC;
    private String group = "remotestorage-import";
    private boolean follow;
    private long maxRate;
    private long progressIntervalMs = 5000;
    private long checkpointIntervalMs = 1000;
    private int parallelism = 8;
    private long retryTimeoutMs = 1_800_000;

    // Import counters (read by tests through the getters).
    private final AtomicLong read = new AtomicLong();
    private final AtomicLong applied = new AtomicLong();
    private final AtomicLong already = new AtomicLong();
    private final AtomicLong dropped = new AtomicLong();
    private final AtomicLong storeRefused = new AtomicLong();
    private final AtomicLong skipped = new AtomicLong();
    private final AtomicLong forgotten = new AtomicLong();

    public TbrlmmTool(PrintStream out, PrintStream err) {
        this.out = out;
        this.err = err;
    }

    public static void main(String[] args) {
        TbrlmmTool tool = new TbrlmmTool(System.out, System.err);
        // SIGTERM or SIGINT: stop reading, finish the writes in flight, commit them, then exit.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            tool.stop();
            try {
                tool.finished.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "tbrlmm-tool-stop"));
        System.exit(tool.run(args));
    }

    /** Stops a running import (follow mode's way out): it commits what it applied and returns. */
    public void stop() {
        stopped = true;
        KafkaConsumer<byte[], byte[]> c = liveConsumer;
        if (c != null) {
            c.wakeup();
        }
    }

    public long applied() {
        return applied.get();
    }

    /** Records skipped by --skip-deleted. */
    public long skippedDeleted() {
        return forgotten.get();
    }

    public long alreadyApplied() {
        return already.get();
    }

    public long dropped() {
        return dropped.get();
    }

    public long storeRefused() {
        return storeRefused.get();
    }

    public long skipped() {
        return skipped.get();
    }

    /** Stops the tool with an exit code and a message. */
    static final class Stop extends Exception {
        final int code;

        Stop(int code, String msg) {
            super(msg);
            this.code = code;
        }
    }

    public int run(String... args) {
        try {
            parse(args);
        } catch (Stop e) {
            err.println(e.getMessage());
            err.println(USAGE);
            return e.code;
        }
        try {
            return mode.equals("import") ? runImport() : runVerify();
        } catch (Stop e) {
            err.println(mode + ": " + e.getMessage());
            return e.code;
        } finally {
            finished.countDown();
        }
    }

    private void parse(String[] args) throws Stop {
        if (args.length == 0 || !(args[0].equals("import") || args[0].equals("verify"))) {
            throw new Stop(EXIT_USAGE, "the first argument is the mode: import or verify");
        }
        mode = args[0];
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--skip-unparsable" -> skipUnparsable = true;
                case "--skip-deleted" -> skipDeleted = true;
                case "--follow" -> follow = true;
                case "--bootstrap-server" -> bootstrap = value(args, ++i, a);
                case "--rlmmd" -> rlmmdTarget = value(args, ++i, a);
                case "--consumer-config" -> consumerConfig = value(args, ++i, a);
                case "--rlmmd-config" -> rlmmdConfig = value(args, ++i, a);
                case "--group" -> group = value(args, ++i, a);
                case "--topic" -> topic = value(args, ++i, a);
                case "--max-rate" -> maxRate = number(args, ++i, a);
                case "--progress-interval-ms" -> progressIntervalMs = number(args, ++i, a);
                case "--checkpoint-interval-ms" -> checkpointIntervalMs = number(args, ++i, a);
                case "--parallelism" -> parallelism = (int) Math.max(1, Math.min(256, number(args, ++i, a)));
                case "--retry-timeout-ms" -> retryTimeoutMs = number(args, ++i, a);
                default -> throw new Stop(EXIT_USAGE, "unknown argument " + a);
            }
        }
        if (bootstrap == null) {
            throw new Stop(EXIT_USAGE, "--bootstrap-server is required");
        }
        if (rlmmdTarget == null) {
            throw new Stop(EXIT_USAGE, "--rlmmd is required");
        }
        if (mode.equals("verify") && (follow || maxRate != 0 || skipDeleted)) {
            throw new Stop(EXIT_USAGE, "--follow, --max-rate and --skip-deleted are import options");
        }
    }

    private static String value(String[] args, int i, String flag) throws Stop {
        if (i >= args.length) {
            throw new Stop(EXIT_USAGE, flag + " needs a value");
        }
        return args[i];
    }

    private static long number(String[] args, int i, String flag) throws Stop {
        String v = value(args, i, flag);
        try {
            long n = Long.parseLong(v);
            if (n < 0) {
                throw new NumberFormatException();
            }
            return n;
        } catch (NumberFormatException e) {
            throw new Stop(EXIT_USAGE, flag + " takes a number >= 0, not " + v);
        }
    }

    private static Properties load(String file) throws Stop {
        Properties p = new Properties();
        if (file != null) {
            try (InputStream in = new FileInputStream(file)) {
                p.load(in);
            } catch (IOException e) {
                throw new Stop(EXIT_USAGE, "cannot read " + file + ": " + e.getMessage());
            }
        }
        return p;
    }

    // ---- Kafka side ----

    private KafkaConsumer<byte[], byte[]> consumer(boolean withGroup) throws Stop {
        Properties p = load(consumerConfig);
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putIfAbsent(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
        p.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG, "remotestorage-" + mode);
        if (withGroup) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        } else {
            p.remove(ConsumerConfig.GROUP_ID_CONFIG);
        }
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** The metadata partitions, assigned to the consumer. */
    private List<TopicPartition> assign(KafkaConsumer<byte[], byte[]> c) throws Stop {
        List<PartitionInfo> infos = retry("list the partitions of " + topic,
            () -> c.partitionsFor(topic, Duration.ofSeconds(30)));
        if (infos == null || infos.isEmpty()) {
            throw new Stop(EXIT_ERROR, "the topic " + topic + " does not exist at " + bootstrap
                + ": nothing to read (is this the cluster whose brokers run the topic-based manager?)");
        }
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo i : infos) {
            tps.add(new TopicPartition(i.topic(), i.partition()));
        }
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        c.assign(tps);
        return tps;
    }

    interface RecordHandler {
        void record(int partition, long offset, RemoteLogMetadata m) throws Stop;
    }

    interface BatchHandler {
        void batchDone() throws Stop;
    }

    /**
     * Reads the assigned partitions from the beginning, each in order, until
     * every partition's position reaches {@code ends} (or, following, until
     * stopped). A record of an unknown serde version stops the read; an
     * unparsable one too, unless --skip-unparsable.
     */
    private void readTopic(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, Long> ends, boolean tail,
                           RecordHandler handler, BatchHandler batchDone, boolean countSkips) throws Stop {
        MetadataRecords records = new MetadataRecords(topic);
        c.seekToBeginning(c.assignment());
        while (!stopped) {
            if (!tail && reached(c, ends)) {
                return;
            }
            ConsumerRecords<byte[], byte[]> batch;
            try {
                batch = c.poll(Duration.ofMillis(200));
            } catch (WakeupException e) {
                return;
            }
            for (ConsumerRecord<byte[], byte[]> r : batch) {
                RemoteLogMetadata m;
                try {
                    m = records.decode(r.partition(), r.offset(), r.value());
                } catch (MetadataRecords.UnknownVersionException e) {
                    throw new Stop(EXIT_ERROR, e.getMessage());
                } catch (MetadataRecords.UnparsableException e) {
                    if (!skipUnparsable) {
                        throw new Stop(EXIT_ERROR, e.getMessage() + " (--skip-unparsable skips such records)");
                    }
                    if (countSkips) {
                        skipped.incrementAndGet();
                        err.println(mode + ": skipped: " + e.getMessage());
                    }
                    continue;
                }
                handler.record(r.partition(), r.offset(), m);
            }
            batchDone.batchDone();
        }
    }

    private boolean reached(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, Long> ends) throws Stop {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            long pos = retry("read the position in " + e.getKey(), () -> c.position(e.getKey(), Duration.ofSeconds(30)));
            if (pos < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    // ---- rlmmd side ----

    private RlmmdChannel channel;
    private RlmmdClient rlmmd;

    private void connect() throws Stop {
        Properties p = load(rlmmdConfig);
        Map<String, Object> cfg = new HashMap<>();
        p.forEach((k, v) -> cfg.put((String) k, v));
        cfg.put(RlmmdConfig.TARGET, rlmmdTarget);
        RlmmdConfig rc;
        try {
            rc = new RlmmdConfig(cfg);
            channel = RlmmdChannel.open(rc.target(), RlmmdRemoteLogMetadataManager.credentials(rc), rc.callTimeoutMs());
        } catch (RuntimeException e) {
            throw new Stop(EXIT_USAGE, "rlmmd " + rlmmdTarget + ": " + e.getMessage());
        }
        rlmmd = new RlmmdClient(channel.channel(), rc.callTimeoutMs(), rc.listTimeoutMs());
    }

    private static boolean retryable(StatusRuntimeException e) {
        Status.Code code = e.getStatus().getCode();
        ErrorKind kind = RlmmdRemoteLogMetadataManager.detail(e).getKind();
        return code == Status.Code.UNAVAILABLE || code == Status.Code.DEADLINE_EXCEEDED || code == Status.Code.UNKNOWN
            || code == Status.Code.ABORTED || code == Status.Code.RESOURCE_EXHAUSTED || code == Status.Code.CANCELLED
            || kind == ErrorKind.ERROR_KIND_IO || kind == ErrorKind.ERROR_KIND_NOT_READY;
    }

    /**
     * Runs a call until it succeeds or fails for a reason that retrying
     * does not change; an rlmmd or Kafka that does not answer is retried
     * with backoff (0.1 s doubling to 5 s) for up to --retry-timeout-ms.
     * A write that failed with its outcome unknown is retried the same
     * way: the idempotent application of each record recognises one that
     * did apply.
     */
    private <T> T retry(String what, Supplier<T> call) throws Stop {
        long deadline = System.nanoTime() + Duration.ofMillis(retryTimeoutMs).toNanos();
        long backoffMs = 100;
        boolean logged = false;
        while (true) {
            RuntimeException failure;
            try {
                T v = call.get();
                if (logged) {
                    err.println(mode + ": " + what + ": answered again");
                }
                return v;
            } catch (StatusRuntimeException e) {
                if (!retryable(e)) {
                    throw e;
                }
                failure = e;
            } catch (WakeupException e) {
                continue; // stop() woke the consumer up: the wake-up is spent, the call is made again
            } catch (org.apache.kafka.common.errors.RetriableException e) {
                failure = e;
            }
            if (System.nanoTime() > deadline || stopped) {
                throw new Stop(EXIT_ERROR, what + ": gave up after " + retryTimeoutMs + " ms: " + brief(failure));
            }
            if (!logged) {
                err.println(mode + ": " + what + ": " + brief(failure) + "; retrying with backoff");
                logged = true;
            }
            try {
                Thread.sleep(backoffMs);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new Stop(EXIT_ERROR, what + ": interrupted");
            }
            backoffMs = Math.min(5000, backoffMs * 2);
        }
    }

    private static String brief(RuntimeException e) {
        return e instanceof StatusRuntimeException s ? RlmmdRemoteLogMetadataManager.brief(s) : e.toString();
    }

    /** The store's segments of a partition (forgotten ones excepted), and whether its deletion finished. */
    private record StoreList(List<RemoteLogSegmentMetadata> segments, boolean deleted) {
    }

    private StoreList storeList(TopicIdPartition tp) throws Stop {
        return retry("list the store's segments of " + tp, () -> {
            List<RemoteLogSegmentMetadata> segs = new ArrayList<>();
            boolean deleted = false;
            Iterator<ListSegmentsResponse> it = rlmmd.list(ListSegmentsRequest.newBuilder().setTopicIdPartition(Convert.tp(tp)).build());
            while (it.hasNext()) {
                ListSegmentsResponse r = it.next();
                deleted |= r.getPartitionDeleted();
                for (Segment s : r.getSegmentsList()) {
                    segs.add(Convert.segment(s));
                }
            }
            return new StoreList(segs, deleted);
        });
    }

    // ---- import ----

    private enum Outcome { APPLIED, ALREADY, REFUSED }

    /** How many times the topic is read before a conflict with the store is final, and the pause between. */
    static final int CONFLICT_READS = 5;
    static final Duration CONFLICT_PAUSE = Duration.ofSeconds(1);

    private int runImport() throws Stop {
        connect();
        try (KafkaConsumer<byte[], byte[]> c = consumer(true)) {
            liveConsumer = c;
            List<TopicPartition> tps = assign(c);
            Map<TopicPartition, Long> ends = new HashMap<>(retry("read the end offsets of " + topic,
                () -> c.endOffsets(tps, Duration.ofSeconds(30))));
            Map<TopicPartition, OffsetAndMetadata> groupOffsets = retry("read the checkpoint of group " + group,
                () -> c.committed(new HashSet<>(tps), Duration.ofSeconds(30)));
            Map<Integer, Long> checkpoint = new TreeMap<>();
            for (TopicPartition tp : tps) {
                OffsetAndMetadata o = groupOffsets.get(tp);
                checkpoint.put(tp.partition(), o == null ? 0L : o.offset());
            }
            err.println("import: " + topic + " has " + tps.size() + " partitions, ends " + offsets(ends)
                + "; checkpoint of group " + group + ": " + checkpoint);

            // Pass 1: every record up to the ends is read and parsed before
            // anything is written, and TBRLMM's final state is built for the
            // comparison with the store.
            // A broker on the plugin with the mirror on writes the store
            // first, then the topic: a conflict may be a change whose record
            // is not in the topic yet. The topic is read again, to its new
            // ends, before a conflict is final.
            TbrlmmModel lastScan;
            long[] lastInStore;
            Set<Uuid> lastIds;
            List<String> conflicts;
            for (int attempt = 1; ; attempt++) {
                TbrlmmModel s = new TbrlmmModel(false);
                readTopic(c, ends, false, (p, o, m) -> s.apply(m), () -> { }, false);
                if (stopped) {
                    return EXIT_ERROR;
                }
                lastScan = s;
                lastInStore = new long[] {0};
                lastIds = new HashSet<>();
                conflicts = conflicts(lastScan, lastInStore, lastIds);
                if (conflicts.isEmpty() || attempt == CONFLICT_READS) {
                    break;
                }
                err.println("import: " + conflicts.size() + " conflicts, perhaps changes of brokers on the plugin not in " + topic
                    + " yet: reading it again in " + CONFLICT_PAUSE.toMillis() + " ms (" + attempt + " of " + CONFLICT_READS + ")");
                try {
                    Thread.sleep(CONFLICT_PAUSE.toMillis());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return EXIT_ERROR;
                }
                ends.putAll(retry("read the end offsets of " + topic, () -> c.endOffsets(tps, Duration.ofSeconds(30))));
            }
            TbrlmmModel scan = lastScan;
            long[] inStore = lastInStore;
            Set<Uuid> storeIds = lastIds;
            if (!conflicts.isEmpty()) {
                conflicts.forEach(x -> err.println("import: conflict: " + x));
                throw new Stop(EXIT_ERROR, conflicts.size() + " conflicts between the store and " + topic
                    + ": the store holds metadata the topic does not; nothing was written");
            }
            // A checkpoint that says records were applied, and a store that
            // holds none of the topic's live segments: another database than
            // the one the group imported into. Resuming would skip them.
            if (checkpoint.values().stream().anyMatch(x -> x > 0) && scan.liveSegments() > 0 && inStore[0] == 0) {
                throw new Stop(EXIT_ERROR, "the checkpoint of group " + group + " (" + checkpoint + ") says records were applied, but the store "
                    + "holds none of the topic's " + scan.liveSegments() + " live segments: another database than the group imported into? "
                    + "Import into an empty database with a new --group; nothing was written");
            }

            // Pass 2: replay from the beginning (TBRLMM's state before each
            // record decides whether it takes it) and write from the checkpoint on.
            TbrlmmModel model = new TbrlmmModel(false);
            Map<Integer, Long> done = new TreeMap<>(checkpoint);
            long start = System.nanoTime();
            long[] lastProgress = {start};
            long[] lastCommit = {start};
            // What is committed; checkpoint stays what this run started from.
            Map<Integer, Long> committed = new TreeMap<>(checkpoint);
            long[] writes = {0};
            // Following: a user partition first named after the first pass
            // is compared with the store before its first write.
            Set<TopicIdPartition> checked = new HashSet<>(scan.partitions());
            try (Appliers appliers = new Appliers(scan)) {
                readTopic(c, ends, follow, (p, o, m) -> {
                    TbrlmmModel.Refusal r = model.apply(m);
                    if (o < checkpoint.get(p)) {
                        return;
                    }
                    read.incrementAndGet();
                    Uuid segment = m instanceof RemoteLogSegmentMetadata s ? s.remoteLogSegmentId().id()
                        : m instanceof RemoteLogSegmentMetadataUpdate u ? u.remoteLogSegmentId().id() : null;
                    if (r == null && skipDeleted && segment != null && forgottenAtEnd(scan, m.topicIdPartition(), segment)
                        && !storeIds.contains(segment)) {
                        forgotten.incrementAndGet();
                    } else if (r != null) {
                        dropped.incrementAndGet();
                        err.println("import: " + MetadataRecords.at(topic, p, o) + ": dropped, as TBRLMM drops it: " + r.what + " (" + describe(m) + ")");
                    } else {
                        if (checked.add(m.topicIdPartition())) {
                            requireEmpty(m.topicIdPartition(), p, o, m);
                        }
                        throttle(start, ++writes[0]);
                        appliers.submit(m, p, o, model.deleteState(m.topicIdPartition()) != null);
                    }
                    done.put(p, o + 1);
                    tick(c, tps, appliers.safe(done), committed, start, lastCommit, lastProgress, false);
                }, () -> tick(c, tps, appliers.safe(done), committed, start, lastCommit, lastProgress, true), true);
                appliers.finish(() -> tick(c, tps, appliers.safe(done), committed, start, lastCommit, lastProgress, false));
                commit(c, appliers.safe(done), committed);
            }
            out.println("import: done: " + progress(start) + ", lag " + lag(c, tps, done));
            return storeRefused.get() > 0 ? EXIT_DIFFERENCES : EXIT_OK;
        } finally {
            liveConsumer = null;
            channel.close();
        }
    }

    /**
     * Applies the records TBRLMM takes on --parallelism threads: the records
     * of one user partition on one thread, in the topic's order, so that
     * the store sees each partition's records in order (records of
     * different partitions are independent). The checkpoint of a metadata
     * partition is the lowest offset still in flight there: every write
     * before it is done. A record whose write failed stays in flight, so
     * the checkpoint never passes it.
     */
    /** The periodic work of the import's main thread (see tick). */
    private interface Tick {
        void run() throws Stop;
    }

    private final class Appliers implements AutoCloseable {
        private record Task(RemoteLogMetadata m, int p, long o, boolean deleteBefore) {
        }

        private final Task end = new Task(null, -1, -1, false);
        private final TbrlmmModel scan;
        private final List<java.util.concurrent.BlockingQueue<Task>> queues = new ArrayList<>();
        private final List<Thread> threads = new ArrayList<>();
        private final Map<Integer, java.util.concurrent.ConcurrentSkipListSet<Long>> inFlight = new java.util.concurrent.ConcurrentHashMap<>();
        private final Set<Uuid> refusedAdds = java.util.concurrent.ConcurrentHashMap.newKeySet();
        private volatile Stop failure;

        Appliers(TbrlmmModel scan) {
            this.scan = scan;
            for (int i = 0; i < parallelism; i++) {
                java.util.concurrent.BlockingQueue<Task> q = new java.util.concurrent.ArrayBlockingQueue<>(1000);
                queues.add(q);
                Thread t = new Thread(() -> work(q), "tbrlmm-import-" + i);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
        }

        private void work(java.util.concurrent.BlockingQueue<Task> q) {
            while (true) {
                Task t;
                try {
                    t = q.take();
                } catch (InterruptedException e) {
                    return;
                }
                if (t == end) {
                    return;
                }
                if (failure != null) {
                    continue; // stays in flight: the checkpoint does not pass it
                }
                try {
                    Outcome out = write(t.m(), refusedAdds, t.p(), t.o(), t.deleteBefore(), scan);
                    (out == Outcome.APPLIED ? applied : out == Outcome.ALREADY ? already : storeRefused).incrementAndGet();
                    inFlight.get(t.p()).remove(t.o());
                } catch (Stop e) {
                    failure = e;
                } catch (RuntimeException e) {
                    failure = new Stop(EXIT_ERROR, MetadataRecords.at(topic, t.p(), t.o()) + ": " + e);
                }
            }
        }

        void submit(RemoteLogMetadata m, int p, long o, boolean deleteBefore) throws Stop {
            check();
            inFlight.computeIfAbsent(p, k -> new java.util.concurrent.ConcurrentSkipListSet<>()).add(o);
            java.util.concurrent.BlockingQueue<Task> q = queues.get(Math.floorMod(m.topicIdPartition().hashCode(), queues.size()));
            try {
                while (!q.offer(new Task(m, p, o, deleteBefore), 100, TimeUnit.MILLISECONDS)) {
                    check();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new Stop(EXIT_ERROR, "interrupted");
            }
        }

        private void check() throws Stop {
            if (failure != null) {
                throw failure;
            }
        }

        /** Per metadata partition, the offset before which every write is done. */
        Map<Integer, Long> safe(Map<Integer, Long> handled) throws Stop {
            Map<Integer, Long> out = new TreeMap<>(handled);
            inFlight.forEach((p, offsets) -> {
                Long first = offsets.isEmpty() ? null : offsets.first();
                if (first != null) {
                    out.put(p, Math.min(first, handled.get(p)));
                }
            });
            return out;
        }

        /**
         * Waits for every submitted write, running tick (the checkpoint's
         * commit and the progress line) while it waits; throws the first
         * failure.
         */
        void finish(Tick tick) throws Stop {
            try {
                for (java.util.concurrent.BlockingQueue<Task> q : queues) {
                    while (!q.offer(end, 200, TimeUnit.MILLISECONDS)) {
                        check();
                        tick.run();
                    }
                }
                for (Thread t : threads) {
                    while (t.isAlive()) {
                        t.join(200);
                        tick.run();
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new Stop(EXIT_ERROR, "interrupted");
            }
            check();
        }

        @Override
        public void close() {
            threads.forEach(Thread::interrupt);
        }
    }

    /** Commits the checkpoint and prints the progress line when their periods have passed (the commit at each batch's end too). */
    private void tick(KafkaConsumer<byte[], byte[]> c, List<TopicPartition> tps, Map<Integer, Long> done, Map<Integer, Long> committed,
                      long start, long[] lastCommit, long[] lastProgress, boolean batchEnd) throws Stop {
        long now = System.nanoTime();
        if (batchEnd || Duration.ofNanos(now - lastCommit[0]).toMillis() >= checkpointIntervalMs) {
            commit(c, done, committed);
            lastCommit[0] = now;
        }
        if (Duration.ofNanos(now - lastProgress[0]).toMillis() >= progressIntervalMs) {
            lastProgress[0] = now;
            err.println("import: " + progress(start) + ", lag " + lag(c, tps, done));
        }
    }

    private String progress(long start) {
        double s = Math.max(1e-3, (System.nanoTime() - start) / 1e9);
        long handled = applied.get() + already.get() + dropped.get() + storeRefused.get() + forgotten.get();
        return String.format("%d records read, %d applied, %d already in the store, %d dropped as TBRLMM drops them, "
                + "%d refused by the store, %d unparsable skipped%s; %.0f records/s",
            read.get(), applied.get(), already.get(), dropped.get(), storeRefused.get(), skipped.get(),
            skipDeleted ? ", " + forgotten.get() + " of segments deleted within the topic skipped" : "", handled / s);
    }

    /** Per metadata partition: its end offset minus the offset before which every record is applied. */
    private String lag(KafkaConsumer<byte[], byte[]> c, List<TopicPartition> tps, Map<Integer, Long> appliedTo) {
        try {
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(10));
            StringBuilder b = new StringBuilder();
            for (TopicPartition tp : tps) {
                b.append(b.length() == 0 ? "" : " ").append(tp.partition()).append('=')
                    .append(Math.max(0, ends.get(tp) - appliedTo.getOrDefault(tp.partition(), 0L)));
            }
            return b.toString();
        } catch (RuntimeException e) {
            return "unknown (" + e + ")";
        }
    }

    private static String offsets(Map<TopicPartition, Long> m) {
        Map<Integer, Long> byPartition = new TreeMap<>();
        m.forEach((k, v) -> byPartition.put(k.partition(), v));
        return byPartition.toString();
    }

    private void throttle(long start, long n) throws Stop {
        if (maxRate == 0) {
            return;
        }
        long due = start + (long) (n * 1e9 / maxRate);
        long wait = due - System.nanoTime();
        if (wait > 0) {
            try {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new Stop(EXIT_ERROR, "interrupted");
            }
        }
    }

    /** Commits, for each metadata partition, the offset after the last record whose write is done. */
    private void commit(KafkaConsumer<byte[], byte[]> c, Map<Integer, Long> done, Map<Integer, Long> committed) throws Stop {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        done.forEach((p, o) -> {
            if (o > committed.get(p)) {
                offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(o));
            }
        });
        if (offsets.isEmpty()) {
            return;
        }
        retry("commit the checkpoint of group " + group, () -> {
            c.commitSync(offsets, Duration.ofSeconds(30));
            return null;
        });
        offsets.forEach((tp, o) -> committed.put(tp.partition(), o.offset()));
    }

    /**
     * Applies one record TBRLMM takes, idempotently: a record the store
     * already holds (applied by an earlier run that stopped before its
     * checkpoint, or by a retried call whose outcome was unknown) is
     * recognised by the store's answer and counted as already there.
     */
    private Outcome write(RemoteLogMetadata m, Set<Uuid> refusedAdds, int p, long o, boolean deleteBefore, TbrlmmModel scan) throws Stop {
        String where = MetadataRecords.at(topic, p, o);
        try {
            if (m instanceof RemoteLogSegmentMetadata s) {
                retry(where + ": add", () -> rlmmd.call().addSegment(AddSegmentRequest.newBuilder().setSegment(Convert.segment(s)).build()));
            } else if (m instanceof RemoteLogSegmentMetadataUpdate u) {
                retry(where + ": update", () -> rlmmd.call().updateSegment(UpdateSegmentRequest.newBuilder().setUpdate(Convert.update(u)).build()));
            } else {
                RemotePartitionDeleteMetadata d = (RemotePartitionDeleteMetadata) m;
                retry(where + ": partition delete", () -> rlmmd.call().putPartitionDelete(
                    PutPartitionDeleteRequest.newBuilder().setPartitionDelete(Convert.partitionDelete(d)).build()));
            }
            return Outcome.APPLIED;
        } catch (StatusRuntimeException e) {
            ErrorDetail d = RlmmdRemoteLogMetadataManager.detail(e);
            String desc = Objects.toString(e.getStatus().getDescription(), "");
            if (m instanceof RemoteLogSegmentMetadata s) {
                if (d.getKind() == ErrorKind.ERROR_KIND_INVALID_ADD && desc.contains("segment id was already added")) {
                    return Outcome.ALREADY;
                }
                // The store refuses adds to a partition with a delete record;
                // TBRLMM does not. When the topic's record of it comes later,
                // an earlier run applied it.
                TopicIdPartition tp = s.topicIdPartition();
                if (d.getKind() == ErrorKind.ERROR_KIND_INVALID_ADD && desc.contains("has a partition delete record")
                    && !deleteBefore && scan.deleteState(tp) != null) {
                    return Outcome.ALREADY;
                }
                refusedAdds.add(s.remoteLogSegmentId().id());
            } else if (m instanceof RemoteLogSegmentMetadataUpdate u) {
                if (d.getKind() == ErrorKind.ERROR_KIND_INVALID_SEGMENT_TRANSITION && d.hasFoundSegmentState()
                    && Convert.state(d.getFoundSegmentState()).ordinal() > u.state().ordinal()) {
                    return Outcome.ALREADY; // the store is past it: a later record of this segment was applied
                }
                if (d.getKind() == ErrorKind.ERROR_KIND_SEGMENT_NOT_FOUND && !refusedAdds.contains(u.remoteLogSegmentId().id())) {
                    return Outcome.ALREADY; // forgotten and purged: its deletion, later in the topic, was applied
                }
            } else {
                RemotePartitionDeleteMetadata pd = (RemotePartitionDeleteMetadata) m;
                if (d.getKind() == ErrorKind.ERROR_KIND_INVALID_PARTITION_DELETE_TRANSITION && d.hasFoundPartitionDeleteState()
                    && d.getFoundPartitionDeleteState().getNumber() > Convert.state(pd.state()).getNumber()) {
                    return Outcome.ALREADY;
                }
            }
            err.println("import: " + where + ": the store refuses what TBRLMM takes: " + describe(m) + ": "
                + RlmmdRemoteLogMetadataManager.error("write", e).getMessage());
            return Outcome.REFUSED;
        }
    }

    static String describe(RemoteLogMetadata m) {
        if (m instanceof RemoteLogSegmentMetadata s) {
            return "add of segment " + s.remoteLogSegmentId().id() + " of " + s.topicIdPartition() + " [" + s.startOffset() + ", "
                + s.endOffset() + "] in " + s.state();
        }
        if (m instanceof RemoteLogSegmentMetadataUpdate u) {
            return "update of segment " + u.remoteLogSegmentId().id() + " of " + u.remoteLogSegmentId().topicIdPartition() + " to " + u.state();
        }
        RemotePartitionDeleteMetadata d = (RemotePartitionDeleteMetadata) m;
        return "partition delete of " + d.topicIdPartition() + " to " + d.state();
    }

    /**
     * What the store holds that the topic does not: a segment of a partition
     * the topic names that the topic never added (or added with other
     * offsets, epochs or size), a segment further in its life than the topic
     * ever takes it, or a partition the store deleted and the topic did not.
     * An earlier import of the same records is none of these.
     */
    private List<String> conflicts(TbrlmmModel scan, long[] inStore, Set<Uuid> storeIds) throws Stop {
        List<String> out = new ArrayList<>();
        for (TopicIdPartition tp : scan.partitions()) {
            StoreList store = storeList(tp);
            inStore[0] += store.segments().size() + (store.deleted() ? 1 : 0);
            store.segments().forEach(x -> storeIds.add(x.remoteLogSegmentId().id()));
            if (store.deleted() && scan.deleteState(tp) != RemotePartitionDeleteState.DELETE_PARTITION_FINISHED) {
                out.add(tp + ": the store finished deleting the partition; the topic did not");
            }
            for (RemoteLogSegmentMetadata s : store.segments()) {
                Uuid id = s.remoteLogSegmentId().id();
                RemoteLogSegmentMetadata add = scan.added(id);
                if (add == null || !add.topicIdPartition().equals(tp)) {
                    out.add(tp + ": segment " + id + " [" + s.startOffset() + ", " + s.endOffset() + "] is in the store, not in the topic");
                    continue;
                }
                if (!sameAdd(s, add)) {
                    out.add(tp + ": segment " + id + " differs: the store has " + fields(s) + ", the topic " + fields(add));
                    continue;
                }
                Optional<RemoteLogSegmentState> last = scan.state(tp, id);
                if (last.isPresent() && s.state().ordinal() > last.get().ordinal()) {
                    out.add(tp + ": segment " + id + " is in " + s.state() + " in the store, the topic takes it to " + last.get() + " only");
                }
            }
        }
        return out;
    }

    /**
     * A segment the topic added and TBRLMM no longer holds at the end of the
     * first pass: its deletion finished (or the partition's).
     */
    private static boolean forgottenAtEnd(TbrlmmModel scan, TopicIdPartition tp, Uuid segment) {
        return scan.added(segment) != null && scan.state(tp, segment).isEmpty();
    }

    /**
     * A user partition the first pass did not see: the store must hold
     * nothing of it, unless this first record is the add of a segment the
     * store holds as the record says, which is what a broker on the plugin
     * with the mirror on writes (to the store, then to the topic).
     */
    private void requireEmpty(TopicIdPartition tp, int p, long o, RemoteLogMetadata first) throws Stop {
        StoreList store = storeList(tp);
        if (!store.deleted() && first instanceof RemoteLogSegmentMetadata add
            && store.segments().stream().anyMatch(s -> s.remoteLogSegmentId().equals(add.remoteLogSegmentId()) && sameAdd(s, add))) {
            return;
        }
        if (store.deleted() || !store.segments().isEmpty()) {
            throw new Stop(EXIT_ERROR, "conflict: " + MetadataRecords.at(topic, p, o) + " is the first record of " + tp
                + ", of which the store already holds " + (store.deleted() ? "a finished deletion" : store.segments().size() + " segments")
                + " the topic does not: stopped before writing it");
        }
    }

    /** The fields an add fixes, equal. */
    private static boolean sameAdd(RemoteLogSegmentMetadata s, RemoteLogSegmentMetadata add) {
        return add.startOffset() == s.startOffset() && add.endOffset() == s.endOffset() && add.maxTimestampMs() == s.maxTimestampMs()
            && add.segmentSizeInBytes() == s.segmentSizeInBytes() && add.segmentLeaderEpochs().equals(s.segmentLeaderEpochs());
    }

    private static String fields(RemoteLogSegmentMetadata s) {
        return "[" + s.startOffset() + ", " + s.endOffset() + "] max timestamp " + s.maxTimestampMs() + " size " + s.segmentSizeInBytes()
            + " epochs " + new TreeMap<>(s.segmentLeaderEpochs());
    }

    // ---- verify ----

    private int runVerify() throws Stop {
        connect();
        TbrlmmModel model = new TbrlmmModel(true);
        try (KafkaConsumer<byte[], byte[]> c = consumer(false)) {
            liveConsumer = c;
            List<TopicPartition> tps = assign(c);
            Map<TopicPartition, Long> ends = new HashMap<>(retry("read the end offsets of " + topic,
                () -> c.endOffsets(tps, Duration.ofSeconds(30))));
            readTopic(c, ends, false, (p, o, m) -> {
                read.incrementAndGet();
                if (model.apply(m) != null) {
                    dropped.incrementAndGet();
                }
            }, () -> { }, true);
            List<String> diffs = new ArrayList<>();
            long[] compared = new long[3];
            for (TopicIdPartition tp : model.partitions()) {
                comparePartition(model, tp, diffs, compared);
            }
            diffs.forEach(d -> out.println("verify: difference: " + d));
            out.println("verify: " + read.get() + " records read (" + dropped.get() + " dropped as TBRLMM drops them, " + skipped.get()
                + " unparsable skipped); compared " + model.partitions().size() + " partitions, " + compared[0] + " segments, "
                + compared[1] + " epochs' highest offsets, " + compared[2] + " lookups: " + diffs.size() + " differences");
            return diffs.isEmpty() ? EXIT_OK : EXIT_DIFFERENCES;
        } finally {
            liveConsumer = null;
            channel.close();
        }
    }

    private void comparePartition(TbrlmmModel model, TopicIdPartition tp, List<String> diffs, long[] compared) throws Stop {
        StoreList store = storeList(tp);
        List<RemoteLogSegmentMetadata> kafka;
        try {
            kafka = model.kafkaList(tp);
        } catch (TbrlmmModel.NoPartition e) {
            // TBRLMM answers RemoteResourceNotFoundException: the partition's
            // deletion finished, or it never took a segment of it.
            boolean finished = model.deleteState(tp) == RemotePartitionDeleteState.DELETE_PARTITION_FINISHED;
            if (finished && !store.deleted()) {
                diffs.add(tp + ": TBRLMM finished deleting the partition; the store did not");
            } else if (!finished && !store.segments().isEmpty()) {
                diffs.add(tp + ": TBRLMM holds no segment; the store holds " + store.segments().size());
            }
            return;
        }
        if (store.deleted()) {
            diffs.add(tp + ": the store finished deleting the partition; TBRLMM holds " + kafka.size() + " segments");
            return;
        }
        Map<Uuid, RemoteLogSegmentMetadata> ours = new LinkedHashMap<>();
        store.segments().forEach(s -> ours.put(s.remoteLogSegmentId().id(), s));
        Set<Integer> epochs = new TreeSet<>();
        List<RemoteLogSegmentMetadata> all = new ArrayList<>(kafka);
        for (RemoteLogSegmentMetadata k : kafka) {
            compared[0]++;
            epochs.addAll(k.segmentLeaderEpochs().keySet());
            RemoteLogSegmentMetadata s = ours.remove(k.remoteLogSegmentId().id());
            if (s == null) {
                diffs.add(tp + ": segment " + k.remoteLogSegmentId().id() + " (" + k.state() + ", " + fields(k) + "): TBRLMM holds it, the store does not");
                continue;
            }
            String d = segmentDiff(k, s, model);
            if (!d.isEmpty()) {
                diffs.add(tp + ": segment " + k.remoteLogSegmentId().id() + ":" + d);
            }
        }
        for (RemoteLogSegmentMetadata s : ours.values()) {
            compared[0]++;
            epochs.addAll(s.segmentLeaderEpochs().keySet());
            all.add(s);
            diffs.add(tp + ": segment " + s.remoteLogSegmentId().id() + " (" + s.state() + ", " + fields(s) + "): the store holds it, TBRLMM does not");
        }
        for (int e : epochs) {
            compared[1]++;
            Optional<Long> k = kafkaCall(() -> model.kafkaHighestOffset(tp, e));
            EpochEndOffsetResponse r = retry("highest offset of " + tp + " for epoch " + e, () -> rlmmd.call().epochEndOffset(
                EpochEndOffsetRequest.newBuilder().setTopicIdPartition(Convert.tp(tp)).setEpoch(e).build()));
            Optional<Long> s = r.getFound() ? Optional.of(r.getOffset()) : Optional.empty();
            if (!k.equals(s)) {
                diffs.add(tp + ": highest offset of epoch " + e + ": TBRLMM " + k.map(String::valueOf).orElse("none")
                    + ", the store " + s.map(String::valueOf).orElse("none"));
            }
        }
        Set<String> asked = new HashSet<>();
        for (RemoteLogSegmentMetadata seg : all) {
            for (int e : seg.segmentLeaderEpochs().keySet()) {
                for (long o : new long[] {seg.startOffset(), seg.endOffset()}) {
                    if (!asked.add(e + "@" + o)) {
                        continue;
                    }
                    compared[2]++;
                    Optional<RemoteLogSegmentMetadata> k = kafkaCall(() -> model.kafkaLookup(tp, e, o));
                    GetSegmentResponse r = retry("segment of " + tp + " at epoch " + e + " offset " + o, () -> rlmmd.call().getSegment(
                        GetSegmentRequest.newBuilder().setTopicIdPartition(Convert.tp(tp)).setEpoch(e).setOffset(o).build()));
                    Optional<Uuid> kid = k.map(x -> x.remoteLogSegmentId().id());
                    Optional<Uuid> sid = r.hasSegment() ? Optional.of(Convert.uuid(r.getSegment().getId().getId())) : Optional.empty();
                    // Two segments that both hold the offset in that epoch (the
                    // same range copied twice, across a leadership change) are
                    // both right: TBRLMM and the store break that tie differently.
                    boolean tie = k.isPresent() && r.hasSegment()
                        && holds(k.get(), e, o) && holds(Convert.segment(r.getSegment()), e, o);
                    if (!kid.equals(sid) && !tie) {
                        diffs.add(tp + ": lookup at epoch " + e + " offset " + o + ": TBRLMM " + kid.map(Uuid::toString).orElse("none")
                            + ", the store " + sid.map(Uuid::toString).orElse("none"));
                    }
                }
            }
        }
    }

    interface KafkaRead<T> {
        T get() throws TbrlmmModel.NoPartition;
    }

    /** Whether the segment holds the offset within its range of that leader epoch. */
    static boolean holds(RemoteLogSegmentMetadata seg, int epoch, long offset) {
        Long start = seg.segmentLeaderEpochs().get(epoch);
        if (start == null || offset < start || offset > seg.endOffset()) {
            return false;
        }
        Map.Entry<Integer, Long> next = seg.segmentLeaderEpochs().higherEntry(epoch);
        return next == null || offset < next.getValue();
    }

    private static <T> T kafkaCall(KafkaRead<T> r) {
        try {
            return r.get();
        } catch (TbrlmmModel.NoPartition e) {
            throw new IllegalStateException("Kafka's store lost a partition it listed", e);
        }
    }

    private static String segmentDiff(RemoteLogSegmentMetadata k, RemoteLogSegmentMetadata s, TbrlmmModel model) {
        StringBuilder b = new StringBuilder();
        diff(b, "state", k.state(), s.state());
        diff(b, "start offset", k.startOffset(), s.startOffset());
        diff(b, "end offset", k.endOffset(), s.endOffset());
        diff(b, "max timestamp", k.maxTimestampMs(), s.maxTimestampMs());
        diff(b, "broker id", k.brokerId(), s.brokerId());
        diff(b, "event timestamp", k.eventTimestampMs(), s.eventTimestampMs());
        diff(b, "size", k.segmentSizeInBytes(), s.segmentSizeInBytes());
        diff(b, "leader epochs", new TreeMap<>(k.segmentLeaderEpochs()), new TreeMap<>(s.segmentLeaderEpochs()));
        // TBRLMM clears a segment's custom metadata on an update without
        // one; the store keeps the last one given (API.md): that is what
        // the store must hold.
        String want = k.customMetadata().map(c -> c.value())
            .or(() -> model.storeCustomMetadata(k.remoteLogSegmentId().id())).map(HEX::formatHex).orElse("none");
        diff(b, "custom metadata", want, s.customMetadata().map(c -> HEX.formatHex(c.value())).orElse("none"));
        diff(b, "transaction index empty", Convert.txnIndexEmpty(k), Convert.txnIndexEmpty(s));
        return b.toString();
    }

    private static final java.util.HexFormat HEX = java.util.HexFormat.of();

    private static void diff(StringBuilder b, String what, Object kafka, Object store) {
        if (!Objects.equals(kafka, store)) {
            b.append(' ').append(what).append(": TBRLMM ").append(kafka).append(", the store ").append(store).append(';');
        }
    }
}
